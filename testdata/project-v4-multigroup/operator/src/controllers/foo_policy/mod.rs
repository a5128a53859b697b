//! The controllers of the `foo.policy.testproject.org` API group.

pub mod health_check_policy;
// +rsbuilder:scaffold:controllers
