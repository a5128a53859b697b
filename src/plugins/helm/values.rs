//! `values.yaml` under kubebuilder's keys, filled from the install file's manager; its
//! `values.schema.json`; and the merge that keeps a user's `values.yaml` on a re-run while
//! adding the keys it lacks.

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
        let arg = |flag: &str| arg(&args, flag);
        let (metrics_service, metrics_port, has_metrics_service) = metrics(install, &args);
        let (webhook_port, probe_port) = (webhook_port(&args, &container), probe_port(&args));
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
            metrics: has_metrics_service && metrics_port.is_some(),
            secure: arg("--metrics-secure") != Some("false"),
            webhook: serves_webhooks(install),
            cert_manager: install.objects.iter().any(|o| {
                str_at(o, &["apiVersion"]).is_some_and(|v| v.starts_with("cert-manager.io/"))
            }),
            metrics_port: metrics_port.unwrap_or(8443),
            webhook_port,
            probe_port,
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
                .filter(|a| !TEMPLATE_ARGS.contains(&a.split('=').next().unwrap_or_default()))
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

/// The suffix of the metrics Service, the port `--metrics-bind-address` names (`None` without
/// one, or for 0), and whether the install file has the Service.
fn metrics(install: &Install, args: &[String]) -> (String, Option<u16>, bool) {
    let service = install.suffix_of(
        "Service",
        "metrics-service",
        "controller-manager-metrics-service",
    );
    let has_service = install
        .of_kind("Service")
        .any(|s| install.suffix(fields::name(s)) == service);
    let port = port_of(arg(args, "--metrics-bind-address")).filter(|port| *port != 0);
    (service, port, has_service)
}

/// The value of `--flag=value` among the manager's `args`.
fn arg<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')))
}

/// The port of an address `host:port` (`:8443`).
fn port_of(address: Option<&str>) -> Option<u16> {
    address
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
}

/// The webhook server's port: where `--webhook-port` says (the container port only names it),
/// else the container port `webhook-server`, else 9443.
fn webhook_port(args: &[String], container: &Value) -> u16 {
    port_of(arg(args, "--webhook-port"))
        .or_else(|| container_port(container, "webhook-server"))
        .unwrap_or(9443)
}

/// The health probes' port, from `--health-probe-bind-address`; 8081 by default.
fn probe_port(args: &[String]) -> u16 {
    port_of(arg(args, "--health-probe-bind-address")).unwrap_or(8081)
}

/// What install.yaml sets on the manager that the template writes only from values: the
/// Deployment's own labels and annotations, the pod's, its pull secrets, priority class,
/// strategy, spread constraints, and the volumes and mounts but the certificates'.
fn manager_extras(
    deployment: &Value,
    pod: &Value,
    container: &Value,
) -> Vec<(&'static str, Value)> {
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
        ("extraVolumes", without_certificates(pod.get("volumes"))),
        (
            "extraVolumeMounts",
            without_certificates(container.get("volumeMounts")),
        ),
    ];
    extras
        .into_iter()
        .filter(|(_, value)| !is_empty(value))
        .collect()
}

/// The mapping `value` without `keys`.
fn without(value: Option<&Value>, keys: &[&str]) -> Value {
    let mut map = value
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    map.retain(|key, _| !key.as_str().is_some_and(|key| keys.contains(&key)));
    Value::Mapping(map)
}

