//! The controllers of the `example.com.testproject.org` API group.

pub mod memcached;

pub mod busybox;

pub mod wordpress;
// +rsbuilder:scaffold:controllers
