//! The controllers of the `core` API group.

pub mod pod;
// +rsbuilder:scaffold:controllers
