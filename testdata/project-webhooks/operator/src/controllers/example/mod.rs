//! The controllers of the `example.example.com` API group.

pub mod application;

pub mod cache;
// +rsbuilder:scaffold:controllers
