//! The controllers of the `type.example.com` API group.

pub mod r#match;
// +rsbuilder:scaffold:controllers
