//! The `example.example.com` API group.

pub mod v1;

pub mod v2;

pub mod v3;
// +rsbuilder:scaffold:versions
