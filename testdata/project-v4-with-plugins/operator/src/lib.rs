//! The project-v4-with-plugins operator: its controllers, one module per API group, and its webhooks
//! once `rsbuilder create webhook` adds them.
//!
//! `main.rs` registers them with the manager of `rsbuilder-runtime`; the tests in `tests/`
//! drive their reconcile functions against a mocked API server.

pub mod controllers;
pub mod webhooks;
// +rsbuilder:scaffold:modules
