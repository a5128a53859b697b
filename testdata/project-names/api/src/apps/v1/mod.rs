//! Version `v1` of the `apps.example.com` API group.

pub mod error;
pub use self::error::Error;
// +rsbuilder:scaffold:kinds
