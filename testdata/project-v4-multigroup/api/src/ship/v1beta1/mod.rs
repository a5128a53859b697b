//! Version `v1beta1` of the `ship.testproject.org` API group.

pub mod frigate;
pub use self::frigate::Frigate;
// +rsbuilder:scaffold:kinds
