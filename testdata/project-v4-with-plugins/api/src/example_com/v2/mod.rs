//! Version `v2` of the `example.com.testproject.org` API group.

pub mod wordpress;
pub use self::wordpress::Wordpress;
// +rsbuilder:scaffold:kinds
