//! The controllers of the `lib.example.com` API group.

pub mod mod_;
// +rsbuilder:scaffold:controllers
