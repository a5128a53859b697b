//! Tests of the controllers of the `web.learn.com` API group.

mod site;

mod proxy;
// +rsbuilder:scaffold:kinds
