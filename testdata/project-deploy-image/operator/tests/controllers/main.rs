//! Reconcile tests of the controllers, against a mocked API server: one module per API group
//! and kind, as in `src/controllers/`, all in this one test binary.

mod support;

mod example_com;

mod appotp;

mod web;

mod k8s_apps;

mod k8s_core;

mod k8s_rbac;
// +rsbuilder:scaffold:groups
