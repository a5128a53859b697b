//! The webhooks of the `apps` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
