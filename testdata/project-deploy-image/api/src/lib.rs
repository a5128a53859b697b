//! The custom resource types of memcached-operator, one module per API group and version.
//!
//! This crate holds only the types (kube with the `derive` feature, no client), so it builds fast
//! and other programs can depend on it to talk to these resources.

use ::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod example_com;

pub mod appotp;

pub mod web;
// +rsbuilder:scaffold:groups

/// Every CustomResourceDefinition of this crate, the versions of each kind merged into one.
///
/// `crdgen` prints them; `rsbuilder generate` writes them to `config/crd/bases/`.
///
/// # Errors
/// When the versions of one kind disagree on anything but their schema (group, scope, names),
/// or when not exactly one of them is the storage version.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, String> {
    merge_versions(vec![
        <example_com::v1alpha1::Memcached as ::kube::CustomResourceExt>::crd(),
        <appotp::v1::AppOTP as ::kube::CustomResourceExt>::crd(),
        <web::v1::Site as ::kube::CustomResourceExt>::crd(),
        // +rsbuilder:scaffold:crds
    ])
}

/// Merges the CRDs that share a name into one holding all their versions, in the given order.
fn merge_versions(
    crds: Vec<CustomResourceDefinition>,
) -> Result<Vec<CustomResourceDefinition>, String> {
    let mut kinds: Vec<(String, Vec<CustomResourceDefinition>)> = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match kinds.iter_mut().find(|(known, _)| *known == name) {
            Some((_, versions)) => versions.push(crd),
            None => kinds.push((name, vec![crd])),
        }
    }
    kinds
        .into_iter()
        .map(|(name, versions)| {
            let storage: Vec<String> = versions
                .iter()
                .flat_map(|crd| &crd.spec.versions)
                .filter(|version| version.storage)
                .map(|version| version.name.clone())
                .collect();
            let [stored] = storage.as_slice() else {
                return Err(format!(
                    "{name}: exactly one version must be the storage version, found {storage:?}; \
                     mark the others with `storage = false` in their #[kube(...)]"
                ));
            };
            // The versions stay in the order they are listed above, whatever order
            // `merge_crds` leaves them in.
            let order: Vec<String> = versions
                .iter()
                .flat_map(|crd| &crd.spec.versions)
                .map(|version| version.name.clone())
                .collect();
            let mut merged = ::kube::core::crd::merge_crds(versions, stored)
                .map_err(|error| format!("{name}: {error}"))?;
            merged
                .spec
                .versions
                .sort_by_key(|version| order.iter().position(|name| *name == version.name));
            Ok(merged)
        })
        .collect()
}
