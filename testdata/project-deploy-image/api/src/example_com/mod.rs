//! The `example.com.learn.com` API group.

pub mod v1alpha1;
// +rsbuilder:scaffold:versions
