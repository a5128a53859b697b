//! Tests of the controllers of the `appotp.learn.com` API group.

mod app_otp;
// +rsbuilder:scaffold:kinds
