//! Tests of the controllers of the `core.example.com` API group.

mod core;
// +rsbuilder:scaffold:kinds
