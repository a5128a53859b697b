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

#[cfg(test)]
mod tests {
    use super::*;

    /// The version of `package` in a Cargo.lock.
    fn locked(lock: &str, package: &str) -> Option<String> {
        let start = format!("[[package]]\nname = \"{package}\"\nversion = \"");
        let (_, rest) = lock.split_once(&start)?;
        rest.split_once('"').map(|(version, _)| version.to_owned())
    }

    /// The `version = "..."` of `dependency` in the dependency lines of a manifest.
    fn required(manifest: &str, dependency: &str) -> Option<String> {
        manifest
            .lines()
            .find(|line| line.starts_with(&format!("{dependency} = ")))
            .and_then(|line| line.split_once("version = \""))
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(version, _)| version.to_owned())
    }

    #[test]
    fn the_pins_in_the_templates_and_the_runtime_agree_with_these() {
        let lock = crate::scaffold::sources("init/Cargo.lock.tera")[0].1;
        assert_eq!(locked(lock, "kube").as_deref(), Some(KUBE));
        assert_eq!(locked(lock, "k8s-openapi").as_deref(), Some(K8S_OPENAPI));
        let runtime = crate::runtime::files()
            .into_iter()
            .find(|(path, _)| path.ends_with("Cargo.toml"))
            .map(|(_, text)| text)
            .unwrap();
        assert_eq!(required(&runtime, "kube").as_deref(), Some(KUBE));
        assert_eq!(
            required(&runtime, "k8s-openapi").as_deref(),
            Some(K8S_OPENAPI)
        );
        assert!(
            runtime.contains(&format!("rust-version = \"{RUST}\"")),
            "the runtime's rust-version is {RUST}"
        );
        assert!(lock.contains(&format!(
            "name = \"k8s-openapi\"\nversion = \"{K8S_OPENAPI}\""
        )));
        assert_eq!(
            K8S_OPENAPI_FEATURE
                .replace('_', ".")
                .trim_start_matches('v'),
            KUBERNETES
        );
    }
}
