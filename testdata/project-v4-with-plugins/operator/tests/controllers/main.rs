//! Reconcile tests of the controllers, against a mocked API server: one module per API group
//! and kind, as in `src/controllers/`, all in this one test binary.

mod support;

mod example_com;
// +rsbuilder:scaffold:groups
