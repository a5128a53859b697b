//! `values.yaml` under kubebuilder's keys, filled from the install file's manager; its
//! `values.schema.json`; and the merge that keeps a user's `values.yaml` on a re-run while
//! adding the keys it lacks.

use std::fmt::Write as _;

use serde_json::json;
use serde_yaml::Value;

use super::Install;
use super::fields::{self, at, str_at};
use crate::ui::UserError;

/// The chart's defaults, as the install file gives them.
#[derive(Debug)]
pub struct Defaults {
    /// The manager Deployment's (and ServiceAccount's) name suffix.
    pub deployment: String,
    pub metrics_service: String,
    pub webhook_service: String,
    pub issuer: String,
    pub manager_role: String,
    pub manager_role_binding: String,
    pub metrics: bool,
    pub secure: bool,
    pub webhook: bool,
    pub cert_manager: bool,
    pub metrics_port: u16,
    pub webhook_port: u16,
    pub probe_port: u16,
    pub repository: String,
    pub tag: String,
    pub pull_policy: String,
    pub replicas: u64,
    /// The manager's arguments the templates do not write themselves.
    pub args: Vec<String>,
    /// The manager's environment the templates do not write themselves.
    pub env: Vec<Value>,
    pub resources: Value,
    pub security_context: Value,
    pub pod_security_context: Value,
    pub termination_grace: Option<u64>,
    pub affinity: Value,
    pub node_selector: Value,
    pub tolerations: Value,
    pub namespaced: bool,
    /// Whether install.yaml has a ServiceMonitor (`prometheus.enabled`).
    pub prometheus: bool,
    /// Whether install.yaml has NetworkPolicies (`networkPolicy.enabled`).
    pub network_policy: bool,
    /// The manager's fields the template writes only from values, as install.yaml sets them:
    /// `(key, value)` under `manager:` (`pod` holds the pod's labels and annotations). Empty
    /// ones are left out.
    pub manager_extras: Vec<(&'static str, Value)>,
}

/// Arguments the manager template writes from other values.
const TEMPLATE_ARGS: &[&str] = &[
    "--metrics-bind-address",
    "--health-probe-bind-address",
    "--webhook-cert-path",
    "--webhook-port",
    "--metrics-secure",
    "--metrics-cert-path",
    "--enable-webhooks",
];
/// Labels the templates write themselves: the chart's (on the Deployment) and the selector's
/// (on the pod). kustomize's `managed-by` is replaced by Helm's.
const TEMPLATE_LABELS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
    "control-plane",
];
/// The pod annotation the manager template writes itself.
const TEMPLATE_POD_ANNOTATIONS: &[&str] = &["kubectl.kubernetes.io/default-container"];
/// The volumes (and their mounts) the manager template writes from `webhook` and `metrics`.
const TEMPLATE_VOLUMES: &[&str] = &["webhook-certs", "metrics-certs"];
/// Environment variables the manager template writes itself.
const TEMPLATE_ENV: &[&str] = &[
    "POD_NAME",
    "POD_NAMESPACE",
    "WATCH_NAMESPACE",
    "WEBHOOK_CERT_SECRET",
    "WEBHOOK_SERVICE_NAME",
];

