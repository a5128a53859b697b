//! The controllers of the `main.example.com` API group.

pub mod on;
// +rsbuilder:scaffold:controllers
