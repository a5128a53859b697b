//! The webhooks of `example.com.testproject.org/v1alpha1`, one module per kind.

pub mod memcached;
// +rsbuilder:scaffold:kinds
