//! Tests of the controllers of the `std.example.com` API group.

mod object;
// +rsbuilder:scaffold:kinds
