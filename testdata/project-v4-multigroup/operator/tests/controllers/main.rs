//! Reconcile tests of the controllers, against a mocked API server: one module per API group
//! and kind, as in `src/controllers/`, all in this one test binary.

mod support;

mod crew;

mod ship;

mod sea_creatures;

mod foo_policy;

mod k8s_apps;

mod foo;

mod fiz;

mod example_com;
// +rsbuilder:scaffold:groups
