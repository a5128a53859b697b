//! The controllers of this operator, one module per API group.
//!
//! `rsbuilder create api` adds a module here for each kind and registers its `run` function in
//! `main.rs`.

pub mod example_com;
// +rsbuilder:scaffold:modules
