//! The `fleet.learn.com` API group.

pub mod v1beta1;

pub mod v1;
// +rsbuilder:scaffold:versions
