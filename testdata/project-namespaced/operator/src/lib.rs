//! The ns-operator manager: its flags, the controllers, and what runs around them.
//!
//! `main.rs` parses [`cli::Args`] and hands the registered controllers to [`manager::Manager`],
//! which serves the probes ([`health`]) and metrics ([`metrics`]), takes part in leader
//! election and stops everything cleanly on SIGTERM.

pub mod backoff;
pub mod cli;
pub mod controllers;
pub mod health;
pub mod manager;
pub mod metrics;
pub mod telemetry;
pub mod tls;
