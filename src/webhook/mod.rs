//! Webhook configurations from markers: `// +rsbuilder:webhook:path=...,mutating=true,...`
//! lines in the operator's sources become `config/webhook/manifests.yaml`, as controller-gen
//! writes it from `+kubebuilder:webhook` markers: a MutatingWebhookConfiguration and a
//! ValidatingWebhookConfiguration, their webhooks sorted by name.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::scaffold::Derived;
use crate::ui::UserError;

/// Where the webhook configurations are written.
pub const MANIFESTS_FILE: &str = "config/webhook/manifests.yaml";

/// Where the markers are.
const SOURCES: &str = "operator/src";

/// The marker prefix.
const PREFIX: &str = "// +rsbuilder:webhook:";

/// One webhook marker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marker {
    name: String,
    path: String,
    mutating: bool,
    failure_policy: String,
    match_policy: Option<String>,
    side_effects: String,
    timeout_seconds: Option<u32>,
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    versions: Vec<String>,
    admission_review_versions: Vec<String>,
    reinvocation_policy: Option<String>,
    namespace_selector: Option<Selector>,
    object_selector: Option<Selector>,
}

/// A label selector of a webhook (`namespaceSelector`, `objectSelector`), written in the marker
/// as requirements separated by `;`, in the words of `kubectl --selector`: `key=value`,
/// `key!=value`, `key in (a|b)`, `key notin (a|b)`, `key` and `!key` (`|` separates the values,
/// since `,` separates the marker's keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Selector {
    match_labels: BTreeMap<String, String>,
    /// `(key, operator, values)`, in the marker's order.
    match_expressions: Vec<(String, &'static str, Vec<String>)>,
}

/// `key=value;key!=value;...` as a selector; the problem, named, when it is not one.
fn selector(key: &str, value: &str) -> Result<Selector, String> {
    let mut selector = Selector::default();
    let syntax = "write requirements as `key=value`, `key!=value`, `key in (a|b)`, `key notin (a|b)`, `key` or `!key`, separated by `;`";
    for requirement in value.split(';').map(str::trim) {
        if requirement.is_empty() {
            return Err(format!("`{key}` has an empty requirement: {syntax}"));
        }
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|rest| rest.strip_suffix(')'))
                .filter(|inner| !inner.trim().is_empty())
                .ok_or_else(|| format!("`{key}`: `{requirement}` lists its values as `(a|b)`"))?;
            inner
                .split('|')
                .map(|value| label_value(key, value.trim()).map(str::to_owned))
                .collect()
        };
        let (label, operator, values) = if let Some((label, value)) = requirement.split_once("!=") {
            (
                label,
                "NotIn",
                vec![label_value(key, value.trim())?.to_owned()],
            )
        } else if let Some((label, value)) = requirement
            .split_once("==")
            .or_else(|| requirement.split_once('='))
        {
            (label, "=", vec![label_value(key, value.trim())?.to_owned()])
        } else if let Some((label, rest)) = requirement.split_once(char::is_whitespace) {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '(')
                .unwrap_or(rest.len());
            let (word, values) = rest.split_at(end);
            if word == "notin" {
                (label, "NotIn", set(values)?)
            } else if word == "in" {
                (label, "In", set(values)?)
            } else {
                return Err(format!(
                    "`{key}`: `{requirement}` is not a requirement: {syntax}"
                ));
            }
        } else if let Some(label) = requirement.strip_prefix('!') {
            (label, "DoesNotExist", Vec::new())
        } else {
            (requirement, "Exists", Vec::new())
        };
        let label = label_key(key, label.trim())?.to_owned();
        if operator == "=" {
            let value = values.into_iter().next().unwrap_or_default();
            if let Some(other) = selector.match_labels.insert(label.clone(), value.clone())
                && other != value
            {
                return Err(format!(
                    "`{key}` asks for `{label}` to be both `{other}` and `{value}`"
                ));
            }
        } else {
            selector.match_expressions.push((label, operator, values));
        }
    }
    Ok(selector)
}

/// A label key as Kubernetes takes it: a name of at most 63 characters, with an optional
/// DNS-1123 subdomain prefix (`app.kubernetes.io/name`).
fn label_key<'a>(key: &str, label: &'a str) -> Result<&'a str, String> {
    let (prefix, name) = match label.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, label),
    };
    let prefix_ok = prefix.is_none_or(crate::names::is_dns1123_subdomain);
    if prefix_ok && !name.is_empty() && is_label_value(name) {
        Ok(label)
    } else {
        Err(format!(
            "`{key}`: `{label}` is not a label key (a name of at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit, after an optional DNS subdomain and `/`)"
        ))
    }
}

