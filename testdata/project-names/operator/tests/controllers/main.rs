//! Reconcile tests of the controllers, against a mocked API server: one module per API group
//! and kind, as in `src/controllers/`, all in this one test binary.

mod support;

mod kube;

mod super_;

mod r#type;

mod core;

mod std;

mod apps;

mod ops;

mod lib_;

mod main_;
// +rsbuilder:scaffold:groups
