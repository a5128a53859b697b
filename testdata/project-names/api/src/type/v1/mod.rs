//! Version `v1` of the `type.example.com` API group.

pub mod r#match;
pub use self::r#match::Match;
// +rsbuilder:scaffold:kinds
