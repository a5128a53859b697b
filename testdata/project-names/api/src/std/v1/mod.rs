//! Version `v1` of the `std.example.com` API group.

pub mod object;
pub use self::object::Object;
// +rsbuilder:scaffold:kinds
