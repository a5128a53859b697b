//! Tests of the controllers of the `ship.example.org` API group.

mod captain;
// +rsbuilder:scaffold:kinds
