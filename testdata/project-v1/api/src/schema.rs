//! How the CRDs' schemas are written: smaller than kube and schemars write them, with the same
//! validation, so that a kind embedding Kubernetes' own types (a `PodTemplateSpec`) stays within
//! what a cluster stores and `kubectl apply` sends.
//!
//! rsbuilder wrote this file; `crds()` applies it to every version of every CRD. It changes
//! three things:
//! - an `ObjectMeta` inside the schema (the `metadata` of a `PodTemplateSpec`) keeps the fields
//!   a template can set: `annotations`, `finalizers`, `labels`, `name` and `namespace`, as
//!   controller-gen's `crd:generateEmbeddedObjectMeta` writes it. The API server prunes the
//!   others (`ownerReferences`, `managedFields`, ...), which no template sets;
//! - the values of a map (`additionalProperties`) lose the description of their type, which
//!   `kubectl explain` never shows: 2.4 kB of text for each map of `Quantity`;
//! - descriptions are trimmed as `DESCRIPTIONS` in lib.rs says.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Which descriptions the schemas keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Descriptions {
    /// All of them: `kubectl explain` shows every field's.
    All,
    /// Every description, cut to at most this many characters at the last full sentence that
    /// fits, as controller-gen's `crd:maxDescLen=N`; `0` drops them all.
    AtMost(usize),
    /// Your own fields' descriptions whole, and those that come with Kubernetes' own types (the
    /// fields of a `PodTemplateSpec`, a `Condition`) cut to at most this many characters; `0`
    /// drops those. `kubectl explain` keeps explaining your fields.
    KubernetesAtMost(usize),
}

/// The fields of an `ObjectMeta` inside a schema that a template can set.
const EMBEDDED_METADATA: &[&str] = &["annotations", "finalizers", "labels", "name", "namespace"];

/// Fields only an `ObjectMeta` has, all of them.
const OBJECT_META: &[&str] = &[
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
    "resourceVersion",
    "uid",
];

/// Writes every version's schema of `crd` smaller, as the module says.
///
/// # Errors
/// When a schema does not survive the round trip through JSON.
pub fn compact(
    crd: &mut CustomResourceDefinition,
    descriptions: Descriptions,
) -> Result<(), String> {
    let kubernetes = match descriptions {
        Descriptions::KubernetesAtMost(_) => kubernetes_descriptions(),
        _ => BTreeSet::new(),
    };
    for version in &mut crd.spec.versions {
        let Some(validation) = version.schema.as_mut() else {
            continue;
        };
        let Some(schema) = validation.open_api_v3_schema.take() else {
            continue;
        };
        let mut value = serde_json::to_value(schema).map_err(|error| error.to_string())?;
        compact_schema(&mut value, true, descriptions, &kubernetes);
        validation.open_api_v3_schema =
            Some(serde_json::from_value(value).map_err(|error| error.to_string())?);
    }
    Ok(())
}

/// Compacts `schema` and the schemas inside it; `root` is the schema of the whole object.
fn compact_schema(
    schema: &mut Value,
    root: bool,
    descriptions: Descriptions,
    kubernetes: &BTreeSet<String>,
) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        let is_object_meta = OBJECT_META
            .iter()
            .all(|field| properties.contains_key(*field));
        if !root && is_object_meta {
            properties.retain(|name, _| EMBEDDED_METADATA.contains(&name.as_str()));
        }
    }
    if let Some(Value::Object(values)) = object.get_mut("additionalProperties") {
        values.remove("description");
    }
    if let Some(Value::String(description)) = object.get("description") {
        let limit = match descriptions {
            Descriptions::All => None,
            Descriptions::AtMost(limit) => Some(limit),
            Descriptions::KubernetesAtMost(limit) => {
                kubernetes.contains(description).then_some(limit)
            }
        };
        if let Some(limit) = limit {
            match trimmed(description, limit) {
                Some(text) => {
                    object.insert("description".into(), Value::String(text));
                }
                None => {
                    object.remove("description");
                }
            }
        }
    }
    // The keywords whose values are schemas; `default`, `enum` and `example` hold data.
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "patternProperties", Value::Object(schemas)) => {
                for schema in schemas.values_mut() {
                    compact_schema(schema, false, descriptions, kubernetes);
                }
            }
            ("allOf" | "anyOf" | "oneOf" | "items", Value::Array(schemas)) => {
                for schema in schemas {
                    compact_schema(schema, false, descriptions, kubernetes);
                }
            }
            ("items" | "additionalProperties" | "not", schema @ Value::Object(_)) => {
                compact_schema(schema, false, descriptions, kubernetes);
            }
            _ => {}
        }
    }
}

/// `description` cut to at most `limit` characters, at the end of the last sentence that fits
/// when one does; `None` for a limit of 0.
fn trimmed(description: &str, limit: usize) -> Option<String> {
    if limit == 0 {
        return None;
    }
    if description.chars().count() <= limit {
        return Some(description.to_owned());
    }
    let end = description
        .char_indices()
        .nth(limit)
        .map_or(description.len(), |(at, _)| at);
    let cut = &description[..end];
    let sentence = cut
        .char_indices()
        .filter(|&(at, c)| c == '.' && description[at + 1..].starts_with(char::is_whitespace))
        .map(|(at, _)| at + 1)
        .next_back();
    Some(match sentence {
        Some(end) => cut[..end].to_owned(),
        None => cut.trim_end().to_owned(),
    })
}