impl Defaults {
    pub fn of(install: &Install) -> anyhow::Result<Self> {
        let deployment = install
            .of_kind("Deployment")
            .next()
            .expect("read() found a Deployment");
        let (pod, container) = manager_container(deployment)?;
        let args: Vec<String> = at(&container, &["args"])
            .and_then(Value::as_sequence)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let arg = |flag: &str| -> Option<&str> {
            args.iter()
                .find_map(|a| a.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')))
        };
        let port_of = |address: Option<&str>| -> Option<u16> {
            address
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
        };
        let metrics_service = install.suffix_of(
            "Service",
            "metrics-service",
            "controller-manager-metrics-service",
        );
        let has_metrics_service = install
            .of_kind("Service")
            .any(|s| install.suffix(fields::name(s)) == metrics_service);
        let metrics_port = port_of(arg("--metrics-bind-address")).unwrap_or(0);
        let (repository, tag) =
            split_image(str_at(&container, &["image"]).unwrap_or("controller:latest"));
        let (roles, bindings) = (
            &["Role", "ClusterRole"],
            &["RoleBinding", "ClusterRoleBinding"],
        );
        Ok(Defaults {
            deployment: install.suffix(fields::name(deployment)).to_owned(),
            metrics_service,
            webhook_service: install.suffix_of("Service", "webhook-service", "webhook-service"),
            issuer: install.suffix_of("Issuer", "selfsigned-issuer", "selfsigned-issuer"),
            manager_role: install.suffix_of_any(roles, "manager-role", "manager-role"),
            manager_role_binding: install.suffix_of_any(
                bindings,
                "manager-rolebinding",
                "manager-rolebinding",
            ),
            metrics: has_metrics_service && metrics_port != 0,
            secure: arg("--metrics-secure") != Some("false"),
            webhook: serves_webhooks(install),
            cert_manager: install.objects.iter().any(|o| {
                str_at(o, &["apiVersion"]).is_some_and(|v| v.starts_with("cert-manager.io/"))
            }),
            metrics_port: if metrics_port == 0 {
                8443
            } else {
                metrics_port
            },
            // The manager listens where --webhook-port says; the container port only names it.
            webhook_port: port_of(
                arg("--webhook-port")
                    .map(|port| format!(":{port}"))
                    .as_deref(),
            )
            .or_else(|| container_port(&container, "webhook-server"))
            .unwrap_or(9443),
            probe_port: port_of(arg("--health-probe-bind-address")).unwrap_or(8081),
            repository,
            tag,
            pull_policy: str_at(&container, &["imagePullPolicy"])
                .unwrap_or("IfNotPresent")
                .to_owned(),
            replicas: at(deployment, &["spec", "replicas"])
                .and_then(Value::as_u64)
                .unwrap_or(1),
            args: args
                .iter()
                .filter(|a| {
                    !TEMPLATE_ARGS
                        .iter()
                        .any(|flag| a.split('=').next() == Some(flag))
                })
                .cloned()
                .collect(),
            env: own_env(&container),
            resources: map_at(&container, "resources"),
            security_context: map_at(&container, "securityContext"),
            pod_security_context: map_at(&pod, "securityContext"),
            termination_grace: at(&pod, &["terminationGracePeriodSeconds"]).and_then(Value::as_u64),
            affinity: map_at(&pod, "affinity"),
            node_selector: map_at(&pod, "nodeSelector"),
            tolerations: at(&pod, &["tolerations"])
                .cloned()
                .unwrap_or(Value::Sequence(Vec::new())),
            namespaced: install.namespaced,
            prometheus: install.of_kind("ServiceMonitor").next().is_some(),
            network_policy: install.of_kind("NetworkPolicy").next().is_some(),
            manager_extras: manager_extras(deployment, &pod, &container),
        })
    }
}

/// What install.yaml sets on the manager that the template writes only from values: the
/// Deployment's own labels and annotations, the pod's, its pull secrets, priority class,
/// strategy, spread constraints, and the volumes and mounts but the certificates'.
fn manager_extras(
    deployment: &Value,
    pod: &Value,
    container: &Value,
) -> Vec<(&'static str, Value)> {
    let without = |value: Option<&Value>, keys: &[&str]| -> Value {
        let mut map = value
            .and_then(Value::as_mapping)
            .cloned()
            .unwrap_or_default();
        map.retain(|key, _| !key.as_str().is_some_and(|key| keys.contains(&key)));
        Value::Mapping(map)
    };
    let named = |value: Option<&Value>| -> Value {
        let items = value
            .and_then(Value::as_sequence)
            .cloned()
            .unwrap_or_default();
        Value::Sequence(
            items
                .into_iter()
                .filter(|item| {
                    !TEMPLATE_VOLUMES.contains(&str_at(item, &["name"]).unwrap_or_default())
                })
                .collect(),
        )
    };
    let template = at(deployment, &["spec", "template", "metadata"]);
    let mut pod_metadata = serde_yaml::Mapping::new();
    for (key, value) in [
        (
            "annotations",
            without(
                template.and_then(|t| t.get("annotations")),
                TEMPLATE_POD_ANNOTATIONS,
            ),
        ),
        (
            "labels",
            without(template.and_then(|t| t.get("labels")), TEMPLATE_LABELS),
        ),
    ] {
        if !is_empty(&value) {
            pod_metadata.insert(key.into(), value);
        }
    }
    let extras = [
        (
            "labels",
            without(at(deployment, &["metadata", "labels"]), TEMPLATE_LABELS),
        ),
        (
            "annotations",
            without(at(deployment, &["metadata", "annotations"]), &[]),
        ),
        ("pod", Value::Mapping(pod_metadata)),
        (
            "imagePullSecrets",
            pod.get("imagePullSecrets").cloned().unwrap_or_default(),
        ),
        (
            "priorityClassName",
            pod.get("priorityClassName").cloned().unwrap_or_default(),
        ),
        (
            "strategy",
            at(deployment, &["spec", "strategy"])
                .cloned()
                .unwrap_or_default(),
        ),
        (
            "topologySpreadConstraints",
            pod.get("topologySpreadConstraints")
                .cloned()
                .unwrap_or_default(),
        ),
        ("extraVolumes", named(pod.get("volumes"))),
        ("extraVolumeMounts", named(container.get("volumeMounts"))),
    ];
    extras
        .into_iter()
        .filter(|(_, value)| !is_empty(value))
        .collect()
}

/// Null, an empty string, mapping or sequence.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Mapping(m) => m.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        _ => false,
    }
}

