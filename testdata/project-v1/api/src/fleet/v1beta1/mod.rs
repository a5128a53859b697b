//! Version `v1beta1` of the `fleet.learn.com` API group.

pub mod client;
pub use self::client::Client;
// +rsbuilder:scaffold:kinds