/// The descriptions that Kubernetes' own types bring, as k8s-openapi writes them: every type
/// that a `JobTemplateSpec`, a `StatefulSetSpec`, a `DeploymentSpec`, a `ServiceSpec`, an
/// `ObjectReference` or a `Condition` holds.
fn kubernetes_descriptions() -> BTreeSet<String> {
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, core::v1 as core};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let roots = [
        generator.subschema_for::<batch::JobTemplateSpec>(),
        generator.subschema_for::<apps::StatefulSetSpec>(),
        generator.subschema_for::<apps::DeploymentSpec>(),
        generator.subschema_for::<core::ServiceSpec>(),
        generator.subschema_for::<core::ObjectReference>(),
        generator.subschema_for::<core::TypedLocalObjectReference>(),
        generator.subschema_for::<meta::Condition>(),
        generator.subschema_for::<meta::LabelSelector>(),
    ];
    let mut found = BTreeSet::new();
    for schema in roots.iter().map(schemars::Schema::as_value) {
        collect_descriptions(schema, &mut found);
    }
    for schema in generator.definitions().values() {
        collect_descriptions(schema, &mut found);
    }
    found
}

fn collect_descriptions(value: &Value, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("description", Value::String(text)) => {
                        found.insert(text.clone());
                    }
                    ("default" | "enum" | "example", _) => {}
                    (_, value) => collect_descriptions(value, found),
                }
            }
        }
        Value::Array(values) => {
            for value in values {
                collect_descriptions(value, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_cut_at_the_last_sentence_that_fits() {
        assert_eq!(trimmed("One. Two three.", 0), None);
        assert_eq!(
            trimmed("One. Two three.", 15).as_deref(),
            Some("One. Two three.")
        );
        assert_eq!(trimmed("One. Two three.", 10).as_deref(), Some("One."));
        assert_eq!(trimmed("One. Two. Three", 9).as_deref(), Some("One. Two."));
        assert_eq!(trimmed("v1.2 is one", 6).as_deref(), Some("v1.2 i"));
        assert_eq!(trimmed("Ünïcödé text", 3).as_deref(), Some("Ünï"));
    }

    #[test]
    fn embedded_object_meta_keeps_what_a_template_sets_and_map_values_lose_their_type_docs() {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "properties": {
                        "template": {
                            "type": "object",
                            "description": "the pods",
                            "properties": {
                                "metadata": {
                                    "type": "object",
                                    "properties": {
                                        "labels": {"type": "object", "additionalProperties": {"type": "string", "description": "a label"}},
                                        "name": {"type": "string"},
                                        "uid": {"type": "string"},
                                        "generation": {"type": "integer"},
                                        "managedFields": {"type": "array"},
                                        "ownerReferences": {"type": "array"},
                                        "resourceVersion": {"type": "string"},
                                        "creationTimestamp": {"type": "string"}
                                    }
                                }
                            }
                        }
                    }
                }
            }
        });
        compact_schema(&mut schema, true, Descriptions::All, &BTreeSet::new());
        let metadata =
            &schema["properties"]["spec"]["properties"]["template"]["properties"]["metadata"];
        let kept: Vec<&String> = metadata["properties"].as_object().unwrap().keys().collect();
        assert_eq!(kept, ["labels", "name"]);
        assert_eq!(
            metadata["properties"]["labels"]["additionalProperties"],
            serde_json::json!({"type": "string"})
        );
        assert_eq!(
            schema["properties"]["metadata"],
            serde_json::json!({"type": "object"})
        );
        assert_eq!(
            schema["properties"]["spec"]["properties"]["template"]["description"],
            "the pods"
        );
    }

    #[test]
    fn kubernetes_descriptions_are_trimmed_and_yours_are_kept() {
        let kubernetes = kubernetes_descriptions();
        let pod = serde_json::to_value(
            schemars::generate::SchemaSettings::openapi3()
                .into_generator()
                .root_schema_for::<k8s_openapi::api::core::v1::PodSpec>(),
        )
        .unwrap();
        let containers = pod["properties"]["containers"]["description"]
            .as_str()
            .unwrap();
        assert!(kubernetes.contains(containers));
        let first = containers.split_inclusive(". ").next().unwrap().trim_end();
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "mine": {"type": "string", "description": "My own field, explained at length. It says a lot."},
                "containers": {"type": "array", "description": containers, "items": {"type": "object"}}
            }
        });
        let limit = first.chars().count() + 1;
        compact_schema(
            &mut schema,
            true,
            Descriptions::KubernetesAtMost(limit),
            &kubernetes,
        );
        assert_eq!(
            schema["properties"]["mine"]["description"],
            "My own field, explained at length. It says a lot."
        );
        assert_eq!(schema["properties"]["containers"]["description"], first);
        compact_schema(&mut schema, true, Descriptions::AtMost(0), &kubernetes);
        assert!(schema["properties"]["mine"].get("description").is_none());
    }
}
