//! Version `v1beta1` of the `sea-creatures.testproject.org` API group.

pub mod kraken;
pub use self::kraken::Kraken;
// +rsbuilder:scaffold:kinds
