//! Version `v1` of the `main.example.com` API group.

pub mod on;
pub use self::on::On;
// +rsbuilder:scaffold:kinds
