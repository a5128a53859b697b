//! The `example.example.com` API group.

pub mod v1;

pub mod v2;
// +rsbuilder:scaffold:versions
