//! The webhooks of `ship.testproject.org/v1`, one module per kind.

pub mod destroyer;
// +rsbuilder:scaffold:kinds
