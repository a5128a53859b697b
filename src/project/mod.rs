//! The PROJECT file: kubebuilder's v3 format and key order, written by rsbuilder and read back
//! on every command. This module is the only one that reads or writes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

use crate::scaffold::{PlannedFile, Policy};
use crate::ui::UserError;

mod runtime_record;

pub use runtime_record::RuntimeRecord;

/// The layout key rsbuilder writes under `layout:`.
pub const LAYOUT: &str = "rsbuilder.io/v1";
/// The plugin key under which kubebuilder records `edit --plugins=autoupdate/v1-alpha`.
pub const AUTOUPDATE: &str = "autoupdate.kubebuilder.io/v1-alpha";
/// The plugin key under which kubebuilder records `edit --plugins=grafana/v1-alpha`.
pub const GRAFANA: &str = "grafana.kubebuilder.io/v1-alpha";
/// The plugin key under which kubebuilder records `edit --plugins=helm/v2-alpha`.
pub const HELM: &str = "helm.kubebuilder.io/v2-alpha";
/// The plugin key under which kubebuilder records `create api --image`.
pub const DEPLOY_IMAGE: &str = "deploy-image.go.kubebuilder.io/v1-alpha";
/// The file name, at the project root.
pub const FILE: &str = "PROJECT";

/// What PROJECT records about a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// Whether `.github/workflows/auto_update.yml` runs `alpha update` on a schedule.
    pub autoupdate: bool,
    /// The rsbuilder version that scaffolded the project.
    pub cli_version: String,
    /// Whether `grafana/` holds dashboards of the manager's metrics.
    pub grafana: bool,
    /// The Helm chart's source and place, when `edit --plugins=helm/v2-alpha` made one.
    pub helm: Option<HelmRecord>,
    /// The domain of the API groups.
    pub domain: String,
    /// `--multigroup`: recorded as kubebuilder records it. Every rsbuilder project holds any
    /// number of groups, each in a module of its own, so it changes no path.
    pub multigroup: bool,
    /// Whether the manager is limited to its own namespace.
    pub namespaced: bool,
    /// The project name.
    pub project_name: String,
    /// The repository URL, if one was given.
    pub repo: Option<String>,
    /// The kube version the project was generated for.
    pub kube_version: String,
    /// The k8s-openapi version the project was generated for.
    pub k8s_openapi_version: String,
    /// The runtime crate in `runtime/`, when the project has one.
    pub runtime: Option<RuntimeRecord>,
    /// The APIs, in the order they were created.
    pub resources: Vec<Resource>,
    /// The kinds `create api --image` scaffolded, with their options.
    pub deploy_images: Vec<DeployImage>,
}

/// A kind that runs an image (`create api --image`), as kubebuilder's deploy-image plugin
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployImage {
    /// The domain of the group.
    #[serde(default)]
    pub domain: String,
    /// The group, without the domain.
    #[serde(default)]
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The flags it was scaffolded with.
    pub options: DeployImageOptions,
    /// The version.
    pub version: String,
}

/// The flags of `create api --image`, as strings, as kubebuilder records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployImageOptions {
    /// `--image-container-command`.
    #[serde(default)]
    pub container_command: Option<String>,
    /// `--image-container-port`.
    #[serde(default)]
    pub container_port: Option<String>,
    /// `--image`.
    pub image: String,
    /// `--run-as-user`.
    #[serde(default)]
    pub run_as_user: Option<String>,
}

/// One group/version/kind of the project.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Present when rsbuilder scaffolded the kind's types.
    #[serde(default)]
    pub api: Option<ResourceApi>,
    /// Whether the kind has its own, unnamed controller.
    #[serde(default)]
    pub controller: bool,
    /// The controllers named with `--controller-name`, in the order they were created.
    #[serde(default)]
    pub controllers: Vec<NamedController>,
    /// Whether the kind is one of Kubernetes' own (`apps/v1 Deployment`): a controller without
    /// types.
    #[serde(default)]
    pub core: bool,
    /// The domain of the group; empty for Kubernetes' own groups that have none (`apps`).
    #[serde(default)]
    pub domain: String,
    /// The group, without the domain; empty for the domain's own group.
    #[serde(default)]
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The plural, when it differs from the computed one.
    #[serde(default)]
    pub plural: Option<String>,
    /// The version.
    pub version: String,
    /// The webhooks of this version, when `create webhook` made any.
    #[serde(default)]
    pub webhooks: Option<ResourceWebhooks>,
    /// Keys rsbuilder does not know (kubebuilder's `path`, a later rsbuilder's), written back
    /// as they were read, after the others.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_yaml::Value>,
}

