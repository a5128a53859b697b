//! The webhooks of `appotp.learn.com/v1`, one module per kind.

pub mod app_otp;
// +rsbuilder:scaffold:kinds
