//! The versions rsbuilder scaffolds: one coherent set, checked by building the golden projects.

/// This rsbuilder's version, recorded as `cliVersion` in PROJECT.
pub const RSBUILDER: &str = env!("CARGO_PKG_VERSION");
/// The kube crate the generated project depends on.
pub const KUBE: &str = "5.0.0";
/// The k8s-openapi crate matching [`KUBE`].
pub const K8S_OPENAPI: &str = "0.29.0";
/// The k8s-openapi feature naming the oldest Kubernetes version the generated code supports.
pub const K8S_OPENAPI_FEATURE: &str = "v1_33";
/// The Kubernetes version matching [`K8S_OPENAPI_FEATURE`].
pub const KUBERNETES: &str = "1.33";
/// The oldest Rust toolchain the generated project builds with (kube's MSRV).
pub const RUST: &str = "1.89";
