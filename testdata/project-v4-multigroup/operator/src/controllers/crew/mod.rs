//! The controllers of the `crew.testproject.org` API group.

pub mod captain;

pub mod captain_backup;
// +rsbuilder:scaffold:controllers
