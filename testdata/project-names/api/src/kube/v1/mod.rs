//! Version `v1` of the `kube.example.com` API group.

pub mod context;
pub use self::context::Context;
// +rsbuilder:scaffold:kinds
