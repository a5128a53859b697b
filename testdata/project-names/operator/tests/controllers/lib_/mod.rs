//! Tests of the controllers of the `lib.example.com` API group.

mod mod_;
// +rsbuilder:scaffold:kinds
