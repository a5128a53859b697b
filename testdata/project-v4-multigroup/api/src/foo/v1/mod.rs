//! Version `v1` of the `foo.testproject.org` API group.

pub mod bar;
pub use self::bar::Bar;
// +rsbuilder:scaffold:kinds
