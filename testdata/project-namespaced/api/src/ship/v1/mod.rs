//! Version `v1` of the `ship.example.org` API group.

pub mod captain;
pub use self::captain::Captain;
// +rsbuilder:scaffold:kinds
