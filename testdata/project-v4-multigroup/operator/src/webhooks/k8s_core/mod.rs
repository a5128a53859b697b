//! The webhooks of the `` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
