//! The controllers of the `fiz.testproject.org` API group.

pub mod bar;
// +rsbuilder:scaffold:controllers
