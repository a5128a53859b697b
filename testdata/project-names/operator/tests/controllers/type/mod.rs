//! Tests of the controllers of the `type.example.com` API group.

mod r#match;
// +rsbuilder:scaffold:kinds
