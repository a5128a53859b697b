//! Reconcile tests of the controllers, against a mocked API server: one module per API group
//! and kind, as in `src/controllers/`, all in this one test binary.

mod support;

mod example_com;

mod appotp;

mod web;

mod apps;

mod core;

mod rbac;
// +rsbuilder:scaffold:groups
