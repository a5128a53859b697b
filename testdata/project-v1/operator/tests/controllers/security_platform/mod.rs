//! Tests of the controllers of the `security.platform.learn.com` API group.

mod certificate_request_policy;
// +rsbuilder:scaffold:kinds
