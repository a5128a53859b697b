//! The controllers of the `fleet.learn.com` API group.

pub mod client;

pub mod r#loop;
// +rsbuilder:scaffold:controllers