/// A label value as Kubernetes takes it: empty, or at most 63 letters, digits, `-`, `_` and
/// `.`, starting and ending with a letter or digit.
fn label_value<'a>(key: &str, value: &'a str) -> Result<&'a str, String> {
    if is_label_value(value) {
        Ok(value)
    } else {
        Err(format!(
            "`{key}`: `{value}` is not a label value (at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)"
        ))
    }
}

fn is_label_value(value: &str) -> bool {
    let edge = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && edge(value.chars().next())
        && edge(value.chars().last())
}

/// Every webhook marker of `content`, the text of `path`. A malformed one is an error naming
/// the file and line.
pub fn markers(path: &Path, content: &str) -> Result<Vec<Marker>, UserError> {
    crate::scaffold::markers::read_source_markers(
        path,
        content,
        PREFIX,
        (
            "webhook",
            "write it as `// +rsbuilder:webhook:path=/validate-...,mutating=false,failurePolicy=fail,\
             sideEffects=None,groups=<group>,resources=<plural>,verbs=create;update,versions=v1,\
             name=<name>.kb.io,admissionReviewVersions=v1`",
        ),
        parse,
    )
}

/// API groups whose objects the API server never sends to admission webhooks, so that a
/// webhook cannot lock the cluster out of fixing its own webhook configurations.
const UNCALLED_GROUPS: &[&str] = &["admissionregistration.k8s.io"];

/// `items`, refused when one is empty (`versions=` or `versions=v1;`).
fn items(key: &str, items: Vec<String>) -> Result<Vec<String>, String> {
    if items.iter().any(String::is_empty) {
        return Err(format!("`{key}` has an empty item: list them as `a;b`"));
    }
    Ok(items)
}

/// A webhook path as the API server takes it: `/`, then segments that are each a DNS-1123
/// subdomain (lowercase letters, digits, `-` and `.`).
pub fn checked_path(path: &str) -> Result<String, String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("path `{path}` must start with `/`"));
    };
    if !rest.is_empty() {
        for segment in rest.split('/') {
            if !crate::names::is_dns1123_subdomain(segment) {
                return Err(format!(
                    "path `{path}`: the segment `{segment}` is not a DNS-1123 subdomain (lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit), which the API server requires"
                ));
            }
        }
    }
    Ok(path.to_owned())
}