/// The sequence `value` without the items named as the template's own volumes.
fn without_certificates(value: Option<&Value>) -> Value {
    let items = value
        .and_then(Value::as_sequence)
        .cloned()
        .unwrap_or_default();
    Value::Sequence(
        items
            .into_iter()
            .filter(|item| !TEMPLATE_VOLUMES.contains(&str_at(item, &["name"]).unwrap_or_default()))
            .collect(),
    )
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

/// A value under `manager:` as the values template writes it (`entry`): its key, and its YAML,
/// on the key's line when `inline`.
#[derive(serde::Serialize)]
struct Entry {
    key: &'static str,
    inline: bool,
    yaml: String,
}

impl Entry {
    fn of(key: &'static str, value: &Value) -> Self {
        let inline = match value {
            Value::Mapping(m) => m.is_empty(),
            Value::Sequence(s) => s.is_empty(),
            _ => true,
        };
        let yaml = crate::yaml::to_string(value).expect("a value serializes");
        Self {
            key,
            inline,
            yaml: yaml.trim_end().to_owned(),
        }
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

/// The generated `values.yaml` and `values.schema.json`, from the `helm-values` templates.
pub fn render(install: &Install, d: &Defaults) -> anyhow::Result<(String, String)> {
    let mut entries = vec![
        Entry::of("podSecurityContext", &d.pod_security_context),
        Entry::of("securityContext", &d.security_context),
        Entry::of("resources", &d.resources),
        Entry::of("affinity", &d.affinity),
        Entry::of("nodeSelector", &d.node_selector),
        Entry::of("tolerations", &d.tolerations),
    ];
    if let Some(grace) = d.termination_grace {
        entries.push(Entry::of(
            "terminationGracePeriodSeconds",
            &Value::Number(grace.into()),
        ));
    }
    entries.extend(
        d.manager_extras
            .iter()
            .map(|(key, value)| Entry::of(key, value)),
    );
    let mut context = tera::Context::new();
    context.insert("chart", &install.chart);
    context.insert("replicas", &d.replicas);
    context.insert("repository", &crate::yaml::scalar(&d.repository));
    context.insert("tag", &crate::yaml::scalar(&d.tag));
    context.insert("pull_policy", &d.pull_policy);
    context.insert(
        "args",
        &Entry::of(
            "args",
            &Value::Sequence(d.args.iter().cloned().map(Value::String).collect()),
        ),
    );
    context.insert("env", &Entry::of("env", &Value::Sequence(d.env.clone())));
    context.insert("probe_port", &d.probe_port);
    context.insert("entries", &entries);
    context.insert("also_read", &also_read(d));
    context.insert("namespaced", &d.namespaced);
    context.insert("metrics", &d.metrics);
    context.insert("metrics_port", &d.metrics_port);
    context.insert("secure", &d.secure);
    context.insert("webhook", &d.webhook);
    context.insert("webhook_port", &d.webhook_port);
    context.insert("cert_manager", &d.cert_manager);
    context.insert("prometheus", &d.prometheus);
    context.insert("network_policy", &d.network_policy);
    let rendered = crate::scaffold::render_set("helm-values", &context, &[], |_| {
        crate::scaffold::Policy::Regenerated
    })?;
    let file = |name: &str| {
        rendered
            .iter()
            .find(|file| file.path == std::path::Path::new(name))
            .map(|file| file.contents.clone())
            .expect("the helm-values set holds values.yaml and values.schema.json")
    };
    Ok((file("values.yaml"), file("values.schema.json")))
}

/// The comment that names the keys under `manager:` the template reads though the install
/// file leaves them unset, in lines of at most 92 characters, each after `  #`.
fn also_read(d: &Defaults) -> Vec<String> {
    let unset: Vec<&str> = EXTRA_KEYS
        .iter()
        .copied()
        .filter(|key| !d.manager_extras.iter().any(|(set, _)| set == key))
        .flat_map(|key| match key {
            "pod" => vec!["pod.labels", "pod.annotations"],
            key => vec![key],
        })
        .collect();
    if unset.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![String::from(" Also read when set:")];
    for (index, key) in unset.iter().enumerate() {
        let end = if index + 1 == unset.len() { '.' } else { ',' };
        let word = format!(" {key}{end}");
        let line = lines.last_mut().expect("a line");
        if "  #".len() + line.len() + word.len() > 92 {
            lines.push(word);
        } else {
            line.push_str(&word);
        }
    }
    lines
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
    /// The keys the template reads when set are listed in lines of at most 92 characters,
    /// those the install file sets left out.
    #[test]
    fn the_keys_read_when_set_are_listed_in_lines_of_92() {
        let install = crate::plugins::helm::op_install(crate::plugins::helm::OP_DEPLOYMENT);
        let mut d = Defaults::of(&install).unwrap();
        d.manager_extras.clear();
        let lines = also_read(&d);
        assert_eq!(
            lines,
            [
                " Also read when set: labels, annotations, pod.labels, pod.annotations, imagePullSecrets,",
                " priorityClassName, strategy, topologySpreadConstraints, extraVolumes, extraVolumeMounts.",
            ]
        );
        assert!(lines.iter().all(|line| "  #".len() + line.len() <= 92));
        d.manager_extras = EXTRA_KEYS
            .iter()
            .filter(|key| **key != "strategy")
            .map(|key| (*key, Value::Null))
            .collect();
        assert_eq!(also_read(&d), [" Also read when set: strategy."]);
        d.manager_extras.push(("strategy", Value::Null));
        assert!(also_read(&d).is_empty());
    }

    #[test]
    fn images_split_into_repository_and_tag() {
        for (image, want) in [
            ("controller:latest", ("controller", "latest")),
            ("localhost:5000/op:v1.2", ("localhost:5000/op", "v1.2")),
            ("localhost:5000/op", ("localhost:5000/op", "latest")),
            ("op@sha256:abc", ("op@sha256:abc", "latest")),
        ] {
            let (repository, tag) = split_image(image);
            assert_eq!((repository.as_str(), tag.as_str()), want);
        }
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
