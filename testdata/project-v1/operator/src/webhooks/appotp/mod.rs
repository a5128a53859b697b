//! The webhooks of the `appotp.learn.com` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
