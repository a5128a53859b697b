//! Version `v1` of the `super.example.com` API group.

pub mod status;
pub use self::status::Status;
// +rsbuilder:scaffold:kinds
