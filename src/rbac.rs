//! RBAC from markers: `// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;list`
//! lines in the operator's sources become `config/rbac/role.yaml`, merged and sorted as
//! controller-gen does: one rule per API group and verb set, resources together.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::project::Project;
use crate::scaffold::Derived;
use crate::tree::Tree;
use crate::ui::UserError;

/// Where the manager's role is written.
pub const ROLE_FILE: &str = "config/rbac/role.yaml";

/// Where the markers are: the operator's sources, and the runtime's (the manager's own
/// permissions, such as events).
const SOURCES: &[&str] = &["operator/src", "runtime/src"];

/// The marker prefix.
const PREFIX: &str = "// +rsbuilder:rbac:";

/// Verbs Kubernetes authorizes on resources, and the HTTP verbs of non-resource URLs.
const VERBS: &[&str] = &[
    "*",
    "approve",
    "attest",
    "bind",
    "create",
    "delete",
    "deletecollection",
    "escalate",
    "get",
    "head",
    "impersonate",
    "list",
    "options",
    "patch",
    "post",
    "put",
    "sign",
    "update",
    "use",
    "watch",
];

/// One RBAC marker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marker {
    groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    verbs: Vec<String>,
    urls: Vec<String>,
    namespace: Option<String>,
}

/// Every RBAC marker of `content`, the text of `path`. A malformed one is an error naming the
/// file and line.
pub fn markers(path: &Path, content: &str) -> Result<Vec<Marker>, UserError> {
    crate::scaffold::markers::read_source_markers(
        path,
        content,
        PREFIX,
        (
            "RBAC",
            "write it as `// +rsbuilder:rbac:groups=<group>,resources=<plural>,verbs=get;list;watch` \
             (keys: groups, resources, resourceNames, verbs, urls, namespace)",
        ),
        parse,
    )
}

