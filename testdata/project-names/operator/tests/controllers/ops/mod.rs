//! Tests of the controllers of the `ops.example.com` API group.

mod registration;

mod spec;

mod api_server;

mod webhooks;

mod defaulter;
// +rsbuilder:scaffold:kinds
