//! Version `v1` of the `sea-creatures.testproject.org` API group.

pub mod prawn;
pub use self::prawn::Prawn;
// +rsbuilder:scaffold:kinds
