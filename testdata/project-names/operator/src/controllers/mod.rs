//! The controllers of this operator, one module per API group.
//!
//! `rsbuilder create api` adds a module here for each kind and registers its `run` function in
//! `main.rs`.

pub mod kube;

pub mod super_;

pub mod r#type;

pub mod core;

pub mod std;

pub mod apps;

pub mod ops;

pub mod lib_;

pub mod main_;
// +rsbuilder:scaffold:modules
