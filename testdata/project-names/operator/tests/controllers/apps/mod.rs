//! Tests of the controllers of the `apps.example.com` API group.

mod error;
// +rsbuilder:scaffold:kinds
