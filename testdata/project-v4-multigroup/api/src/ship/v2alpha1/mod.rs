//! Version `v2alpha1` of the `ship.testproject.org` API group.

pub mod cruiser;
pub use self::cruiser::Cruiser;
// +rsbuilder:scaffold:kinds