/// A controller of a kind named with `--controller-name`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedController {
    /// A DNS-1035 label.
    pub name: String,
}

/// The webhooks of one group/version/kind, as kubebuilder records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceWebhooks {
    /// A conversion webhook, with this version as the hub.
    #[serde(default)]
    pub conversion: bool,
    /// A defaulting (mutating) webhook.
    #[serde(default)]
    pub defaulting: bool,
    /// The defaulting webhook's path, when not the computed one.
    #[serde(default)]
    pub defaulting_path: Option<String>,
    /// The versions converted to and from this one.
    #[serde(default)]
    pub spoke: Vec<String>,
    /// A validating webhook.
    #[serde(default)]
    pub validation: bool,
    /// The validating webhook's path, when not the computed one.
    #[serde(default)]
    pub validation_path: Option<String>,
    /// Always `v1`.
    #[serde(default = "webhook_version")]
    pub webhook_version: String,
}

fn webhook_version() -> String {
    "v1".to_owned()
}

/// How a kind's types were scaffolded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceApi {
    /// Always `v1`.
    pub crd_version: String,
    /// Whether the kind is namespaced.
    #[serde(default)]
    pub namespaced: bool,
    /// Whether the kind's types are their own apply configurations (`--ssa`).
    #[serde(default)]
    pub ssa: bool,
}

impl Resource {
    /// The names of the resource in a project of `domain`: Kubernetes' own kind (a `core`
    /// resource that `names::find_builtin` knows), with its `k8s_<group>` modules, or the
    /// project's.
    pub fn names(&self, domain: &str) -> crate::names::ResourceNames {
        self.layouts(domain).swap_remove(0)
    }

    /// [`Resource::names`], and for Kubernetes' own kind also the module layout of an earlier
    /// rsbuilder (`webhooks/<group>/`), which a project made by it still has.
    pub fn layouts(&self, domain: &str) -> Vec<crate::names::ResourceNames> {
        match self.builtin() {
            Some(kind) => vec![
                crate::names::builtin_names(kind),
                crate::names::builtin_names_unprefixed(kind),
            ],
            None => vec![crate::names::ResourceNames::new(
                &self.group,
                &self.version,
                &self.kind,
                self.plural.as_deref(),
                domain,
            )],
        }
    }

    /// Kubernetes' own kind, for a `core` resource that `names::find_builtin` knows.
    pub fn builtin(&self) -> Option<&'static crate::names::builtin::Builtin> {
        if !self.core {
            return None;
        }
        crate::names::find_builtin(&self.group_with_domain(), &self.version, &self.kind)
    }

    /// The resource's domain, or `domain` (the project's) when it records none.
    fn domain_or(&self, domain: &str) -> String {
        if self.domain.is_empty() {
            domain.to_owned()
        } else {
            self.domain.clone()
        }
    }

    /// The group with its domain when it has one: `networking.k8s.io` for Kubernetes' own
    /// `networking`, `appotp.learn.com` for a project's `appotp`.
    pub fn group_with_domain(&self) -> String {
        match (self.group.is_empty(), self.domain.is_empty()) {
            (_, true) => self.group.clone(),
            (true, false) => self.domain.clone(),
            (false, false) => format!("{}.{}", self.group, self.domain),
        }
    }

    /// The kind, as messages name it.
    pub fn gvk(&self) -> crate::names::Gvk {
        crate::names::Gvk::new(&self.group_with_domain(), &self.version, &self.kind)
    }

    /// Whether this is `group`/`version`/`kind`.
    pub fn is(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group == group && self.version == version && self.kind == kind
    }
}

