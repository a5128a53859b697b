//! The `crew.testproject.org` API group.

pub mod v1;
// +rsbuilder:scaffold:versions
