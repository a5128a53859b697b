//! Version `v1alpha1` of the `security.platform.learn.com` API group.

pub mod certificate_request_policy;
pub use self::certificate_request_policy::CertificateRequestPolicy;
// +rsbuilder:scaffold:kinds
