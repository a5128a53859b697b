//! The templates made from the install file's own objects: CRDs, RBAC, webhook configurations
//! and whatever else the user's kustomization adds.
//!
//! Where the release decides a value or a whole line, the object gets a mark (`PLACEHOLDER` and
//! a number) standing for a [`Mark`]. The object is serialized, its lines are read back as text
//! and marks ([`Line`]), and `templates/helm-object` renders them: the install file's own text
//! escaped where Go templates would read it (`{{`), each mark as its Helm template text.

use std::path::Path;

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::Install;
use super::fields::{at_mut, kind, name, str_at};
use super::values::Defaults;
use crate::scaffold::{PlannedFile, Policy, render_set};

/// The text of every mark; the install file may not hold it.
pub const PLACEHOLDER: &str = "RSBUILDER_HELM_MARK_";

/// What the release decides in an object, rendered by `templates/helm-object/_marks`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Mark {
    /// A value: the release's name of the install file's object whose name ends in `suffix`.
    ResourceName { suffix: String },
    /// A value: `Role` or `ClusterRole` (`role` is `Role` or `RoleBinding`) as
    /// `rbac.namespaced` says, `namespaced` by default.
    RoleKind {
        role: &'static str,
        namespaced: bool,
    },
    /// A value: the release's namespace.
    ReleaseNamespace,
    /// A value: the manager's ServiceAccount.
    ServiceAccountName,
    /// A line: the manager role's namespace, there while `rbac.namespaced`.
    RoleNamespace { namespaced: bool },
    /// A line: the chart's labels.
    Labels,
    /// A line: the annotations that hold while a toggle is on, among the object's own
    /// annotations (`own`), or the whole `annotations:` key, conditional itself, when the object
    /// has none (a key with nothing under it would be null).
    Annotations {
        own: bool,
        conditional: Vec<Annotation>,
    },
    /// A line: a CRD's conversion, there while `webhook.enabled`.
    Conversion { lines: Vec<Line> },
}

/// An annotation the chart adds while a toggle is on.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Annotation {
    /// cert-manager's CA injection from the release's `certificate`, while `certManager.enabled`.
    InjectCa { certificate: String },
    /// `helm.sh/resource-policy: keep` on a CRD, while `crd.keep`.
    Keep,
}

/// A condition of the chart's values.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Condition {
    /// `section.key` (`enabled` when `key` is `None`), `default` when unset.
    Enabled {
        section: &'static str,
        default: bool,
        key: Option<&'static str>,
    },
    /// The RBAC helper roles (`rbac.helpers`), off by default.
    RbacHelpers,
    /// The metrics authentication roles: metrics enabled (`default` when unset) and secure.
    MetricsAuth { default: bool },
}

/// `section.enabled`, `default` when unset.
fn enabled(section: &'static str, default: bool) -> Condition {
    Condition::Enabled {
        section,
        default,
        key: None,
    }
}

/// One line of an object's YAML: a line mark, or text and value marks.
#[derive(Debug, Clone, Serialize)]
struct Line {
    indent: String,
    mark: Option<Mark>,
    parts: Vec<Part>,
}

/// The install file's text, or a value mark.
#[derive(Debug, Clone, Serialize)]
struct Part {
    text: Option<String>,
    mark: Option<Mark>,
}

/// The marks put into an object.
#[derive(Default)]
struct Marks(Vec<Mark>);

impl Marks {
    /// A value that `mark` decides.
    fn value(&mut self, mark: Mark) -> Value {
        self.0.push(mark);
        Value::String(format!("{PLACEHOLDER}V{}", self.0.len() - 1))
    }

    /// A key whose whole `key: value` line `mark` decides.
    fn line(&mut self, mark: Mark) -> Value {
        self.0.push(mark);
        Value::String(format!("{PLACEHOLDER}L{}", self.0.len() - 1))
    }

    /// The lines of `object`'s YAML, its marks read back.
    fn lines(&self, object: &Value) -> anyhow::Result<Vec<Line>> {
        let yaml = crate::yaml::to_string(object)?;
        Ok(yaml.lines().map(|line| self.read_line(line)).collect())
    }

    fn read_line(&self, line: &str) -> Line {
        let trimmed = line.trim_start();
        let indent = line[..line.len() - trimmed.len()].to_owned();
        let line_mark = format!("{PLACEHOLDER}L");
        if let Some(rest) = trimmed.strip_prefix(&line_mark) {
            return Line {
                indent,
                mark: Some(self.0[leading_number(rest)].clone()),
                parts: Vec::new(),
            };
        }
        let value_mark = format!("{PLACEHOLDER}V");
        let mut parts = Vec::new();
        let mut rest = trimmed;
        while let Some(start) = rest.find(&value_mark) {
            if start > 0 {
                parts.push(text(&rest[..start]));
            }
            let after = &rest[start + value_mark.len()..];
            let index = leading_number(after);
            parts.push(Part {
                text: None,
                mark: Some(self.0[index].clone()),
            });
            rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
        }
        if !rest.is_empty() {
            parts.push(text(rest));
        }
        Line {
            indent,
            mark: None,
            parts,
        }
    }
}

