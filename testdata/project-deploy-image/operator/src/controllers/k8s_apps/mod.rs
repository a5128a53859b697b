//! The controllers of the `apps` API group.

pub mod deployment;
// +rsbuilder:scaffold:controllers
