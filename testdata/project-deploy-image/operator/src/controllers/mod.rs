//! The controllers of this operator, one module per API group.
//!
//! `rsbuilder create api` adds a module here for each kind and registers its `run` function in
//! `main.rs`.

pub mod example_com;

pub mod appotp;

pub mod web;

pub mod k8s_apps;

pub mod k8s_core;

pub mod k8s_rbac;
// +rsbuilder:scaffold:modules
