//! The custom resource types of ns-operator, one module per API group and version.
//!
//! This crate holds only the types (kube with the `derive` feature, no client), so it builds fast
//! and other programs can depend on it to talk to these resources.

use ::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub mod schema;

pub mod ship;
// +rsbuilder:scaffold:groups

/// Which descriptions the CRDs' schemas keep: `All`, `AtMost(n)` (every description cut at
/// the last sentence within `n` characters, as controller-gen's `crd:maxDescLen=n`; 0 drops
/// them) or `KubernetesAtMost(n)` (yours whole, those of Kubernetes' own types cut). A kind that
/// embeds a `PodTemplateSpec` carries about 250 kB of Kubernetes' descriptions per version;
/// `rsbuilder generate` warns when a CRD outgrows 256 KiB and refuses one over 1.5 MiB.
pub const DESCRIPTIONS: schema::Descriptions = schema::Descriptions::All;

/// Every CustomResourceDefinition of this crate, the versions of each kind merged into one.
///
/// `crdgen` prints them; `rsbuilder generate` writes them to `config/crd/bases/`.
///
/// # Errors
/// When the versions of one kind disagree on anything but their schema (group, scope, names),
/// or when not exactly one of them is the storage version.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, String> {
    let mut crds = merge_versions(vec![
        <ship::v1::Captain as ::kube::CustomResourceExt>::crd(),
        // +rsbuilder:scaffold:crds
    ])?;
    for crd in &mut crds {
        schema::compact(crd, DESCRIPTIONS)?;
    }
    Ok(crds)
}

/// `crd` as YAML, as `config/crd/bases/` holds it: serde_yaml's output, with the plain scalars
/// that YAML 1.1 reads as booleans and YAML 1.2 as strings (`No`, `on`, `y`) quoted, since
/// Kubernetes' parser follows YAML 1.1.
///
/// # Errors
/// When serde_yaml cannot write the CRD.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    const YAML_1_1_WORDS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
        "OFF",
    ];
    let quote = |plain: &str| {
        if YAML_1_1_WORDS.contains(&plain) {
            format!("'{plain}'")
        } else {
            plain.to_owned()
        }
    };
    let text = serde_yaml::to_string(crd)?;
    let mut out = String::with_capacity(text.len());
    // The indentation of a block scalar (`|-`) being read: its lines are text, not YAML.
    let mut block: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(block_indent) = block {
            if line.trim().is_empty() || indent > block_indent {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            block = None;
        }
        let body = &line[indent..];
        let (dash, rest) = match body.strip_prefix("- ") {
            Some(rest) => ("- ", rest),
            None => ("", body),
        };
        let (key, value) = match rest.split_once(": ") {
            Some((key, value)) if !key.starts_with(['\'', '"']) => (Some(key), value),
            _ => match rest.strip_suffix(':') {
                Some(key) => (Some(key), ""),
                None => (None, rest),
            },
        };
        if value.starts_with(['|', '>']) {
            block = Some(indent);
        }
        out.push_str(&line[..indent]);
        out.push_str(dash);
        if let Some(key) = key {
            out.push_str(&quote(key));
            out.push(':');
            if !value.is_empty() {
                out.push(' ');
            }
        }
        out.push_str(&quote(value));
        out.push('\n');
    }
    Ok(out)
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
