//! Whether the install file is as new as `config/`: the chart is made from it, and would miss
//! what `config/` gained since `make build-installer` wrote it.

use std::path::Path;

use serde_yaml::Value;

use super::{Install, fields, parse_documents};
use crate::tree::Tree;
use crate::ui::UserError;

/// Refuses an install file older than the `config/` it was built from (`make build-installer`
/// not run since): one that lacks a CRD `config/crd/kustomization.yaml` lists or one of its
/// versions, a rule of the manager's role in `config/rbac/role.yaml` (its `resourceNames`
/// aside, which kustomize may rewrite), or a webhook of `config/webhook/manifests.yaml`. The
/// chart would lack them without a word.
pub fn check(tree: &dyn Tree, install: &Install, manifests: &str) -> anyhow::Result<()> {
    let stale = |what: String| -> anyhow::Error {
        UserError::new(format!("`{manifests}` is older than config/: {what}"))
            .help("write it again with `make build-installer`, then run this command again")
            .into()
    };
    let problem = match crds(tree, install)? {
        Some(problem) => Some(problem),
        None => match roles(tree, install)? {
            Some(problem) => Some(problem),
            None => webhooks(tree, install)?,
        },
    };
    problem.map_or(Ok(()), |what| Err(stale(what)))
}

/// The objects of the file `relative` of the project; none when it is missing.
fn documents(tree: &dyn Tree, relative: &str) -> anyhow::Result<Vec<Value>> {
    match tree.read(Path::new(relative)) {
        Ok(Some(text)) => parse_documents(&text, relative),
        Ok(None) => Ok(Vec::new()),
        Err(error) => Err(
            UserError::new(format!("failed to read `{relative}`: {error:#}"))
                .help("make it a readable UTF-8 file")
                .into(),
        ),
    }
}

/// The names of the strings at `key` of each item of the sequence at `path`.
fn names_at(object: &Value, path: &[&str], key: &str) -> Vec<String> {
    fields::at(object, path)
        .and_then(Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| fields::str_at(item, &[key]).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A CRD the kustomization installs (`bases/<file>` entries of its resources) that the install
/// file lacks, or a version of one it lacks.
fn crds(tree: &dyn Tree, install: &Install) -> anyhow::Result<Option<String>> {
    let kustomization: Value = match tree.read(Path::new("config/crd/kustomization.yaml")) {
        Ok(Some(text)) => serde_yaml::from_str(&text).unwrap_or_default(),
        _ => Value::Null,
    };
    let bases: Vec<String> = kustomization
        .get("resources")
        .and_then(Value::as_sequence)
        .map(|resources| {
            resources
                .iter()
                .filter_map(Value::as_str)
                .filter(|r| r.starts_with("bases/") && !r.contains(".."))
                .map(|r| format!("config/crd/{r}"))
                .collect()
        })
        .unwrap_or_default();
    for base in bases {
        for crd in documents(tree, &base)? {
            let name = fields::name(&crd);
            let Some(installed) = install
                .of_kind("CustomResourceDefinition")
                .find(|c| fields::name(c) == name)
            else {
                return Ok(Some(format!(
                    "it has no CustomResourceDefinition `{name}`, which {base} holds"
                )));
            };
            let versions = |crd: &Value| names_at(crd, &["spec", "versions"], "name");
            let (want, have) = (versions(&crd), versions(installed));
            if let Some(missing) = want.iter().find(|v| !have.contains(v)) {
                return Ok(Some(format!(
                    "its CustomResourceDefinition `{name}` has no version {missing}, which {base} has"
                )));
            }
        }
    }
    Ok(None)
}

/// The rules of a role, without their `resourceNames` (the install file may name objects the
/// project's role does not).
fn rules(object: &Value) -> Vec<Value> {
    fields::at(object, &["rules"])
        .and_then(Value::as_sequence)
        .map(|rules| {
            rules
                .iter()
                .map(|rule| {
                    let mut rule = rule.clone();
                    if let Some(rule) = rule.as_mapping_mut() {
                        rule.remove("resourceNames");
                    }
                    rule
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A role of `config/rbac/role.yaml` the install file lacks, or a rule of one.
fn roles(tree: &dyn Tree, install: &Install) -> anyhow::Result<Option<String>> {
    for role in documents(tree, "config/rbac/role.yaml")? {
        let kind = fields::kind(&role);
        let Some(installed) = install
            .of_kind(kind)
            .find(|r| install.suffix(fields::name(r)) == fields::name(&role))
        else {
            return Ok(Some(format!(
                "it has no {kind} `{}`, which config/rbac/role.yaml holds",
                fields::name(&role)
            )));
        };
        let have = rules(installed);
        if let Some(missing) = rules(&role).into_iter().find(|r| !have.contains(r)) {
            let resources = fields::at(&missing, &["resources"])
                .and_then(Value::as_sequence)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            return Ok(Some(format!(
                "its {kind} `{}` lacks the rule of config/rbac/role.yaml on {}",
                fields::name(installed),
                if resources.is_empty() {
                    "its non-resource URLs".to_owned()
                } else {
                    resources
                }
            )));
        }
    }
    Ok(None)
}

/// A webhook of `config/webhook/manifests.yaml` the install file lacks.
fn webhooks(tree: &dyn Tree, install: &Install) -> anyhow::Result<Option<String>> {
    for configuration in documents(tree, "config/webhook/manifests.yaml")? {
        let kind = fields::kind(&configuration);
        let names = |object: &Value| names_at(object, &["webhooks"], "name");
        let have: Vec<String> = install.of_kind(kind).flat_map(names).collect();
        if let Some(missing) = names(&configuration)
            .into_iter()
            .find(|w| !have.contains(w))
        {
            return Ok(Some(format!(
                "it has no {kind} webhook `{missing}`, which config/webhook/manifests.yaml holds"
            )));
        }
    }
    Ok(None)
}
