//! Tests of the controllers of the `main.example.com` API group.

mod on;
// +rsbuilder:scaffold:kinds