/// The manager's pod spec and container (named `manager`, or the first).
fn manager_container(deployment: &Value) -> anyhow::Result<(Value, Value)> {
    let pod = at(deployment, &["spec", "template", "spec"])
        .cloned()
        .unwrap_or_default();
    let container = at(&pod, &["containers"])
        .and_then(Value::as_sequence)
        .and_then(|c| {
            c.iter()
                .find(|c| str_at(c, &["name"]) == Some("manager"))
                .or_else(|| c.first())
        })
        .cloned()
        .ok_or_else(|| {
            UserError::new("the install file's Deployment has no container")
                .help("write it again with `make build-installer`")
        })?;
    Ok((pod, container))
}

/// Whether the install file has webhook configurations or a CRD converted by a webhook.
fn serves_webhooks(install: &Install) -> bool {
    install
        .of_kind("ValidatingWebhookConfiguration")
        .next()
        .is_some()
        || install
            .of_kind("MutatingWebhookConfiguration")
            .next()
            .is_some()
        || install
            .of_kind("CustomResourceDefinition")
            .any(|c| str_at(c, &["spec", "conversion", "strategy"]) == Some("Webhook"))
}

/// The container's port named `name`.
fn container_port(container: &Value, name: &str) -> Option<u16> {
    at(container, &["ports"])
        .and_then(Value::as_sequence)?
        .iter()
        .find(|p| str_at(p, &["name"]) == Some(name))
        .and_then(|p| p.get("containerPort"))
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
}

