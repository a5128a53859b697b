//! The controllers of the `core.example.com` API group.

pub mod core;
// +rsbuilder:scaffold:controllers