/// PROJECT as it is on disk. A key rsbuilder does not know is an error, not silence.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Stored {
    cli_version: String,
    domain: String,
    #[serde(default)]
    layout: Vec<String>,
    #[serde(default)]
    multigroup: bool,
    #[serde(default)]
    namespaced: bool,
    #[serde(default)]
    plugins: BTreeMap<String, StoredPlugin>,
    project_name: String,
    #[serde(default)]
    repo: Option<String>,
    #[serde(default)]
    resources: Vec<Resource>,
    version: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StoredPlugin {
    #[serde(default)]
    kube_version: Option<String>,
    #[serde(default)]
    k8s_openapi_version: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    runtime_checksum: Option<String>,
    #[serde(default)]
    runtime_version: Option<String>,
    #[serde(default)]
    resources: Vec<DeployImage>,
    #[serde(default)]
    manifests: Option<String>,
    #[serde(default)]
    output: Option<String>,
}

/// What PROJECT records of the Helm chart, as kubebuilder records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmRecord {
    /// The kustomize output the chart is made from.
    pub manifests: String,
    /// The directory that holds `chart/`.
    pub output: String,
}

/// The Helm plugin's `--manifests` default: what `make build-installer` writes.
pub const DEFAULT_MANIFESTS: &str = "dist/install.yaml";
/// Its `--output-dir` default: the chart goes to `<output-dir>/chart`.
pub const DEFAULT_OUTPUT: &str = "dist";

/// The folders of a project that others own: the runtime `upgrade` replaces, git's, cargo's,
/// and the kustomize sources the chart is made from.
const OWNED_BY_OTHERS: [&str; 4] = ["runtime", ".git", "target", "config"];

/// Checks a path given to the plugin, or recorded in PROJECT: relative, inside the project,
/// outside the folders of [`OWNED_BY_OTHERS`], and plain enough for the Makefile and the
/// workflow that name it.
pub fn check_path(flag: &str, value: &str, example: &str) -> Result<(), UserError> {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    let path = Path::new(value);
    let inside = path.is_relative()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    let owned = path
        .components()
        .next()
        .is_some_and(|first| OWNED_BY_OTHERS.iter().any(|o| first.as_os_str() == *o));
    if plain && inside && !owned {
        return Ok(());
    }
    let rule = if !plain {
        "letters, digits, `.`, `_`, `-` and `/` only"
    } else if !inside {
        "a path inside the project, relative to its root, without `..` or `.`"
    } else {
        "outside `runtime/`, `.git/`, `target/` and `config/`, which rsbuilder, git, cargo and kustomize own"
    };
    Err(UserError::new(format!(
        "{flag} `{}`: must be {rule}",
        crate::ui::shown(value)
    ))
    .help(format!("pass a path such as {flag} {example}")))
}

/// The directory holding PROJECT: `start` or the nearest of its parents.
pub fn find_root(start: &Path) -> Result<PathBuf, UserError> {
    start
        .ancestors()
        .find(|dir| dir.join(FILE).is_file())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            UserError::new(format!("no PROJECT file found in `{}`", start.display()))
                .help("run `rsbuilder init --domain <domain>` first")
        })
}

/// Reads and checks `root/PROJECT`.
pub fn load(root: &Path) -> anyhow::Result<Project> {
    use crate::tree::Tree as _;
    let text = crate::tree::OnDisk(root)
        .read(Path::new(FILE))?
        .with_context(|| {
            format!(
                "failed to read `{}`: it does not exist",
                root.join(FILE).display()
            )
        })?;
    parse(&text)
}

/// The first resource whose kind, version or group does not pass the checks of `create api`,
/// or that is listed twice.
/// `cliVersion` names the rsbuilder that `alpha update` installs and runs: a version such as
/// `0.1.0`, nothing else.
fn validate_cli_version(version: &str) -> Result<(), UserError> {
    if semver::Version::parse(version).is_ok() {
        return Ok(());
    }
    Err(UserError::new(format!(
        "cliVersion `{}`: must be a version such as {}",
        crate::ui::shown(version),
        crate::versions::RSBUILDER
    )))
}

fn check_resources(resources: &[Resource], domain: &str) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    for resource in resources {
        let named = format!(
            "resource {}/{} {}",
            resource.group, resource.version, resource.kind
        );
        let checks = [
            crate::names::validate_kind(&resource.kind).err(),
            crate::names::validate_version(&resource.version).err(),
            // Kubernetes' own groups (`apps`, `networking.k8s.io`) are not under the domain.
            (!resource.core)
                .then(|| {
                    crate::names::validate_group(&resource.group, &resource.domain_or(domain)).err()
                })
                .flatten(),
        ];
        if let Some(error) = checks.into_iter().flatten().next() {
            return Some(format!("{named}: {error}"));
        }
        if !seen.insert((
            &resource.group,
            &resource.domain,
            &resource.version,
            &resource.kind,
        )) {
            return Some(format!("{named} is listed twice"));
        }
    }
    None
}

