//! Tests of the controllers of the `rbac.authorization.k8s.io` API group.

mod cluster_role;
// +rsbuilder:scaffold:kinds
