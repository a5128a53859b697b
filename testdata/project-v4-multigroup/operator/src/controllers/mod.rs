//! The controllers of this operator, one module per API group.
//!
//! `rsbuilder create api` adds a module here for each kind and registers its `run` function in
//! `main.rs`.

pub mod crew;

pub mod ship;

pub mod sea_creatures;

pub mod foo_policy;

pub mod k8s_apps;

pub mod foo;

pub mod fiz;

pub mod example_com;
// +rsbuilder:scaffold:modules
