//! The controllers of the `security.platform.learn.com` API group.

pub mod certificate_request_policy;
// +rsbuilder:scaffold:controllers
