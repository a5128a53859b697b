//! The controllers of the `kube.example.com` API group.

pub mod context;
// +rsbuilder:scaffold:controllers