/// The number a mark ends in.
fn leading_number(text: &str) -> usize {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    text[..digits].parse().expect("a mark ends in a number")
}

fn text(text: &str) -> Part {
    Part {
        text: Some(text.to_owned()),
        mark: None,
    }
}

/// What `templates/helm-object` renders.
#[derive(Serialize)]
struct ObjectContext {
    chart: String,
    /// What gates the object, `None` when it is always rendered.
    condition: Option<Condition>,
    lines: Vec<Line>,
}

/// The section of the chart an object belongs to, and the toggle that gates it.
struct Placement {
    folder: &'static str,
    /// `None` for an object always rendered.
    condition: Option<Condition>,
}

/// The template of `object` in the chart at `chart_dir`; `None` for the objects the static
/// templates make.
pub fn template(
    install: &Install,
    defaults: &Defaults,
    object: &Value,
    chart_dir: &Path,
) -> anyhow::Result<Option<PlannedFile>> {
    let kind = kind(object);
    let name = name(object);
    let suffix = install.suffix(name).to_owned();
    let Some(placement) = placement(kind, &suffix, object, defaults) else {
        return Ok(None);
    };
    let mut marks = Marks::default();
    let mut object = object.clone();
    mark_name_and_kind(install, defaults, &mut object, &mut marks, &suffix);
    mark_labels_and_annotations(install, &mut object, &mut marks);
    mark_references(install, defaults, &mut object, &mut marks);
    if kind == "CustomResourceDefinition" {
        mark_conversion(install, &mut object, &mut marks)?;
    }
    let context = ObjectContext {
        chart: install.chart.clone(),
        condition: placement.condition,
        lines: marks.lines(&object)?,
    };
    let file = match kind {
        "CustomResourceDefinition" => name.to_owned(),
        "ServiceAccount" => format!("{suffix}-service-account"),
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" => suffix.clone(),
        _ if placement.folder == "extra" => format!("{}-{suffix}", kind.to_lowercase()),
        _ => suffix.clone(),
    };
    let chart_dir = chart_dir.to_string_lossy();
    let paths = [
        ("chart_dir", chart_dir.as_ref()),
        ("folder", placement.folder),
        ("file", file.as_str()),
    ];
    let context = tera::Context::from_serialize(context)?;
    let mut files = render_set("helm-object", &context, &paths, |_| Policy::Regenerated)?;
    anyhow::ensure!(files.len() == 1, "the set helm-object makes one file");
    Ok(files.pop())
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
    let role = match kind.as_str() {
        "Role" | "ClusterRole" if is_manager_role => Some("Role"),
        "RoleBinding" | "ClusterRoleBinding" if is_manager_role => Some("RoleBinding"),
        _ => None,
    };
    if let Some(role) = role {
        object["kind"] = marks.value(Mark::RoleKind {
            role,
            namespaced: install.namespaced,
        });
    }
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_mapping_mut)
        .expect("every object has metadata");
    // kustomize leaves some names without its prefix (CRDs): those stay as they are.
    if name.starts_with(install.prefix.as_str()) && !install.prefix.is_empty() {
        let mark = Mark::ResourceName {
            suffix: suffix.to_owned(),
        };
        metadata.insert("name".into(), marks.value(mark));
    }
    if is_manager_role {
        metadata.remove("namespace");
        let mark = Mark::RoleNamespace {
            namespaced: install.namespaced,
        };
        metadata.insert(marks.line(mark), Value::String(String::new()));
    } else if namespaced {
        metadata.insert("namespace".into(), marks.value(Mark::ReleaseNamespace));
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
    labels.insert(marks.line(Mark::Labels), Value::String(String::new()));
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
        conditional.push(Annotation::InjectCa {
            certificate: install.suffix_of("Certificate", "serving-cert", "serving-cert"),
        });
    }
    if kind == "CustomResourceDefinition" {
        conditional.push(Annotation::Keep);
    }
    if conditional.is_empty() {
        return;
    }
    let mark = marks.line(Mark::Annotations {
        own: !annotations.is_empty(),
        conditional,
    });
    if annotations.is_empty() {
        metadata.insert(mark, Value::String(String::new()));
    } else {
        annotations.insert(mark, Value::String(String::new()));
        metadata.insert("annotations".into(), Value::Mapping(annotations));
    }
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
            if ref_suffix == defaults.manager_role {
                role_ref["kind"] = marks.value(Mark::RoleKind {
                    role: "Role",
                    namespaced: install.namespaced,
                });
            }
            role_ref["name"] = marks.value(Mark::ResourceName { suffix: ref_suffix });
        }
    }
    if let Some(Value::Sequence(subjects)) = at_mut(object, &["subjects"]) {
        for subject in subjects {
            if subject.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                && subject.get("namespace").and_then(Value::as_str)
                    == Some(install.namespace.as_str())
            {
                subject["name"] = marks.value(Mark::ServiceAccountName);
                subject["namespace"] = marks.value(Mark::ReleaseNamespace);
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
        let lines = marks.lines(&Value::Mapping(wrapped))?;
        let mark = marks.line(Mark::Conversion { lines });
        replace_key(spec, "conversion", mark);
    }
    Ok(())
}

/// The API group of an object.
fn object_group(object: &Value) -> &str {
    str_at(object, &["apiVersion"])
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(group, _)| group)
}

