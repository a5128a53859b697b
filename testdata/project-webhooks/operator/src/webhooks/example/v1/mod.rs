//! The webhooks of `example.example.com/v1`, one module per kind.

pub mod application;

pub mod cache;
// +rsbuilder:scaffold:kinds
