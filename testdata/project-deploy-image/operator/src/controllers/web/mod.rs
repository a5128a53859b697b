//! The controllers of the `web.learn.com` API group.

pub mod site;
// +rsbuilder:scaffold:controllers