fn parse(body: &str) -> Result<Marker, String> {
    let mut marker = Marker::default();
    let mut seen = std::collections::BTreeSet::new();
    for pair in body.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{}` is not `key=value`", pair.trim()))?;
        let (key, value) = (key.trim(), value.trim().trim_matches('"'));
        if !seen.insert(key) {
            return Err(format!("`{key}` is given twice"));
        }
        set(&mut marker, key, value)?;
    }
    check_complete(&marker, &seen)?;
    Ok(marker)
}

/// Sets the field of `marker` that `key` names to `value`, checked.
fn set(marker: &mut Marker, key: &str, value: &str) -> Result<(), String> {
    let one_of = |allowed: &[&str]| one_of(key, value, allowed);
    match key {
        "path" => marker.path = checked_path(value)?,
        "mutating" => {
            marker.mutating = value
                .parse()
                .map_err(|_| format!("`mutating={value}` must be true or false"))?;
        }
        "failurePolicy" => marker.failure_policy = one_of(&["Fail", "Ignore"])?,
        "matchPolicy" => marker.match_policy = Some(one_of(&["Exact", "Equivalent"])?),
        "sideEffects" => {
            marker.side_effects = one_of(&["None", "NoneOnDryRun", "Some", "Unknown"])?;
        }
        "timeoutSeconds" => {
            let seconds: u32 = value
                .parse()
                .ok()
                .filter(|s| (1..=30).contains(s))
                .ok_or_else(|| format!("`timeoutSeconds={value}` must be 1 to 30"))?;
            marker.timeout_seconds = Some(seconds);
        }
        "reinvocationPolicy" => {
            marker.reinvocation_policy = Some(one_of(&["Never", "IfNeeded"])?);
        }
        "groups" => marker.groups = groups(value)?,
        "resources" => marker.resources = items(key, list(value))?,
        "verbs" => marker.verbs = verbs(value)?,
        "versions" => marker.versions = items(key, list(value))?,
        "name" => marker.name = value.to_owned(),
        "admissionReviewVersions" => {
            marker.admission_review_versions = items(key, list(value))?;
            if let Some(version) = marker
                .admission_review_versions
                .iter()
                .find(|v| !["v1", "v1beta1"].contains(&v.as_str()))
            {
                return Err(format!(
                    "admissionReviewVersions `{version}` does not exist: use v1 (or v1beta1)"
                ));
            }
        }
        "namespaceSelector" => marker.namespace_selector = Some(selector(key, value)?),
        "objectSelector" => marker.object_selector = Some(selector(key, value)?),
        "webhookVersions" if value == "v1" => {}
        "webhookVersions" => return Err(format!("`webhookVersions={value}`: only v1 exists")),
        other => {
            return Err(format!(
                "unknown key `{other}` (known: path, mutating, failurePolicy, matchPolicy, sideEffects, \
                 timeoutSeconds, reinvocationPolicy, groups, resources, verbs, versions, name, \
                 admissionReviewVersions, namespaceSelector, objectSelector)"
            ));
        }
    }
    Ok(())
}

/// The items of a `;`-separated value, each unquoted.
fn list(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(|item| item.trim().trim_matches('"').to_owned())
        .collect()
}

/// `value` spelled as the one of `allowed` it matches, whatever its case.
fn one_of(key: &str, value: &str, allowed: &[&str]) -> Result<String, String> {
    allowed
        .iter()
        .find(|candidate| candidate.eq_ignore_ascii_case(value))
        .map(|candidate| (*candidate).to_owned())
        .ok_or_else(|| {
            format!(
                "`{key}={value}` must be one of {}",
                allowed.join(", ").to_lowercase()
            )
        })
}

/// `groups=`: API groups, `core` as the empty group; none that the API server never admits.
fn groups(value: &str) -> Result<Vec<String>, String> {
    let groups: Vec<String> = list(value)
        .into_iter()
        .map(|g| crate::names::api_group(&g).to_owned())
        .collect();
    if let Some(group) = groups
        .iter()
        .find(|g| UNCALLED_GROUPS.contains(&g.as_str()))
    {
        return Err(format!(
            "the API server calls no admission webhook for objects of `{group}`: no webhook can admit them"
        ));
    }
    Ok(groups)
}

/// `verbs=`: admission operations, upper-cased; `*` alone.
fn verbs(value: &str) -> Result<Vec<String>, String> {
    let verbs = list(value)
        .into_iter()
        .map(|verb| {
            let upper = verb.to_uppercase();
            if ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"].contains(&upper.as_str()) {
                Ok(upper)
            } else {
                Err(format!(
                    "unknown verb `{verb}`: use create, update, delete or connect"
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if verbs.len() > 1 && verbs.iter().any(|verb| verb == "*") {
        return Err("`*` in `verbs` stands for every verb: give it alone".into());
    }
    Ok(verbs)
}

/// Refuses a marker without a key the API server needs, or whose keys disagree.
fn check_complete(marker: &Marker, seen: &std::collections::BTreeSet<&str>) -> Result<(), String> {
    for (key, missing) in [
        ("path", marker.path.is_empty()),
        ("mutating", !seen.contains("mutating")),
        ("failurePolicy", marker.failure_policy.is_empty()),
        ("sideEffects", marker.side_effects.is_empty()),
        ("groups", !seen.contains("groups")),
        ("resources", marker.resources.is_empty()),
        ("verbs", marker.verbs.is_empty()),
        ("versions", marker.versions.is_empty()),
        ("name", marker.name.is_empty()),
        (
            "admissionReviewVersions",
            marker.admission_review_versions.is_empty(),
        ),
    ] {
        if missing {
            return Err(format!("`{key}` is missing"));
        }
    }
    if marker.name.split('.').count() < 3 {
        return Err(format!(
            "name `{}` must be fully qualified, with at least three segments (`vkind-v1.kb.io`)",
            marker.name
        ));
    }
    if !marker.mutating && marker.reinvocation_policy.is_some() {
        return Err("`reinvocationPolicy` is for mutating webhooks only".into());
    }
    Ok(())
}

impl Marker {
    /// The webhook's name (`name=`).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Every webhook marker under `operator/src` of `sources` (relative path → text).
pub fn markers_from_sources<'a>(
    sources: impl IntoIterator<Item = (&'a Path, &'a str)>,
) -> Result<Vec<Marker>, UserError> {
    let mut found = Vec::new();
    for (path, text) in sources {
        if path.starts_with(SOURCES) && path.extension().is_some_and(|e| e == "rs") {
            found.extend(markers(path, text)?);
        }
    }
    Ok(found)
}

/// What `config/webhook/manifests.yaml` says when no marker asks for a webhook configuration
/// (a project with conversion webhooks only).
const NO_WEBHOOKS: &str = "# rsbuilder generate writes the webhook configurations here from the\n# `+rsbuilder:webhook` markers of operator/src; it found none.\n";

/// `config/webhook/manifests.yaml`, derived from the webhook markers of `operator/src` as the
/// plan leaves it: the sources it keeps, the files it writes and the code it inserts.
pub fn derived_manifests() -> Derived {
    Derived::new(MANIFESTS_FILE, |tree| {
        let sources = crate::tree::read_all(tree, &[SOURCES], "rs")?;
        let markers = markers_from_sources(
            sources
                .iter()
                .map(|(path, text)| (path.as_path(), text.as_str())),
        )?;
        Ok(manifests(&markers)?)
    })
}

/// `config/webhook/manifests.yaml` for `markers`. Two markers with one name are an error.
pub fn manifests(markers: &[Marker]) -> Result<String, UserError> {
    if markers.is_empty() {
        return Ok(NO_WEBHOOKS.to_owned());
    }
    let mut by_name: BTreeMap<&str, &Marker> = BTreeMap::new();
    for marker in markers {
        if let Some(other) = by_name.insert(&marker.name, marker)
            && other != marker
        {
            return Err(
                UserError::new(format!("two webhook markers are named `{}`", marker.name))
                    .help("give each webhook its own `name=`"),
            );
        }
    }
    let mut out = String::new();
    for (mutating, kind, name) in [
        (
            true,
            "MutatingWebhookConfiguration",
            "mutating-webhook-configuration",
        ),
        (
            false,
            "ValidatingWebhookConfiguration",
            "validating-webhook-configuration",
        ),
    ] {
        let webhooks: Vec<&Marker> = by_name
            .values()
            .copied()
            .filter(|m| m.mutating == mutating)
            .collect();
        if webhooks.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "---\napiVersion: admissionregistration.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\nwebhooks:\n"
        );
        for webhook in webhooks {
            write_webhook(&mut out, webhook);
        }
    }
    Ok(out)
}

fn write_webhook(out: &mut String, m: &Marker) {
    let list = |out: &mut String, indent: &str, items: &[String]| {
        for item in items {
            let _ = writeln!(out, "{indent}- {}", crate::yaml::scalar(item));
        }
    };
    out.push_str("- admissionReviewVersions:\n");
    list(out, "  ", &m.admission_review_versions);
    let _ = write!(
        out,
        "  clientConfig:\n    service:\n      name: webhook-service\n      namespace: system\n      path: {}\n",
        crate::yaml::scalar(&m.path)
    );
    let _ = writeln!(out, "  failurePolicy: {}", m.failure_policy);
    if let Some(policy) = &m.match_policy {
        let _ = writeln!(out, "  matchPolicy: {policy}");
    }
    let _ = writeln!(out, "  name: {}", crate::yaml::scalar(&m.name));
    for (key, selector) in [
        ("namespaceSelector", &m.namespace_selector),
        ("objectSelector", &m.object_selector),
    ] {
        if let Some(selector) = selector {
            write_selector(out, key, selector);
        }
    }
    if let Some(policy) = &m.reinvocation_policy {
        let _ = writeln!(out, "  reinvocationPolicy: {policy}");
    }
    out.push_str("  rules:\n  - apiGroups:\n");
    list(out, "    ", &m.groups);
    out.push_str("    apiVersions:\n");
    list(out, "    ", &m.versions);
    out.push_str("    operations:\n");
    list(out, "    ", &m.verbs);
    out.push_str("    resources:\n");
    list(out, "    ", &m.resources);
    let _ = writeln!(out, "  sideEffects: {}", m.side_effects);
    if let Some(seconds) = m.timeout_seconds {
        let _ = writeln!(out, "  timeoutSeconds: {seconds}");
    }
}

/// `key:` and its label selector, at the depth of a webhook's fields.
fn write_selector(out: &mut String, key: &str, selector: &Selector) {
    let _ = writeln!(out, "  {key}:");
    if !selector.match_expressions.is_empty() {
        out.push_str("    matchExpressions:\n");
        for (label, operator, values) in &selector.match_expressions {
            let _ = writeln!(out, "    - key: {}", crate::yaml::scalar(label));
            let _ = writeln!(out, "      operator: {operator}");
            if !values.is_empty() {
                out.push_str("      values:\n");
                for value in values {
                    let _ = writeln!(out, "      - {}", crate::yaml::scalar(value));
                }
            }
        }
    }
    if !selector.match_labels.is_empty() {
        out.push_str("    matchLabels:\n");
        for (label, value) in &selector.match_labels {
            let _ = writeln!(
                out,
                "      {}: {}",
                crate::yaml::scalar(label),
                crate::yaml::scalar(value)
            );
        }
    }
}

#[cfg(test)]
mod tests;