/// The container's environment but the variables the manager template writes itself.
fn own_env(container: &Value) -> Vec<Value> {
    at(container, &["env"])
        .and_then(Value::as_sequence)
        .map(|env| {
            env.iter()
                .filter(|e| !TEMPLATE_ENV.contains(&str_at(e, &["name"]).unwrap_or_default()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The mapping at `key` of `value`, or an empty one.
fn map_at(value: &Value, key: &str) -> Value {
    value
        .get(key)
        .cloned()
        .unwrap_or(Value::Mapping(Default::default()))
}

impl Install {
    /// `suffix_of` over several kinds.
    pub fn suffix_of_any(&self, kinds: &[&str], end: &str, default: &str) -> String {
        kinds
            .iter()
            .map(|kind| self.suffix_of(kind, end, ""))
            .find(|s| !s.is_empty())
            .unwrap_or_else(|| default.to_owned())
    }
}

/// `repository[:tag]` or `repository@digest`: the repository and the tag (`latest` when there
/// is none; a digest stays in the repository).
fn split_image(image: &str) -> (String, String) {
    if image.contains('@') {
        return (image.to_owned(), "latest".to_owned());
    }
    match image.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository.to_owned(), tag.to_owned()),
        _ => (image.to_owned(), "latest".to_owned()),
    }
}

/// A value as YAML under `key:`, indented by `indent` spaces.
fn entry(out: &mut String, indent: usize, key: &str, value: &Value) {
    let pad = " ".repeat(indent);
    let empty = match value {
        Value::Mapping(m) => m.is_empty(),
        Value::Sequence(s) => s.is_empty(),
        _ => false,
    };
    if empty || !matches!(value, Value::Mapping(_) | Value::Sequence(_)) {
        let text = crate::yaml::to_string(value).expect("a value serializes");
        let _ = writeln!(out, "{pad}{key}: {}", text.trim_end());
        return;
    }
    let _ = writeln!(out, "{pad}{key}:");
    let text = crate::yaml::to_string(value).expect("a value serializes");
    for line in text.lines() {
        let _ = writeln!(out, "{pad}  {line}");
    }
}

/// The keys under `manager:` the template reads that install.yaml may leave unset, in the
/// order `values.yaml` lists them (`pod` stands for `pod.labels` and `pod.annotations`).
const EXTRA_KEYS: &[&str] = &[
    "labels",
    "annotations",
    "pod",
    "imagePullSecrets",
    "priorityClassName",
    "strategy",
    "topologySpreadConstraints",
    "extraVolumes",
    "extraVolumeMounts",
];

/// The generated `values.yaml`.
pub fn render(install: &Install, d: &Defaults) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Values of the {} chart, made by `rsbuilder edit --plugins=helm/v2-alpha` from the\n# kustomize output.",
        install.chart
    );
    out.push_str(
        "# A re-run keeps your edits here and adds the keys this file lacks. Every value may be\n# removed (`--set key=null`); values.schema.json refuses values of the wrong type.\n\n",
    );
    out.push_str("# nameOverride replaces the chart's name in object names and labels;\n# fullnameOverride replaces the whole prefix of object names.\n# nameOverride: \"\"\n# fullnameOverride: \"\"\n\n");
    out.push_str("# The manager Deployment.\nmanager:\n");
    out.push_str(
        "  # false leaves the manager out, e.g. to install the CRDs alone.\n  enabled: true\n",
    );
    let _ = writeln!(out, "  replicas: {}", d.replicas);
    out.push_str("  image:\n");
    let _ = writeln!(
        out,
        "    repository: {}",
        crate::yaml::scalar(&d.repository)
    );
    out.push_str("    # Removed, the tag is the chart's appVersion.\n");
    let _ = writeln!(out, "    tag: {}", crate::yaml::scalar(&d.tag));
    let _ = writeln!(out, "    pullPolicy: {}", d.pull_policy);
    out.push_str("  # Arguments after those the chart sets from metrics, webhook and healthProbe; each is\n  # rendered with `tpl`.\n");
    entry(
        &mut out,
        2,
        "args",
        &Value::Sequence(d.args.iter().cloned().map(Value::String).collect()),
    );
    out.push_str("  # Environment variables, after POD_NAME, POD_NAMESPACE and WATCH_NAMESPACE.\n");
    entry(&mut out, 2, "env", &Value::Sequence(d.env.clone()));
    out.push_str("  # NAME: value pairs that replace or add to env (--set manager.envOverrides.NAME=value).\n  envOverrides: {}\n");
    out.push_str("  # The manager serves /healthz and /readyz on this port.\n  healthProbe:\n");
    let _ = writeln!(out, "    port: {}", d.probe_port);
    entry(&mut out, 2, "podSecurityContext", &d.pod_security_context);
    entry(&mut out, 2, "securityContext", &d.security_context);
    entry(&mut out, 2, "resources", &d.resources);
    entry(&mut out, 2, "affinity", &d.affinity);
    entry(&mut out, 2, "nodeSelector", &d.node_selector);
    entry(&mut out, 2, "tolerations", &d.tolerations);
    if let Some(grace) = d.termination_grace {
        let _ = writeln!(out, "  terminationGracePeriodSeconds: {grace}");
    }
    for (key, value) in &d.manager_extras {
        entry(&mut out, 2, key, value);
    }
    let unset: Vec<&str> = EXTRA_KEYS
        .iter()
        .copied()
        .filter(|key| !d.manager_extras.iter().any(|(set, _)| set == key))
        .collect();
    if !unset.is_empty() {
        let mut comment = String::from("  # Also read when set:");
        let mut width = comment.len();
        let unset: Vec<&str> = unset
            .into_iter()
            .flat_map(|key| match key {
                "pod" => vec!["pod.labels", "pod.annotations"],
                key => vec![key],
            })
            .collect();
        for (index, key) in unset.iter().enumerate() {
            let word = if index + 1 == unset.len() {
                format!(" {key}.")
            } else {
                format!(" {key},")
            };
            if width + word.len() > 92 {
                comment.push_str("\n  #");
                width = 3;
            }
            width += word.len();
            comment.push_str(&word);
        }
        out.push_str(&comment);
        out.push('\n');
    }
    out.push('\n');
    out.push_str("# The manager's RBAC.\nrbac:\n  # true: a Role and RoleBinding in the release's namespace; false: a ClusterRole and\n  # ClusterRoleBinding.");
    if d.namespaced {
        out.push_str(" The manager watches only the release's namespace either way.\n");
    } else {
        out.push_str(" true also limits the manager to the release's namespace.\n");
    }
    let _ = writeln!(out, "  namespaced: {}", d.namespaced);
    out.push_str("  # The admin, editor and viewer roles of each kind, for the cluster's users.\n  helpers:\n    enabled: false\n\n");
    out.push_str("# The manager's ServiceAccount. With enabled: false, name one that exists (default: the\n# namespace's own).\nserviceAccount:\n  enabled: true\n  # name: default\n\n");
    out.push_str("# The CRDs: installed with the chart, and kept by `helm uninstall` while keep is true.\ncrd:\n  enabled: true\n  keep: true\n\n");
    out.push_str("# The /metrics endpoint: HTTPS with authentication and authorization (secure), or HTTP.\nmetrics:\n");
    let _ = writeln!(
        out,
        "  enabled: {}\n  port: {}\n  secure: {}\n",
        d.metrics, d.metrics_port, d.secure
    );
    if d.webhook {
        out.push_str("# cert-manager issues the webhook (and metrics) certificates. With enabled: false the\n# manager makes its own webhook certificate and keeps it in a Secret.\ncertManager:\n");
        let _ = writeln!(out, "  enabled: {}\n", d.cert_manager);
        out.push_str("# The webhook server.\nwebhook:\n");
        let _ = writeln!(out, "  enabled: true\n  port: {}\n", d.webhook_port);
    } else {
        out.push_str("# cert-manager issues the metrics certificate.\ncertManager:\n");
        let _ = writeln!(out, "  enabled: {}\n", d.cert_manager);
    }
    let _ = writeln!(
        out,
        "# A ServiceMonitor of the metrics, for the Prometheus operator.\nprometheus:\n  enabled: {}\n",
        d.prometheus
    );
    let _ = writeln!(
        out,
        "# NetworkPolicies that let only namespaces labelled metrics=enabled (webhook=enabled)\n# reach the manager.\nnetworkPolicy:\n  enabled: {}",
        d.network_policy
    );
    out
}

/// `values.schema.json`: the types of every value; removed values pass.
pub fn schema(d: &Defaults) -> String {
    let object = json!({"type": "object"});
    let boolean = json!({"type": "boolean"});
    let port = json!({"type": "integer", "minimum": 1, "maximum": 65535});
    let section = |properties: serde_json::Value| json!({"type": "object", "additionalProperties": false, "properties": properties});
    let mut properties = json!({
        "global": object,
        "nameOverride": {"type": "string"},
        "fullnameOverride": {"type": "string"},
        "manager": section(json!({
            "enabled": boolean,
            "replicas": {"type": "integer", "minimum": 0},
            "image": section(json!({
                "repository": {"type": "string", "minLength": 1},
                "tag": {"type": ["string", "number"]},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            })),
            "args": {"type": "array", "items": {"type": "string"}},
            "env": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "envOverrides": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
            "healthProbe": section(json!({"port": port})),
            "podSecurityContext": object,
            "securityContext": object,
            "resources": object,
            "affinity": object,
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "tolerations": {"type": "array"},
            "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "pod": section(json!({
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            })),
            "imagePullSecrets": {"type": "array"},
            "strategy": object,
            "priorityClassName": {"type": "string"},
            "topologySpreadConstraints": {"type": "array"},
            "extraVolumes": {"type": "array"},
            "extraVolumeMounts": {"type": "array"},
        })),
        "rbac": section(json!({
            "namespaced": boolean,
            "helpers": section(json!({"enabled": boolean})),
        })),
        "serviceAccount": section(json!({"enabled": boolean, "name": {"type": "string"}})),
        "crd": section(json!({"enabled": boolean, "keep": boolean})),
        "metrics": section(json!({"enabled": boolean, "port": port, "secure": boolean})),
        "certManager": section(json!({"enabled": boolean})),
        "prometheus": section(json!({"enabled": boolean})),
        "networkPolicy": section(json!({"enabled": boolean})),
    });
    if d.webhook {
        properties["webhook"] = section(json!({"enabled": boolean, "port": port}));
    }
    let schema = json!({
        "$schema": "https://json-schema.org/draft-07/schema#",
        "title": "Values",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
    });
    let mut text = serde_json::to_string_pretty(&schema).expect("the schema serializes");
    text.push('\n');
    text
}

