//! The controllers of the `web.learn.com` API group.

pub mod site;

pub mod proxy;
// +rsbuilder:scaffold:controllers
