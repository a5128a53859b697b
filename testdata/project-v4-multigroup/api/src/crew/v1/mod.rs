//! Version `v1` of the `crew.testproject.org` API group.

pub mod captain;
pub use self::captain::Captain;
// +rsbuilder:scaffold:kinds
