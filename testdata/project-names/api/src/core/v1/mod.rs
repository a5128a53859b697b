//! Version `v1` of the `core.example.com` API group.

pub mod core;
pub use self::core::Core;
// +rsbuilder:scaffold:kinds
