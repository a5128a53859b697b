//! The controllers of the `apps.example.com` API group.

pub mod error;
// +rsbuilder:scaffold:controllers
