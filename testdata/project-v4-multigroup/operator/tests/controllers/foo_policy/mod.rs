//! Tests of the controllers of the `foo.policy.testproject.org` API group.

mod health_check_policy;
// +rsbuilder:scaffold:kinds