/// Checks the values of PROJECT that reach names and paths: the domain, the project's name,
/// `cliVersion`, the controllers' names and the Helm chart's paths.
fn check_values(stored: &Stored) -> anyhow::Result<()> {
    let controller_names = stored
        .resources
        .iter()
        .flat_map(|r| &r.controllers)
        .map(|c| crate::names::validate_controller_name(&c.name).err());
    let helm_paths = stored.plugins.get(HELM).into_iter().flat_map(|p| {
        [
            ("manifests", &p.manifests, DEFAULT_MANIFESTS),
            ("output", &p.output, DEFAULT_OUTPUT),
        ]
        .into_iter()
        .map(|(key, value, example)| {
            let value = value.as_deref()?;
            let key = format!("the {HELM} plugin's `{key}:`");
            check_path(&key, value, example).err()
        })
    });
    let runtime = stored
        .plugins
        .get(LAYOUT)
        .and_then(|p| p.runtime.as_deref());
    let checks = [
        runtime.and_then(|form| crate::runtime::Form::parse(form).err()),
        crate::names::validate_domain(&stored.domain).err(),
        crate::names::validate_project_name(&stored.project_name, false).err(),
        validate_cli_version(&stored.cli_version).err(),
    ]
    .into_iter()
    .chain(controller_names)
    .chain(helm_paths);
    if let Some(error) = checks.flatten().next() {
        return Err(UserError::new(format!("PROJECT is not valid: {error}"))
            .help("correct the value in PROJECT, or restore the file from version control")
            .into());
    }
    Ok(())
}

fn parse(text: &str) -> anyhow::Result<Project> {
    let stored: Stored = serde_yaml::from_str(text).map_err(|error| {
        UserError::new(format!("PROJECT is not valid: {error}"))
            .help("restore it from version control; rsbuilder reads it on every command")
    })?;
    if stored.version != "3" || !stored.layout.iter().any(|layout| layout == LAYOUT) {
        return Err(UserError::new(format!(
            "PROJECT has version `{}` and layout {:?}; rsbuilder reads version `3` with layout `{LAYOUT}`",
            stored.version, stored.layout
        ))
        .help("this project was not scaffolded by rsbuilder")
        .into());
    }
    // A hand-edited value would reach generated code and file names: check it again.
    if let Some(error) = check_resources(&stored.resources, &stored.domain) {
        return Err(UserError::new(format!("PROJECT is not valid: {error}"))
            .help("correct the resource in PROJECT, or restore the file from version control")
            .into());
    }
    check_values(&stored)?;
    let plugin = stored.plugins.get(LAYOUT);
    Ok(Project {
        autoupdate: stored.plugins.contains_key(AUTOUPDATE),
        cli_version: stored.cli_version,
        grafana: stored.plugins.contains_key(GRAFANA),
        helm: stored.plugins.get(HELM).map(|p| HelmRecord {
            manifests: p
                .manifests
                .clone()
                .unwrap_or_else(|| DEFAULT_MANIFESTS.to_owned()),
            output: p
                .output
                .clone()
                .unwrap_or_else(|| DEFAULT_OUTPUT.to_owned()),
        }),
        domain: stored.domain,
        multigroup: stored.multigroup,
        namespaced: stored.namespaced,
        project_name: stored.project_name,
        repo: stored.repo,
        kube_version: plugin
            .and_then(|p| p.kube_version.clone())
            .unwrap_or_else(|| crate::versions::KUBE.to_owned()),
        k8s_openapi_version: plugin
            .and_then(|p| p.k8s_openapi_version.clone())
            .unwrap_or_else(|| crate::versions::K8S_OPENAPI.to_owned()),
        runtime: plugin.and_then(|p| {
            let form = match &p.runtime {
                Some(text) => crate::runtime::Form::parse(text).ok()?,
                None => crate::runtime::Form::Vendored,
            };
            // The vendored form is told from an edited copy by its checksum.
            let checksum = p.runtime_checksum.clone();
            if form.is_vendored() && checksum.is_none() {
                return None;
            }
            Some(RuntimeRecord {
                version: p.runtime_version.clone()?,
                checksum: checksum.filter(|_| form.is_vendored()),
                form,
            })
        }),
        deploy_images: stored
            .plugins
            .get(DEPLOY_IMAGE)
            .map(|p| p.resources.clone())
            .unwrap_or_default(),
        resources: stored.resources,
    })
}

