//! Tests of the controllers of the `super.example.com` API group.

mod status;
// +rsbuilder:scaffold:kinds