/// The user's `values.yaml` with the keys of `generated` it lacks, at the first two levels,
/// each added as the generated file writes it, comments included. Everything else of the
/// user's file stays byte for byte.
pub fn merge(existing: &str, generated: &str) -> Result<String, serde_yaml::Error> {
    let user: Value = serde_yaml::from_str(existing)?;
    let fresh: Value = serde_yaml::from_str(generated).expect("the generated values parse");
    let Value::Mapping(fresh_map) = &fresh else {
        return Ok(existing.to_owned());
    };
    let user_map = user.as_mapping().cloned().unwrap_or_default();
    let mut text = existing.to_owned();
    for (key, value) in fresh_map {
        let Some(key) = key.as_str() else { continue };
        match user_map.get(key) {
            None if !user_map.is_empty() || user.is_null() => {
                if let Some(block) = block(generated, 0, key, None) {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&block);
                }
            }
            Some(Value::Mapping(mine)) => {
                let Value::Mapping(theirs) = value else {
                    continue;
                };
                for child in theirs.keys().filter_map(Value::as_str) {
                    if mine.contains_key(child) {
                        continue;
                    }
                    if let Some(lines) = block(generated, 2, child, Some(key)) {
                        text = insert_in_section(&text, key, &lines);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(text)
}

/// The lines of `key` at `indent` (inside top-level `parent`, if given) in `text`, with the
/// comment lines just above it.
fn block(text: &str, indent: usize, key: &str, parent: Option<&str>) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let pad = " ".repeat(indent);
    let (from, to) = match parent {
        Some(parent) => section_bounds(&lines, parent)?,
        None => (0, lines.len()),
    };
    let start = (from..to).find(|&i| {
        lines[i].strip_prefix(pad.as_str()).is_some_and(|rest| {
            !rest.starts_with(' ') && rest.strip_prefix(key).is_some_and(|r| r.starts_with(':'))
        })
    })?;
    let mut first = start;
    while first > from && lines[first - 1].starts_with(&format!("{pad}#")) {
        first -= 1;
    }
    let mut end = start + 1;
    while end < to
        && (lines[end].starts_with(&format!("{pad} "))
            || lines[end].starts_with(&format!("{pad}- ")))
        && !lines[end].is_empty()
    {
        end += 1;
    }
    let mut out = lines[first..end].join("\n");
    out.push('\n');
    Some(out)
}

/// The line range of top-level `key`'s block: its own line excluded, up to the next line
/// that is neither indented nor blank.
fn section_bounds(lines: &[&str], key: &str) -> Option<(usize, usize)> {
    let start = lines.iter().position(|l| {
        l.strip_prefix(key)
            .is_some_and(|r| r.starts_with(':') && r[1..].trim().is_empty())
    })?;
    let mut end = start + 1;
    while end < lines.len() && (lines[end].starts_with(' ') || lines[end].is_empty()) {
        end += 1;
    }
    Some((start + 1, end))
}

/// `text` with `lines` put at the end of top-level `key`'s block (before its trailing blank
/// lines). A section that is not a block mapping (`manager: {}`) is left alone.
fn insert_in_section(text: &str, key: &str, lines: &str) -> String {
    let all: Vec<&str> = text.lines().collect();
    let Some((from, mut to)) = section_bounds(&all, key) else {
        return text.to_owned();
    };
    while to > from && all[to - 1].trim().is_empty() {
        to -= 1;
    }
    let mut out = String::new();
    for line in &all[..to] {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(lines);
    for line in &all[to..] {
        out.push_str(line);
        out.push('\n');
    }
    if !text.ends_with('\n') && out.ends_with('\n') && !all[to..].is_empty() {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_split_into_repository_and_tag() {
        assert_eq!(
            split_image("controller:latest"),
            ("controller".into(), "latest".into())
        );
        assert_eq!(
            split_image("localhost:5000/op:v1.2"),
            ("localhost:5000/op".into(), "v1.2".into())
        );
        assert_eq!(
            split_image("localhost:5000/op"),
            ("localhost:5000/op".into(), "latest".into())
        );
        assert_eq!(
            split_image("op@sha256:abc"),
            ("op@sha256:abc".into(), "latest".into())
        );
    }

    const GENERATED: &str = "# The manager.\nmanager:\n  enabled: true\n  # Replicas.\n  replicas: 1\n  image:\n    repository: controller\n\n# Webhooks.\nwebhook:\n  enabled: true\n  port: 9443\n";

    #[test]
    fn a_merge_keeps_the_users_values_and_comments_and_adds_missing_keys() {
        let user =
            "# mine\nmanager:\n  replicas: 3 # three\n  image:\n    repository: example.com/op\n";
        let merged = merge(user, GENERATED).unwrap();
        assert_eq!(
            merged,
            "# mine\nmanager:\n  replicas: 3 # three\n  image:\n    repository: example.com/op\n  enabled: true\n\n# Webhooks.\nwebhook:\n  enabled: true\n  port: 9443\n"
        );
        // Nothing to add: the file stays as it is.
        assert_eq!(merge(&merged, GENERATED).unwrap(), merged);
        // A value set to null stays removed.
        let nulled = "manager:\n  enabled: true\n  replicas: null\n  image: null\nwebhook: null\n";
        assert_eq!(merge(nulled, GENERATED).unwrap(), nulled);
    }

    #[test]
    fn a_merge_refuses_what_is_not_yaml() {
        assert!(merge("manager: [", GENERATED).is_err());
    }
}