impl Project {
    /// Another version of `group`'s `kind` than `version` that converts through a webhook:
    /// the hub of the kind's conversion.
    pub fn conversion_hub(&self, group: &str, kind: &str, version: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| {
            r.group == group
                && r.kind == kind
                && r.version != version
                && r.webhooks.as_ref().is_some_and(|w| w.conversion)
        })
    }

    /// PROJECT as the command leaves it: regenerated whatever it held, and written last
    /// (`apply` orders it after every other file).
    pub fn planned(&self) -> PlannedFile {
        PlannedFile {
            path: FILE.into(),
            contents: self.to_yaml(),
            policy: Policy::Regenerated,
        }
    }

    /// The file's contents: keys sorted as kubebuilder sorts them, defaults omitted.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        out.push_str("# Code generated by rsbuilder. DO NOT EDIT.\n");
        out.push_str(
            "# This file records how the project was scaffolded; rsbuilder reads it on every command.\n",
        );
        let _ = writeln!(
            out,
            "cliVersion: {}",
            crate::yaml::scalar(&self.cli_version)
        );
        let _ = writeln!(out, "domain: {}", crate::yaml::scalar(&self.domain));
        let _ = writeln!(out, "layout:\n- {LAYOUT}");
        if self.multigroup {
            out.push_str("multigroup: true\n");
        }
        if self.namespaced {
            out.push_str("namespaced: true\n");
        }
        out.push_str("plugins:\n");
        if self.autoupdate {
            let _ = writeln!(out, "  {AUTOUPDATE}: {{}}");
        }
        if !self.deploy_images.is_empty() {
            let _ = writeln!(out, "  {DEPLOY_IMAGE}:\n    resources:");
            for image in &self.deploy_images {
                write_deploy_image(&mut out, image);
            }
        }
        if self.grafana {
            let _ = writeln!(out, "  {GRAFANA}: {{}}");
        }
        if let Some(helm) = &self.helm {
            let _ = writeln!(out, "  {HELM}:");
            scalars(
                &mut out,
                "    ",
                &[("manifests", &helm.manifests), ("output", &helm.output)],
            );
        }
        let _ = writeln!(out, "  {LAYOUT}:");
        scalars(
            &mut out,
            "    ",
            &[
                ("k8sOpenapiVersion", &self.k8s_openapi_version),
                ("kubeVersion", &self.kube_version),
            ],
        );
        if let Some(runtime) = &self.runtime {
            if !runtime.form.is_vendored() {
                scalars(&mut out, "    ", &[("runtime", &runtime.form.to_string())]);
            }
            if let Some(checksum) = &runtime.checksum {
                scalars(&mut out, "    ", &[("runtimeChecksum", checksum)]);
            }
            scalars(&mut out, "    ", &[("runtimeVersion", &runtime.version)]);
        }
        scalars(&mut out, "", &[("projectName", &self.project_name)]);
        if let Some(repo) = &self.repo {
            let _ = writeln!(out, "repo: {}", crate::yaml::scalar(repo));
        }
        if !self.resources.is_empty() {
            out.push_str("resources:\n");
        }
        for resource in &self.resources {
            write_resource(&mut out, resource);
        }
        out.push_str("version: \"3\"\n");
        out
    }
}

/// `key: value` lines at `indent`, each value written as a YAML scalar.
fn scalars(out: &mut String, indent: &str, pairs: &[(&str, &str)]) {
    for (key, value) in pairs {
        let _ = writeln!(out, "{indent}{key}: {}", crate::yaml::scalar(value));
    }
}

/// The keys of one entry of a YAML list, the first after the list's `- `: kubebuilder writes
/// PROJECT's keys in this order, so it is written by hand rather than through serde.
struct ListEntry {
    first: &'static str,
    rest: &'static str,
    started: bool,
}

impl ListEntry {
    fn new(first: &'static str, rest: &'static str) -> Self {
        Self {
            first,
            rest,
            started: false,
        }
    }

