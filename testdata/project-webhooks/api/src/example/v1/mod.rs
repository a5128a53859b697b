//! Version `v1` of the `example.example.com` API group.

pub mod application;
pub use self::application::Application;

pub mod cache;
pub use self::cache::Cache;
// +rsbuilder:scaffold:kinds
