//! The `ship.testproject.org` API group.

pub mod v1beta1;

pub mod v1;

pub mod v2alpha1;
// +rsbuilder:scaffold:versions
