//! The webhooks of `crew.testproject.org/v1`, one module per kind.

pub mod captain;
// +rsbuilder:scaffold:kinds
