//! Version `v1` of the `appotp.learn.com` API group.

pub mod app_otp;
pub use self::app_otp::AppOTP;
// +rsbuilder:scaffold:kinds
