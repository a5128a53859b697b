//! The controllers of the `rbac.authorization.k8s.io` API group.

pub mod cluster_role;
// +rsbuilder:scaffold:controllers
