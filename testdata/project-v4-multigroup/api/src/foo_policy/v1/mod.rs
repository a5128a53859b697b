//! Version `v1` of the `foo.policy.testproject.org` API group.

pub mod health_check_policy;
pub use self::health_check_policy::HealthCheckPolicy;
// +rsbuilder:scaffold:kinds
