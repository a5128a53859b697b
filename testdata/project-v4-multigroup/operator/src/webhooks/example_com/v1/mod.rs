//! The webhooks of `example.com.testproject.org/v1`, one module per kind.

pub mod wordpress;
// +rsbuilder:scaffold:kinds
