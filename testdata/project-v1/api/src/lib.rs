//! The custom resource types of otp-operator, one module per API group and version.
//!
//! This crate holds only the types (kube with the `derive` feature, no client), so it builds fast
//! and other programs can depend on it to talk to these resources.

// +rsbuilder:scaffold:groups
