//! The webhooks of `apps/v1`, one module per kind.

pub mod deployment;
// +rsbuilder:scaffold:kinds