    fn key(&mut self, out: &mut String, text: &str) {
        out.push_str(if self.started { self.rest } else { self.first });
        out.push_str(text);
        self.started = true;
    }

    /// `key: value`, the value written as a YAML scalar.
    fn scalar(&mut self, out: &mut String, key: &str, value: &str) {
        self.key(out, &format!("{key}: {}\n", crate::yaml::scalar(value)));
    }

    /// A kind's `domain` and `group` (each when set) and `kind`.
    fn group_kind(&mut self, out: &mut String, domain: &str, group: &str, kind: &str) {
        for (key, value) in [("domain", domain), ("group", group)] {
            if !value.is_empty() {
                self.scalar(out, key, value);
            }
        }
        self.scalar(out, "kind", kind);
    }
}

/// One entry of the deploy-image plugin's `resources`.
fn write_deploy_image(out: &mut String, image: &DeployImage) {
    let mut entry = ListEntry::new("    - ", "      ");
    entry.group_kind(out, &image.domain, &image.group, &image.kind);
    entry.key(out, "options:\n");
    let options = &image.options;
    for (name, value) in [
        ("containerCommand", options.container_command.as_ref()),
        ("containerPort", options.container_port.as_ref()),
        ("image", Some(&options.image)),
        ("runAsUser", options.run_as_user.as_ref()),
    ] {
        if let Some(value) = value {
            let _ = writeln!(out, "        {name}: {}", quoted(value));
        }
    }
    let _ = writeln!(
        out,
        "      version: {}",
        crate::yaml::scalar(&image.version)
    );
}

/// One entry of `resources`.
fn write_resource(out: &mut String, resource: &Resource) {
    let mut entry = ListEntry::new("- ", "  ");
    if let Some(api) = &resource.api {
        entry.key(out, "api:\n");
        let _ = writeln!(
            out,
            "    crdVersion: {}",
            crate::yaml::scalar(&api.crd_version)
        );
        if api.namespaced {
            out.push_str("    namespaced: true\n");
        }
        if api.ssa {
            out.push_str("    ssa: true\n");
        }
    }
    if resource.controller {
        entry.key(out, "controller: true\n");
    }
    if !resource.controllers.is_empty() {
        entry.key(out, "controllers:\n");
        for controller in &resource.controllers {
            let _ = writeln!(out, "  - name: {}", crate::yaml::scalar(&controller.name));
        }
    }
    if resource.core {
        entry.key(out, "core: true\n");
    }
    entry.group_kind(out, &resource.domain, &resource.group, &resource.kind);
    if let Some(plural) = &resource.plural {
        entry.scalar(out, "plural", plural);
    }
    entry.scalar(out, "version", &resource.version);
    if let Some(webhooks) = &resource.webhooks {
        write_webhooks(out, webhooks);
    }
    for (name, value) in &resource.extra {
        let entry = BTreeMap::from([(name, value)]);
        let text = serde_yaml::to_string(&entry).unwrap_or_default();
        for line in text.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
}

/// A resource's `webhooks`.
fn write_webhooks(out: &mut String, webhooks: &ResourceWebhooks) {
    out.push_str("  webhooks:\n");
    if webhooks.conversion {
        out.push_str("    conversion: true\n");
    }
    if webhooks.defaulting {
        out.push_str("    defaulting: true\n");
    }
    if let Some(path) = &webhooks.defaulting_path {
        let _ = writeln!(out, "    defaultingPath: {}", crate::yaml::scalar(path));
    }
    if !webhooks.spoke.is_empty() {
        out.push_str("    spoke:\n");
        for version in &webhooks.spoke {
            let _ = writeln!(out, "    - {}", crate::yaml::scalar(version));
        }
    }
    if webhooks.validation {
        out.push_str("    validation: true\n");
    }
    if let Some(path) = &webhooks.validation_path {
        let _ = writeln!(out, "    validationPath: {}", crate::yaml::scalar(path));
    }
    let _ = writeln!(
        out,
        "    webhookVersion: {}",
        crate::yaml::scalar(&webhooks.webhook_version)
    );
}

/// A YAML scalar, always double-quoted: kubebuilder quotes the deploy-image options, which hold
/// ports, user IDs and commands that would otherwise read as numbers or lists.
fn quoted(value: &str) -> String {
    crate::yaml::double_quoted(value)
}

#[cfg(test)]
mod tests;
