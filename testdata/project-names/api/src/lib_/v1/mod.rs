//! Version `v1` of the `lib.example.com` API group.

pub mod mod_;
pub use self::mod_::Mod;
// +rsbuilder:scaffold:kinds
