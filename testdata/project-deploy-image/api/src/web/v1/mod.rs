//! Version `v1` of the `web.learn.com` API group.

pub mod site;
pub use self::site::Site;

pub mod proxy;
pub use self::proxy::Proxy;
// +rsbuilder:scaffold:kinds
