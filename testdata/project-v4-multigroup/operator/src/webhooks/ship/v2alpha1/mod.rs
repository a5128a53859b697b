//! The webhooks of `ship.testproject.org/v2alpha1`, one module per kind.

pub mod cruiser;
// +rsbuilder:scaffold:kinds
