//! Tests of the controllers of the `fleet.learn.com` API group.

mod client;

mod r#loop;
// +rsbuilder:scaffold:kinds
