//! Version `v3` of the `example.example.com` API group.

pub mod cache;
pub use self::cache::Cache;
// +rsbuilder:scaffold:kinds
