//! The `sea-creatures.testproject.org` API group.

pub mod v1beta1;

pub mod v1beta2;

pub mod v1;
// +rsbuilder:scaffold:versions
