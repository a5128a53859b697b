//! The `main.example.com` API group.

pub mod v1;
// +rsbuilder:scaffold:versions
