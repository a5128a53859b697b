//! The `example.com.testproject.org` API group.

pub mod v1alpha1;

pub mod v1;

pub mod v2;
// +rsbuilder:scaffold:versions
