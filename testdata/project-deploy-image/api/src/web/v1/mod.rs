//! Version `v1` of the `web.learn.com` API group.

pub mod site;
pub use self::site::Site;
// +rsbuilder:scaffold:kinds
