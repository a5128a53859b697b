//! The controllers of the `appotp.learn.com` API group.

pub mod app_otp;
// +rsbuilder:scaffold:controllers
