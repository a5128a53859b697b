//! The `foo.policy.testproject.org` API group.

pub mod v1;
// +rsbuilder:scaffold:versions
