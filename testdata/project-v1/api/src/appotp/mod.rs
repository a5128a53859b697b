//! The `appotp.learn.com` API group.

pub mod v1;

pub mod v2;
// +rsbuilder:scaffold:versions
