//! The controllers of the `super.example.com` API group.

pub mod status;
// +rsbuilder:scaffold:controllers
