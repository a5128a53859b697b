//! The controllers of the `std.example.com` API group.

pub mod object;
// +rsbuilder:scaffold:controllers
