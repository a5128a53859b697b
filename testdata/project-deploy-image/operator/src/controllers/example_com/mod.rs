//! The controllers of the `example.com.learn.com` API group.

pub mod memcached;
// +rsbuilder:scaffold:controllers
