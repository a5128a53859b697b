//! The webhooks of `ops.example.com/v1`, one module per kind.

pub mod webhooks;

pub mod defaulter;

pub mod spec;
// +rsbuilder:scaffold:kinds
