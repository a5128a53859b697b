//! The webhooks of the `example.example.com` API group, one module per version.

pub mod v1;
// +rsbuilder:scaffold:versions
