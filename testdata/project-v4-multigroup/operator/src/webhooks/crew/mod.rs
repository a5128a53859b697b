//! The webhooks of the `crew.testproject.org` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
