//! The controllers of the `ops.example.com` API group.

pub mod registration;

pub mod spec;

pub mod api_server;

pub mod webhooks;

pub mod defaulter;
// +rsbuilder:scaffold:controllers
