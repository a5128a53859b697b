//! The controllers of the `ship.example.org` API group.

pub mod captain;
// +rsbuilder:scaffold:controllers
