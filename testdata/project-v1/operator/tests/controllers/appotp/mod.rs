//! Tests of the controllers of the `appotp.learn.com` API group.

mod app_otp;

mod policy;
// +rsbuilder:scaffold:kinds