/// The toggles of an RBAC object, by its name.
fn rbac_condition(suffix: &str, defaults: &Defaults) -> Option<Condition> {
    if ["-admin-role", "-editor-role", "-viewer-role"]
        .iter()
        .any(|end| suffix.ends_with(end))
    {
        return Some(Condition::RbacHelpers);
    }
    if suffix.starts_with("metrics-auth") || suffix == "metrics-reader" {
        return Some(Condition::MetricsAuth {
            default: defaults.metrics,
        });
    }
    None
}

/// A webhook client's Service: the release's, in the release's namespace.
fn service_reference(install: &Install, marks: &mut Marks, service: &mut Value) {
    let service_name = service
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let suffix = install.suffix(service_name).to_owned();
    service["name"] = marks.value(Mark::ResourceName { suffix });
    service["namespace"] = marks.value(Mark::ReleaseNamespace);
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

    /// The chart's template of the install file's object `index`, in `chart/`.
    fn chart_file(objects: &str, index: usize) -> Option<PlannedFile> {
        let install = install(objects);
        let defaults = Defaults::of(&install).unwrap();
        template(
            &install,
            &defaults,
            &install.objects[index],
            Path::new("chart"),
        )
        .unwrap()
    }

    #[test]
    fn the_install_files_own_text_is_escaped_and_its_names_follow_the_release() {
        let file = chart_file(OBJECTS, 1).unwrap();
        let (path, text) = (file.path, file.contents);
        assert_eq!(
            path,
            Path::new("chart/templates/extra/configmap-settings.yaml")
        );
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
        let text = chart_file(OBJECTS, 2).unwrap().contents;
        assert!(text.contains("\n  name: shared\n"), "{text}");
        assert!(text.contains("\n  namespace: other\n"), "{text}");
        // The manager's Deployment is the static template's.
        assert!(chart_file(OBJECTS, 0).is_none());
    }

    #[test]
    fn a_crds_own_annotations_are_escaped_beside_the_charts_conditional_ones() {
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n  annotations:\n    cert-manager.io/inject-ca-from: op-system/op-serving-cert\n    note: '{{ x }}'\nspec:\n  group: example.com\n";
        let file = chart_file(&format!("{OBJECTS}---\n{crd}"), 3).unwrap();
        let (path, text) = (file.path, file.contents);
        assert_eq!(
            path,
            Path::new("chart/templates/crd/things.example.com.yaml")
        );
        assert!(
            text.contains(
                "  annotations:\n    note: '{{ \"{{\" }} x }}'\n    {{- if include \"op.enabled\" (list .Values.certManager true) }}\n    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include \"op.resourceName\" (dict \"suffix\" \"serving-cert\" \"context\" $) }}\n    {{- end }}\n    {{- if include \"op.enabled\" (list .Values.crd true \"keep\") }}\n    helm.sh/resource-policy: keep\n    {{- end }}\n"
            ),
            "{text}"
        );
        // The CRD's name is its own, not the release's.
        assert!(text.contains("\n  name: things.example.com\n"), "{text}");
    }

    #[test]
    fn a_crds_conversion_calls_the_releases_service_while_webhooks_are_on() {
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\nspec:\n  group: example.com\n  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          name: op-webhook-service\n          namespace: op-system\n          path: '/convert\"CHART.{{'\n      conversionReviewVersions:\n      - v1\n  scope: Namespaced\n";
        let text = chart_file(&format!("{OBJECTS}---\n{crd}"), 3)
            .unwrap()
            .contents;
        assert!(
            text.ends_with(
                "spec:\n  \
                   group: example.com\n  \
                   {{- if include \"op.enabled\" (list .Values.webhook true) }}\n  \
                   conversion:\n    \
                     strategy: Webhook\n    \
                     webhook:\n      \
                       clientConfig:\n        \
                         service:\n          \
                           name: {{ include \"op.resourceName\" (dict \"suffix\" \"webhook-service\" \"context\" $) }}\n          \
                           namespace: {{ .Release.Namespace }}\n          \
                           path: /convert\"CHART.{{ \"{{\" }}\n      \
                       conversionReviewVersions:\n      \
                       - v1\n  \
                   {{- end }}\n  \
                   scope: Namespaced\n\
                 {{- end }}\n"
            ),
            "{text}"
        );
    }
}
