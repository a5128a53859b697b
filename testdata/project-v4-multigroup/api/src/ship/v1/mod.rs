//! Version `v1` of the `ship.testproject.org` API group.

pub mod destroyer;
pub use self::destroyer::Destroyer;
// +rsbuilder:scaffold:kinds
