//! The webhooks of `ship.example.org/v1`, one module per kind.

pub mod captain;
// +rsbuilder:scaffold:kinds
