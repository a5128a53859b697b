//! The webhooks of the `ship.example.org` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
