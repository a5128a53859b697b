//! The controllers of the `appotp.learn.com` API group.

pub mod app_otp;

pub mod policy;
// +rsbuilder:scaffold:controllers