fn parse(body: &str) -> Result<Marker, String> {
    let mut marker = Marker::default();
    let mut seen = BTreeSet::new();
    for pair in body.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{}` is not `key=value`", pair.trim()))?;
        let (key, value) = (key.trim(), value.trim());
        if !seen.insert(key) {
            return Err(format!("`{key}` is given twice"));
        }
        let list = || -> Vec<String> {
            value
                .split(';')
                .map(|item| item.trim().trim_matches('"').to_owned())
                .collect()
        };
        match key {
            "groups" => {
                marker.groups = list()
                    .into_iter()
                    .map(|group| crate::names::api_group(&group).to_owned())
                    .collect();
            }
            "resources" => marker.resources = list(),
            "resourceNames" => marker.resource_names = list(),
            "verbs" => marker.verbs = list(),
            "urls" => marker.urls = list(),
            "namespace" if crate::names::is_dns1123_label(value) => {
                marker.namespace = Some(value.to_owned());
            }
            "namespace" => {
                return Err(format!(
                    "namespace `{value}` is not a lowercase RFC 1123 label"
                ));
            }
            other => {
                return Err(format!(
                    "unknown key `{other}` (known: groups, resources, resourceNames, verbs, urls, namespace)"
                ));
            }
        }
    }
    if marker.verbs.is_empty() || marker.verbs.iter().any(String::is_empty) {
        return Err("`verbs` is missing or empty".into());
    }
    if let Some(verb) = marker
        .verbs
        .iter()
        .find(|verb| !VERBS.contains(&verb.as_str()))
    {
        return Err(format!("unknown verb `{verb}`"));
    }
    let has_resources = !marker.resources.is_empty();
    if has_resources != marker.urls.is_empty() {
        return Err("give either `groups` and `resources`, or `urls`".into());
    }
    if has_resources && marker.groups.is_empty() {
        return Err("`resources` needs `groups` (`groups=core` for the core API)".into());
    }
    if marker
        .resources
        .iter()
        .chain(&marker.urls)
        .any(String::is_empty)
    {
        return Err("an empty resource or URL".into());
    }
    Ok(marker)
}

/// Every `.rs` file under `operator/src` and `runtime/src` of `tree`, by relative path. A
/// missing folder has none. A project that takes the runtime crate from crates.io, a path or
/// git has the runtime's markers all the same: those of the runtime this rsbuilder embeds
/// (`edit --runtime` and `upgrade` keep PROJECT's runtime at this rsbuilder's version).
pub fn read_sources(
    tree: &dyn Tree,
    project: &Project,
) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let mut sources = crate::tree::read_all(tree, SOURCES, "rs")?;
    sources.extend(runtime_sources(project));
    Ok(sources)
}

/// The runtime's sources, by their path in a vendored project, when `project` depends on the
/// crate instead.
pub fn runtime_sources(project: &Project) -> BTreeMap<PathBuf, String> {
    let external = project
        .runtime
        .as_ref()
        .is_some_and(|r| !r.form.is_vendored());
    if !external {
        return BTreeMap::new();
    }
    crate::runtime::files()
        .into_iter()
        .filter(|(path, _)| path.starts_with("runtime/src"))
        .collect()
}

/// `config/rbac/role.yaml`, derived from the markers of the sources as the plan leaves them.
pub fn derived_role(project: &Project) -> Derived {
    let project = project.clone();
    Derived::new(ROLE_FILE, move |tree| {
        let sources = read_sources(tree, &project)?;
        Ok(role_from_sources(
            sources
                .iter()
                .map(|(path, text)| (path.as_path(), text.as_str())),
            project.namespaced,
        )?)
    })
}

/// `config/rbac/role.yaml` for the markers of `sources` (relative path → text); files outside
/// `operator/src` and `runtime/src` are ignored.
pub fn role_from_sources<'a>(
    sources: impl IntoIterator<Item = (&'a Path, &'a str)>,
    namespaced_project: bool,
) -> Result<String, UserError> {
    let mut found = Vec::new();
    for (path, text) in sources {
        if SOURCES.iter().any(|dir| path.starts_with(dir))
            && path.extension().is_some_and(|e| e == "rs")
        {
            found.extend(markers(path, text)?);
        }
    }
    Ok(role_yaml(&found, namespaced_project))
}

/// A merged rule.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rule {
    group: Option<String>,
    resources: BTreeSet<String>,
    resource_names: BTreeSet<String>,
    urls: BTreeSet<String>,
    verbs: BTreeSet<String>,
}

/// `config/rbac/role.yaml` for `markers`: a ClusterRole `manager-role` for markers without a
/// namespace (a Role in the manager's namespace when the project is namespaced), and a Role per
/// namespace that markers name.
pub fn role_yaml(markers: &[Marker], namespaced_project: bool) -> String {
    let default_namespace = namespaced_project.then(|| "system".to_owned());
    let mut by_namespace: BTreeMap<Option<String>, Vec<&Marker>> = BTreeMap::new();
    for marker in markers {
        let namespace = marker
            .namespace
            .clone()
            .or_else(|| default_namespace.clone());
        by_namespace.entry(namespace).or_default().push(marker);
    }
    if by_namespace.is_empty() {
        by_namespace.insert(default_namespace, Vec::new());
    }
    let mut out = String::new();
    for (namespace, markers) in by_namespace {
        out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\n");
        match &namespace {
            None => out.push_str("kind: ClusterRole\nmetadata:\n  name: manager-role\n"),
            Some(namespace) => {
                let _ = write!(
                    out,
                    "kind: Role\nmetadata:\n  name: manager-role\n  namespace: {namespace}\n"
                );
            }
        }
        let rules = merge(&markers);
        if rules.is_empty() {
            out.push_str("rules: []\n");
            continue;
        }
        out.push_str("rules:\n");
        for rule in rules {
            let mut first = true;
            let mut list =
                |out: &mut String, key: &str, items: &mut dyn Iterator<Item = &String>| {
                    out.push_str(if first { "- " } else { "  " });
                    first = false;
                    let _ = writeln!(out, "{key}:");
                    for item in items {
                        let _ = writeln!(out, "  - {}", crate::yaml::scalar(item));
                    }
                };
            if let Some(group) = &rule.group {
                list(&mut out, "apiGroups", &mut std::iter::once(group));
            }
            if !rule.urls.is_empty() {
                list(&mut out, "nonResourceURLs", &mut rule.urls.iter());
            }
            if !rule.resource_names.is_empty() {
                list(&mut out, "resourceNames", &mut rule.resource_names.iter());
            }
            if !rule.resources.is_empty() {
                list(&mut out, "resources", &mut rule.resources.iter());
            }
            list(&mut out, "verbs", &mut rule.verbs.iter());
        }
    }
    out
}

/// Verbs merge per group, resource and resource names; then resources with the same group,
/// names and verbs share one rule.
fn merge(markers: &[&Marker]) -> Vec<Rule> {
    type Key = (String, String, BTreeSet<String>);
    let mut verbs: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
    let mut url_verbs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for marker in markers {
        let names: BTreeSet<String> = marker.resource_names.iter().cloned().collect();
        for group in &marker.groups {
            for resource in &marker.resources {
                verbs
                    .entry((group.clone(), resource.clone(), names.clone()))
                    .or_default()
                    .extend(marker.verbs.iter().cloned());
            }
        }
        for url in &marker.urls {
            url_verbs
                .entry(url.clone())
                .or_default()
                .extend(marker.verbs.iter().cloned());
        }
    }
    let mut rules: BTreeMap<(String, BTreeSet<String>, BTreeSet<String>), BTreeSet<String>> =
        BTreeMap::new();
    for ((group, resource, names), verbs) in verbs {
        rules
            .entry((group, names, verbs))
            .or_default()
            .insert(resource);
    }
    let mut merged: Vec<Rule> = rules
        .into_iter()
        .map(|((group, resource_names, verbs), resources)| Rule {
            group: Some(group),
            resources,
            resource_names,
            urls: BTreeSet::new(),
            verbs,
        })
        .collect();
    merged.sort_by(|a, b| {
        (&a.group, &a.resources, &a.resource_names).cmp(&(
            &b.group,
            &b.resources,
            &b.resource_names,
        ))
    });
    let mut by_verbs: BTreeMap<BTreeSet<String>, BTreeSet<String>> = BTreeMap::new();
    for (url, verbs) in url_verbs {
        by_verbs.entry(verbs).or_default().insert(url);
    }
    let mut url_rules: Vec<Rule> = by_verbs
        .into_iter()
        .map(|(verbs, urls)| Rule {
            group: None,
            resources: BTreeSet::new(),
            resource_names: BTreeSet::new(),
            urls,
            verbs,
        })
        .collect();
    url_rules.sort_by(|a, b| a.urls.cmp(&b.urls));
    merged.extend(url_rules);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(lines: &str) -> Vec<Marker> {
        markers(Path::new("operator/src/x.rs"), lines).unwrap()
    }

    #[test]
    fn markers_merge_like_controller_gen() {
        let found = parse_all(
            "// +rsbuilder:rbac:groups=appotp.learn.com,resources=appotps,verbs=get;list;watch;create;update;patch;delete\n\
             // +rsbuilder:rbac:groups=appotp.learn.com,resources=appotps/status,verbs=get;update;patch\n\
             // +rsbuilder:rbac:groups=appotp.learn.com,resources=appotps/finalizers,verbs=update\n\
             // +rsbuilder:rbac:groups=appotp.learn.com,resources=widgets,verbs=get;list;watch;create;update;patch;delete\n\
             // +rsbuilder:rbac:groups=appotp.learn.com,resources=widgets/finalizers,verbs=update\n\
             // +rsbuilder:rbac:groups=core,resources=configmaps,verbs=get\n\
             // +rsbuilder:rbac:groups=core,resources=configmaps,verbs=list;get\n\
             // +rsbuilder:rbac:urls=/metrics,verbs=get\n",
        );
        assert_eq!(
            role_yaml(&found, false),
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: manager-role\nrules:\n\
             - apiGroups:\n  - \"\"\n  resources:\n  - configmaps\n  verbs:\n  - get\n  - list\n\
             - apiGroups:\n  - appotp.learn.com\n  resources:\n  - appotps\n  - widgets\n  verbs:\n  - create\n  - delete\n  - get\n  - list\n  - patch\n  - update\n  - watch\n\
             - apiGroups:\n  - appotp.learn.com\n  resources:\n  - appotps/finalizers\n  - widgets/finalizers\n  verbs:\n  - update\n\
             - apiGroups:\n  - appotp.learn.com\n  resources:\n  - appotps/status\n  verbs:\n  - get\n  - patch\n  - update\n\
             - nonResourceURLs:\n  - /metrics\n  verbs:\n  - get\n"
        );
    }

    #[test]
    fn namespaces_get_roles() {
        let found = parse_all(
            "  // +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get\n\
             // +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get,namespace=infra\n",
        );
        let yaml = role_yaml(&found, true);
        assert!(
            yaml.contains("kind: Role\nmetadata:\n  name: manager-role\n  namespace: infra\n"),
            "{yaml}"
        );
        assert!(
            yaml.contains("kind: Role\nmetadata:\n  name: manager-role\n  namespace: system\n"),
            "{yaml}"
        );
        assert!(!yaml.contains("ClusterRole"), "{yaml}");
        assert!(role_yaml(&found, false).contains("kind: ClusterRole"));
        assert!(role_yaml(&[], false).ends_with("rules: []\n"));
        let spaced = parse_all("// +rsbuilder:rbac:groups=apps, resources=true,verbs=get\n");
        assert!(role_yaml(&spaced, false).contains("  - 'true'\n"));
    }

    #[test]
    fn every_value_reads_back_from_the_role() {
        let markers = parse_all(
            "// +rsbuilder:rbac:groups=on.example.com,resources=no;y,resourceNames=say\"hi\";a: b;#x,verbs=get\n",
        );
        let role: serde_yaml::Value = serde_yaml::from_str(&role_yaml(&markers, false)).unwrap();
        let rule = &role["rules"][0];
        assert_eq!(rule["apiGroups"][0].as_str(), Some("on.example.com"));
        let strings =
            |key: &str| -> Vec<String> { serde_yaml::from_value(rule[key].clone()).unwrap() };
        assert_eq!(strings("resources"), ["no", "y"]);
        let names = strings("resourceNames");
        assert_eq!(names, ["#x", "a: b", "say\"hi"]);
        // YAML 1.1 would read a plain `no` or `y` as a boolean.
        let text = role_yaml(&markers, false);
        assert!(text.contains("  - 'no'\n  - 'y'\n"), "{text}");
    }

    #[test]
    fn malformed_markers_name_file_and_line() {
        for (line, problem) in [
            (
                "groups=apps,resources=deployments,verbs=get;fly",
                "unknown verb `fly`",
            ),
            (
                "groups=apps,resources=deployments,verb=get",
                "unknown key `verb`",
            ),
            ("groups=apps,resources=deployments", "`verbs` is missing"),
            (
                "resources=deployments,verbs=get",
                "`resources` needs `groups`",
            ),
            ("groups=apps,verbs=get", "give either"),
            (
                "groups=apps,resources=deployments,verbs=get,verbs=list",
                "`verbs` is given twice",
            ),
            ("groups", "`groups` is not `key=value`"),
            (
                "groups=apps,resources=x,verbs=get,namespace=",
                "namespace `` is not",
            ),
        ] {
            let text = format!("fn x() {{}}\n// +rsbuilder:rbac:{line}\n");
            let error = markers(Path::new("operator/src/x.rs"), &text).unwrap_err();
            let message = error.to_string();
            assert!(
                message.starts_with("invalid RBAC marker at operator/src/x.rs:2: "),
                "{message}"
            );
            assert!(message.contains(problem), "{line}: {message}");
        }
    }
}
