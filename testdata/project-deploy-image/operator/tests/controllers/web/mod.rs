//! Tests of the controllers of the `web.learn.com` API group.

mod site;
// +rsbuilder:scaffold:kinds
