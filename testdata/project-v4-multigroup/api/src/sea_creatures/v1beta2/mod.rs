//! Version `v1beta2` of the `sea-creatures.testproject.org` API group.

pub mod leviathan;
pub use self::leviathan::Leviathan;
// +rsbuilder:scaffold:kinds
