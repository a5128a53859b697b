//! The controllers of the `foo.testproject.org` API group.

pub mod bar;
// +rsbuilder:scaffold:controllers
