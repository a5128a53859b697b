//! The webhooks of the `ship.testproject.org` API group, one module per version.

pub mod v1;

pub mod v2alpha1;
// +rsbuilder:scaffold:versions
