//! The webhooks of the `example.com.testproject.org` API group, one module per version.

pub mod v1alpha1;

pub mod v1;
// +rsbuilder:scaffold:versions
