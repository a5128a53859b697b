//! The templates made from the install file's own objects: CRDs, RBAC, webhook configurations
//! and whatever else the user's kustomization adds.
//!
//! An object is turned into a template by putting marks (`PLACEHOLDER` and a number) where the
//! release decides a value or a line, serializing it, escaping what Go templates would read in
//! the install file's own text (`{{`), and replacing each mark by its template text.

use std::fmt::Write as _;

use serde_yaml::{Mapping, Value};

use super::fields::{at_mut, kind, name, str_at};
use super::values::Defaults;
use super::{GENERATED, Install};

/// The text of every mark; the install file may not hold it.
pub const PLACEHOLDER: &str = "RSBUILDER_HELM_MARK_";
/// In a line mark's template: the line's indentation, for `nindent`.
const INDENT: &str = "RSBUILDER_HELM_MARK_INDENT";

/// `{{ include "CHART.resourceName" ... }}` for `suffix`.
fn resource_name(suffix: &str) -> String {
    format!(
        "{{{{ include \"CHART.resourceName\" (dict \"suffix\" {} \"context\" $) }}}}",
        go_string(suffix)
    )
}

/// A Go template string literal.
fn go_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Marks put into an object, and the template text each stands for.
struct Marks {
    /// The chart's name, which the helpers' names (`"CHART.labels"`) take.
    chart: String,
    /// Marks of a scalar value: replaced where they stand.
    values: Vec<String>,
    /// Marks of a whole `key: value` line: replaced by lines at the line's indentation.
    lines: Vec<String>,
}

