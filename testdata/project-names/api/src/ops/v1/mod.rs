//! Version `v1` of the `ops.example.com` API group.

pub mod registration;
pub use self::registration::Registration;

pub mod spec;
pub use self::spec::Spec;

pub mod api_server;
pub use self::api_server::ApiServer;

pub mod webhooks;
pub use self::webhooks::Webhooks;

pub mod defaulter;
pub use self::defaulter::Defaulter;
// +rsbuilder:scaffold:kinds
