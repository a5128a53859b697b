//! Tests of the controllers of the `kube.example.com` API group.

mod context;
// +rsbuilder:scaffold:kinds