impl Marks {
    fn new(chart: &str) -> Self {
        Marks {
            chart: chart.to_owned(),
            values: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// `template` with the helpers' names made the chart's. Only the text of the marks is
    /// filled in: the install file's own text may hold anything.
    fn named(&self, template: &str) -> String {
        template.replace("\"CHART.", &format!("\"{}.", self.chart))
    }

    fn value(&mut self, template: String) -> Value {
        self.values.push(self.named(&template));
        Value::String(format!("{PLACEHOLDER}V{}", self.values.len() - 1))
    }

    fn line(&mut self, template: String) -> Value {
        self.lines.push(self.named(&template));
        Value::String(format!("{PLACEHOLDER}L{}", self.lines.len() - 1))
    }

    /// The object's YAML with the marks replaced.
    fn render(&self, object: &Value) -> anyhow::Result<String> {
        let yaml = crate::yaml::to_string(object)?;
        // What Go templates would read as an action, in the install file's own text.
        let yaml = yaml.replace("{{", "{{ \"{{\" }}");
        let mut out = String::new();
        for line in yaml.lines() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            if let Some(rest) = trimmed
                .strip_prefix(PLACEHOLDER)
                .and_then(|r| r.strip_prefix('L'))
            {
                let index: usize = rest
                    .split(':')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a line mark is a number followed by `: `");
                let nindent = indent.len().to_string();
                for template_line in self.lines[index].lines() {
                    let template_line = template_line.replace(INDENT, &nindent);
                    let _ = writeln!(out, "{indent}{template_line}");
                }
                continue;
            }
            let mut line = line.to_owned();
            while let Some(start) = line.find(&format!("{PLACEHOLDER}V")) {
                let digits: String = line[start + PLACEHOLDER.len() + 1..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let index: usize = digits.parse().expect("a value mark ends in a number");
                line.replace_range(
                    start..start + PLACEHOLDER.len() + 1 + digits.len(),
                    &self.values[index],
                );
            }
            out.push_str(&line);
            out.push('\n');
        }
        Ok(out)
    }
}

/// The section of the chart an object belongs to, and the toggle that gates it.
struct Placement {
    folder: &'static str,
    /// A Go template condition, or `None` for an object always rendered.
    condition: Option<String>,
}

/// The template of `object`, with its path under `templates/`; `None` for the objects the
/// static templates make.
pub fn template(
    install: &Install,
    defaults: &Defaults,
    object: &Value,
) -> anyhow::Result<Option<(String, String)>> {
    let kind = kind(object);
    let name = name(object);
    let suffix = install.suffix(name).to_owned();
    let Some(placement) = placement(kind, &suffix, object, defaults) else {
        return Ok(None);
    };
    let mut marks = Marks::new(&install.chart);
    let mut object = object.clone();
    mark_name_and_kind(install, defaults, &mut object, &mut marks, &suffix);
    mark_labels_and_annotations(install, &mut object, &mut marks);
    mark_references(install, defaults, &mut object, &mut marks);
    if kind == "CustomResourceDefinition" {
        mark_conversion(install, &mut object, &mut marks)?;
    }
    let body = marks.render(&object)?;
    let mut out = String::new();
    let _ = writeln!(out, "{GENERATED}");
    if let Some(condition) = &placement.condition {
        let _ = writeln!(out, "{{{{- if {} }}}}", marks.named(condition));
    }
    out.push_str(&body);
    if placement.condition.is_some() {
        out.push_str("{{- end }}\n");
    }
    let file = match kind {
        "CustomResourceDefinition" => name.to_owned(),
        "ServiceAccount" => format!("{suffix}-service-account"),
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => suffix.clone(),
        _ if placement.folder == "extra" => format!("{}-{suffix}", kind.to_lowercase()),
        _ => suffix.clone(),
    };
    Ok(Some((format!("{}/{file}.yaml", placement.folder), out)))
}

/// Where an object's template goes and what gates it; `None` for the objects the static
/// templates make.
fn placement(kind: &str, suffix: &str, object: &Value, defaults: &Defaults) -> Option<Placement> {
    Some(match kind {
        "Deployment" if suffix == defaults.deployment => return None,
        "Service" if suffix == defaults.metrics_service || suffix == defaults.webhook_service => {
            return None;
        }
        "Issuer" | "Certificate" if object_group(object) == "cert-manager.io" => return None,
        "ServiceMonitor" => return None,
        "NetworkPolicy"
            if suffix == "allow-metrics-traffic" || suffix == "allow-webhook-traffic" =>
        {
            return None;
        }
        "CustomResourceDefinition" => Placement {
            folder: "crd",
            condition: Some(enabled("crd", true)),
        },
        "ServiceAccount" if suffix == defaults.deployment => Placement {
            folder: "rbac",
            condition: Some(enabled("serviceAccount", true)),
        },
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => Placement {
            folder: "rbac",
            condition: rbac_condition(suffix, defaults),
        },
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => Placement {
            folder: "webhook",
            condition: Some(enabled("webhook", true)),
        },
        _ => Placement {
            folder: "extra",
            condition: None,
        },
    })
}

/// The object's kind (the manager's role follows `rbac.namespaced`), name and namespace.
fn mark_name_and_kind(
    install: &Install,
    defaults: &Defaults,
    object: &mut Value,
    marks: &mut Marks,
    suffix: &str,
) {
    let kind = self::kind(object).to_owned();
    let name = self::name(object).to_owned();
    // Objects in the project's namespace go to the release's; others stay where they are.
    let namespaced = str_at(object, &["metadata", "namespace"]) == Some(install.namespace.as_str());
    let is_manager_role =
        suffix == defaults.manager_role || suffix == defaults.manager_role_binding;
    let kind_value = match kind.as_str() {
        "Role" | "ClusterRole" if is_manager_role => {
            Some(marks.value(role_kind("Role", install.namespaced)))
        }
        "RoleBinding" | "ClusterRoleBinding" if is_manager_role => {
            Some(marks.value(role_kind("RoleBinding", install.namespaced)))
        }
        _ => None,
    };
    if let Some(kind_value) = kind_value {
        object["kind"] = kind_value;
    }
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_mapping_mut)
        .expect("every object has metadata");
    // kustomize leaves some names without its prefix (CRDs): those stay as they are.
    if name.starts_with(install.prefix.as_str()) && !install.prefix.is_empty() {
        metadata.insert("name".into(), marks.value(resource_name(suffix)));
    }
    if is_manager_role {
        metadata.remove("namespace");
        metadata.insert(
            marks.line(
                "{{- if include \"CHART.enabled\" (list .Values.rbac NAMESPACED \"namespaced\") }}\nnamespace: {{ .Release.Namespace }}\n{{- end }}"
                    .replace("NAMESPACED", if install.namespaced { "true" } else { "false" }),
            ),
            Value::String(String::new()),
        );
    } else if namespaced {
        metadata.insert(
            "namespace".into(),
            marks.value("{{ .Release.Namespace }}".into()),
        );
    }
}

/// The chart's labels with the object's own, and its annotations: cert-manager's CA injection
/// while `certManager.enabled`, and for a CRD `helm.sh/resource-policy: keep` while `crd.keep`.
/// The object's own labels and annotations stay keys of its YAML, escaped as the rest of it.
fn mark_labels_and_annotations(install: &Install, object: &mut Value, marks: &mut Marks) {
    let kind = self::kind(object).to_owned();
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_mapping_mut)
        .expect("every object has metadata");
    let mut labels = Mapping::new();
    labels.insert(
        marks.line(format!(
            "{{{{- include \"CHART.labels\" . | nindent {INDENT} }}}}"
        )),
        Value::String(String::new()),
    );
    let own = metadata
        .remove("labels")
        .and_then(|l| l.as_mapping().cloned());
    for (key, value) in own.unwrap_or_default() {
        let standard = [
            "app.kubernetes.io/name",
            "app.kubernetes.io/managed-by",
            "app.kubernetes.io/instance",
        ];
        if !key.as_str().is_some_and(|k| standard.contains(&k)) {
            labels.insert(key, value);
        }
    }
    metadata.insert("labels".into(), Value::Mapping(labels));
    let mut annotations = metadata
        .remove("annotations")
        .and_then(|a| a.as_mapping().cloned())
        .unwrap_or_default();
    let mut conditional = Vec::new();
    if annotations
        .remove("cert-manager.io/inject-ca-from")
        .is_some()
    {
        conditional.push((
            enabled("certManager", true),
            format!(
                "cert-manager.io/inject-ca-from: {{{{ .Release.Namespace }}}}/{}",
                resource_name(&install.suffix_of("Certificate", "serving-cert", "serving-cert"))
            ),
        ));
    }
    if kind == "CustomResourceDefinition" {
        conditional.push((
            "include \"CHART.enabled\" (list .Values.crd true \"keep\")".to_owned(),
            "helm.sh/resource-policy: keep".to_owned(),
        ));
    }
    if let Some(mark) = annotations_mark(!annotations.is_empty(), &conditional, marks) {
        if annotations.is_empty() {
            metadata.insert(mark, Value::String(String::new()));
        } else {
            annotations.insert(mark, Value::String(String::new()));
            metadata.insert("annotations".into(), Value::Mapping(annotations));
        }
    }
}

