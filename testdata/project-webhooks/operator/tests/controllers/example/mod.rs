//! Tests of the controllers of the `example.example.com` API group.

mod application;

mod cache;
// +rsbuilder:scaffold:kinds
