//! The webhooks of `/v1`, one module per kind.

pub mod pod;
// +rsbuilder:scaffold:kinds