/// The mark of the annotations that hold while a toggle is on, `(condition, line)`: lines
/// among the object's own annotations (`own`), or the whole `annotations:` key, conditional
/// itself, when the object has none (a key with nothing under it would be null).
fn annotations_mark(
    own: bool,
    conditional: &[(String, String)],
    marks: &mut Marks,
) -> Option<Value> {
    if conditional.is_empty() {
        return None;
    }
    let lines: Vec<String> = conditional
        .iter()
        .map(|(condition, line)| format!("{{{{- if {condition} }}}}\n{line}\n{{{{- end }}}}"))
        .collect();
    if own {
        return Some(marks.line(lines.join("\n")));
    }
    let any = conditional
        .iter()
        .map(|(condition, _)| format!("({condition})"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut text = format!("{{{{- if or {any} }}}}\nannotations:");
    for line in lines.iter().flat_map(|l| l.lines()) {
        text.push_str("\n  ");
        text.push_str(line);
    }
    text.push_str("\n{{- end }}");
    Some(marks.line(text))
}

/// References to the release's objects: a binding's role and subjects, and the webhook
/// configurations' Service.
fn mark_references(install: &Install, defaults: &Defaults, object: &mut Value, marks: &mut Marks) {
    if let Some(role_ref) = at_mut(object, &["roleRef"]) {
        let ref_name = role_ref
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let ref_suffix = install.suffix(&ref_name).to_owned();
        if install.objects.iter().any(|o| self::name(o) == ref_name) {
            role_ref["name"] = marks.value(resource_name(&ref_suffix));
            if ref_suffix == defaults.manager_role {
                role_ref["kind"] = marks.value(role_kind("Role", install.namespaced));
            }
        }
    }
    if let Some(Value::Sequence(subjects)) = at_mut(object, &["subjects"]) {
        for subject in subjects {
            if subject.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                && subject.get("namespace").and_then(Value::as_str)
                    == Some(install.namespace.as_str())
            {
                subject["name"] =
                    marks.value("{{ include \"CHART.serviceAccountName\" $ }}".into());
                subject["namespace"] = marks.value("{{ .Release.Namespace }}".into());
            }
        }
    }
    if let Some(Value::Sequence(webhooks)) = at_mut(object, &["webhooks"]) {
        for webhook in webhooks {
            if let Some(service) = webhook
                .get_mut("clientConfig")
                .and_then(|c| c.get_mut("service"))
            {
                service_reference(install, marks, service);
            }
        }
    }
}

/// A CRD's conversion webhook, there while `webhook.enabled`, calling the release's Service.
fn mark_conversion(install: &Install, object: &mut Value, marks: &mut Marks) -> anyhow::Result<()> {
    let spec = object.get_mut("spec").and_then(Value::as_mapping_mut);
    if let Some(spec) = spec
        && let Some(mut conversion) = spec.get("conversion").cloned()
    {
        if let Some(service) = conversion
            .get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(|c| c.get_mut("service"))
        {
            service_reference(install, marks, service);
        }
        let mut wrapped = Mapping::new();
        wrapped.insert("conversion".into(), conversion);
        let text = marks.render(&Value::Mapping(wrapped))?;
        let line = marks.line(format!(
            "{{{{- if include \"CHART.enabled\" (list .Values.webhook true) }}}}\n{}{{{{- end }}}}",
            text
        ));
        replace_key(spec, "conversion", line);
    }
    Ok(())
}

/// The API group of an object.
fn object_group(object: &Value) -> &str {
    str_at(object, &["apiVersion"])
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group)
}

/// `include "CHART.enabled"` of `section.enabled`, with its default.
fn enabled(section: &str, default: bool) -> String {
    format!("include \"CHART.enabled\" (list .Values.{section} {default})")
}

/// The toggles of an RBAC object, by its name.
fn rbac_condition(suffix: &str, defaults: &Defaults) -> Option<String> {
    if ["-admin-role", "-editor-role", "-viewer-role"]
        .iter()
        .any(|end| suffix.ends_with(end))
    {
        return Some(
            "include \"CHART.enabled\" (list (.Values.rbac | default dict).helpers false)".into(),
        );
    }
    if suffix.starts_with("metrics-auth") || suffix == "metrics-reader" {
        return Some(format!(
            "and ({}) (include \"CHART.enabled\" (list .Values.metrics true \"secure\"))",
            enabled("metrics", defaults.metrics)
        ));
    }
    None
}

/// `Role` or `ClusterRole` (`RoleBinding` or `ClusterRoleBinding`) as `rbac.namespaced` says.
fn role_kind(kind: &str, namespaced: bool) -> String {
    format!(
        "{{{{ if include \"CHART.enabled\" (list .Values.rbac {namespaced} \"namespaced\") }}}}{kind}{{{{ else }}}}Cluster{kind}{{{{ end }}}}"
    )
}

/// A webhook client's Service: the release's, in the release's namespace.
fn service_reference(install: &Install, marks: &mut Marks, service: &mut Value) {
    let service_name = service
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    service["name"] = marks.value(resource_name(install.suffix(&service_name)));
    service["namespace"] = marks.value("{{ .Release.Namespace }}".into());
}

/// Replaces `key` of `map` by a line mark, in its place.
fn replace_key(map: &mut Mapping, key: &str, mark: Value) {
    let entries: Vec<(Value, Value)> = std::mem::take(map).into_iter().collect();
    for (k, v) in entries {
        if k.as_str() == Some(key) {
            map.insert(mark.clone(), Value::String(String::new()));
        } else {
            map.insert(k, v);
        }
    }
}

/// The webhook configurations of one kind whose CA bundle the manager sets itself when
/// cert-manager is disabled (`--webhook-cert-secret`): the plural of the kind, as RBAC names
/// it, and the suffix of each.
#[derive(Debug, serde::Serialize)]
pub struct Configurations {
    resource: String,
    suffixes: Vec<String>,
}

/// What the RBAC of the certificates the manager makes itself names (`certificates-rbac.yaml`):
/// the release's webhook configurations, by kind, and the CRDs it converts.
pub fn self_managed(install: &Install) -> (Vec<Configurations>, Vec<&str>) {
    let configurations = [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    .into_iter()
    .map(|kind| Configurations {
        resource: format!("{}s", kind.to_lowercase()),
        suffixes: install
            .of_kind(kind)
            .map(|o| install.suffix(name(o)).to_owned())
            .collect(),
    })
    .filter(|configurations| !configurations.suffixes.is_empty())
    .collect();
    let crds = install
        .of_kind("CustomResourceDefinition")
        .filter(|o| str_at(o, &["spec", "conversion", "strategy"]) == Some("Webhook"))
        .map(name)
        .collect();
    (configurations, crds)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::plugins::helm::op_install as install;

    const OBJECTS: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op-controller-manager\n  namespace: op-system\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: op:v1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: op-settings\n  namespace: op-system\n  labels:\n    app.kubernetes.io/name: op\n    tier: backend\ndata:\n  greeting: 'hello {{ .Values.x }} CHART PORT'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: other\n";

    #[test]
    fn the_install_files_own_text_is_escaped_and_its_names_follow_the_release() {
        let install = install(OBJECTS);
        let defaults = Defaults::of(&install).unwrap();
        let (path, text) = template(&install, &defaults, &install.objects[1])
            .unwrap()
            .unwrap();
        assert_eq!(path, "extra/configmap-settings.yaml");
        assert_eq!(
            text,
            "{{/* Code generated by rsbuilder edit --plugins=helm/v2-alpha. DO NOT EDIT. */}}\n\
             apiVersion: v1\n\
             kind: ConfigMap\n\
             metadata:\n  \
               name: {{ include \"op.resourceName\" (dict \"suffix\" \"settings\" \"context\" $) }}\n  \
               namespace: {{ .Release.Namespace }}\n  \
               labels:\n    \
                 {{- include \"op.labels\" . | nindent 4 }}\n    \
                 tier: backend\n\
             data:\n  \
               greeting: hello {{ \"{{\" }} .Values.x }} CHART PORT\n"
        );
        // A name kustomize did not prefix is kept; so is a namespace that is not the project's.
        let (_, text) = template(&install, &defaults, &install.objects[2])
            .unwrap()
            .unwrap();
        assert!(text.contains("\n  name: shared\n"), "{text}");
        assert!(text.contains("\n  namespace: other\n"), "{text}");
        // The manager's Deployment is the static template's.
        assert!(
            template(&install, &defaults, &install.objects[0])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_crds_own_annotations_are_escaped_beside_the_charts_conditional_ones() {
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n  annotations:\n    cert-manager.io/inject-ca-from: op-system/op-serving-cert\n    note: '{{ x }}'\nspec:\n  group: example.com\n";
        let install = install(&format!("{OBJECTS}---\n{crd}"));
        let defaults = Defaults::of(&install).unwrap();
        let (path, text) = template(&install, &defaults, &install.objects[3])
            .unwrap()
            .unwrap();
        assert_eq!(path, "crd/things.example.com.yaml");
        assert!(
            text.contains(
                "  annotations:\n    note: '{{ \"{{\" }} x }}'\n    {{- if include \"op.enabled\" (list .Values.certManager true) }}\n    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include \"op.resourceName\" (dict \"suffix\" \"serving-cert\" \"context\" $) }}\n    {{- end }}\n    {{- if include \"op.enabled\" (list .Values.crd true \"keep\") }}\n    helm.sh/resource-policy: keep\n    {{- end }}\n"
            ),
            "{text}"
        );
        // The CRD's name is its own, not the release's.
        assert!(text.contains("\n  name: things.example.com\n"), "{text}");
    }
}
