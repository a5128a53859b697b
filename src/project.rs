//! The PROJECT file: kubebuilder's v3 format and key order, written by rsbuilder and read back
//! on every command. This module is the only one that reads or writes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

use crate::scaffold::{PlannedFile, Policy};
use crate::ui::UserError;

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

/// The version of the runtime crate a project has, and the checksum of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRecord {
    /// The runtime's version.
    pub version: String,
    /// `sha256:` and the SHA-256 of `runtime/CHECKSUMS`.
    pub checksum: String,
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
    let path = root.join(FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("failed to read `{}`", path.display()))?;
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
    let controller_names = stored
        .resources
        .iter()
        .flat_map(|r| &r.controllers)
        .map(|c| crate::names::validate_controller_name(&c.name).err());
    let helm_paths = stored.plugins.get(HELM).into_iter().flat_map(|p| {
        [
            ("manifests", &p.manifests, crate::helm::DEFAULT_MANIFESTS),
            ("output", &p.output, crate::helm::DEFAULT_OUTPUT),
        ]
        .into_iter()
        .map(|(key, value, example)| {
            let value = value.as_deref()?;
            let key = format!("the {HELM} plugin's `{key}:`");
            crate::helm::check_path(&key, value, example).err()
        })
    });
    let checks = [
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
    let plugin = stored.plugins.get(LAYOUT);
    Ok(Project {
        autoupdate: stored.plugins.contains_key(AUTOUPDATE),
        cli_version: stored.cli_version,
        grafana: stored.plugins.contains_key(GRAFANA),
        helm: stored.plugins.get(HELM).map(|p| HelmRecord {
            manifests: p
                .manifests
                .clone()
                .unwrap_or_else(|| crate::helm::DEFAULT_MANIFESTS.to_owned()),
            output: p
                .output
                .clone()
                .unwrap_or_else(|| crate::helm::DEFAULT_OUTPUT.to_owned()),
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
            Some(RuntimeRecord {
                version: p.runtime_version.clone()?,
                checksum: p.runtime_checksum.clone()?,
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
            let _ = writeln!(
                out,
                "  {HELM}:\n    manifests: {}\n    output: {}",
                crate::yaml::scalar(&helm.manifests),
                crate::yaml::scalar(&helm.output)
            );
        }
        let _ = writeln!(
            out,
            "  {LAYOUT}:\n    k8sOpenapiVersion: {}\n    kubeVersion: {}",
            crate::yaml::scalar(&self.k8s_openapi_version),
            crate::yaml::scalar(&self.kube_version)
        );
        if let Some(runtime) = &self.runtime {
            let _ = writeln!(
                out,
                "    runtimeChecksum: {}\n    runtimeVersion: {}",
                crate::yaml::scalar(&runtime.checksum),
                crate::yaml::scalar(&runtime.version)
            );
        }
        let _ = writeln!(
            out,
            "projectName: {}",
            crate::yaml::scalar(&self.project_name)
        );
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
}

/// One entry of the deploy-image plugin's `resources`.
fn write_deploy_image(out: &mut String, image: &DeployImage) {
    let mut entry = ListEntry::new("    - ", "      ");
    if !image.domain.is_empty() {
        entry.key(
            out,
            &format!("domain: {}\n", crate::yaml::scalar(&image.domain)),
        );
    }
    if !image.group.is_empty() {
        entry.key(
            out,
            &format!("group: {}\n", crate::yaml::scalar(&image.group)),
        );
    }
    entry.key(
        out,
        &format!("kind: {}\n", crate::yaml::scalar(&image.kind)),
    );
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
    if !resource.domain.is_empty() {
        entry.key(
            out,
            &format!("domain: {}\n", crate::yaml::scalar(&resource.domain)),
        );
    }
    if !resource.group.is_empty() {
        entry.key(
            out,
            &format!("group: {}\n", crate::yaml::scalar(&resource.group)),
        );
    }
    entry.key(
        out,
        &format!("kind: {}\n", crate::yaml::scalar(&resource.kind)),
    );
    if let Some(plural) = &resource.plural {
        entry.key(out, &format!("plural: {}\n", crate::yaml::scalar(plural)));
    }
    entry.key(
        out,
        &format!("version: {}\n", crate::yaml::scalar(&resource.version)),
    );
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
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_nearest_directory_with_a_project_file() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("operator/src");
        std::fs::create_dir_all(&nested).unwrap();
        let error = find_root(&nested).unwrap_err();
        assert!(
            error.to_string().starts_with("no PROJECT file found in `"),
            "{error}"
        );
        std::fs::write(dir.path().join(FILE), "").unwrap();
        assert_eq!(find_root(&nested).unwrap(), dir.path());
        assert_eq!(find_root(dir.path()).unwrap(), dir.path());
        // A directory named PROJECT is not the file.
        std::fs::create_dir_all(nested.join(FILE)).unwrap();
        assert_eq!(find_root(&nested).unwrap(), dir.path());
    }

    /// What PROJECT records is checked when it is read, as on the command line: the
    /// rsbuilder that `alpha update` installs is a version, not more arguments, and the chart's
    /// paths stay inside the project and out of the folders others own.
    #[test]
    fn recorded_versions_and_chart_paths_are_checked_when_read() {
        let head =
            "domain: learn.com\nlayout:\n- rsbuilder.io/v1\nprojectName: p\nversion: \"3\"\n";
        let helm = |key: &str, value: &str| {
            format!("cliVersion: 0.1.0\n{head}plugins:\n  {HELM}:\n    {key}: {value}\n")
        };
        let refused = [
            (
                format!("cliVersion: 0.0.9 --path ../elsewhere\n{head}"),
                "cliVersion `0.0.9 --path ../elsewhere`: must be a version such as",
            ),
            (
                helm("manifests", "../install.yaml"),
                "`manifests:` `../install.yaml`: must be a path inside the project",
            ),
            (
                helm("manifests", "/etc/install.yaml"),
                "`manifests:` `/etc/install.yaml`: must be a path inside the project",
            ),
            (
                helm("output", "runtime"),
                "`output:` `runtime`: must be outside `runtime/`, `.git/`, `target/` and `config/`",
            ),
            (
                helm("output", ".git/hooks"),
                "`output:` `.git/hooks`: must be outside",
            ),
        ];
        for (text, error) in refused {
            let refused = parse(&text).unwrap_err().to_string();
            assert!(
                refused.starts_with("PROJECT is not valid: ") && refused.contains(error),
                "{refused}"
            );
        }
        let fine = parse(&helm("output", "deploy/helm")).unwrap();
        assert_eq!(fine.helm.unwrap().output, "deploy/helm");
    }

    #[test]
    fn a_core_kind_is_kubernetes_own_with_both_layouts_and_a_project_kind_has_one() {
        let text = "cliVersion: 0.1.0\ndomain: learn.com\nlayout:\n- rsbuilder.io/v1\nprojectName: p\nversion: \"3\"\n\
resources:\n- core: true\n  group: apps\n  kind: Deployment\n  version: v1\n  \
webhooks:\n    defaulting: true\n- api:\n    crdVersion: v1\n  domain: learn.com\n  group: ship\n  \
kind: Frigate\n  version: v1\n";
        let project = parse(text).unwrap();
        let [deployment, frigate] = project.resources.as_slice() else {
            panic!("{:?}", project.resources);
        };
        assert_eq!(
            deployment.webhooks.as_ref().unwrap().webhook_version,
            "v1",
            "webhookVersion defaults to v1"
        );
        assert_eq!(deployment.builtin().map(|b| b.kind), Some("Deployment"));
        let layouts = deployment.layouts("learn.com");
        assert_eq!(layouts.len(), 2, "today's layout and the earlier one");
        assert_eq!(layouts[0].kind, "Deployment");
        assert_ne!(layouts[0].group_module, layouts[1].group_module);
        assert_eq!(
            deployment.names("learn.com").group_module,
            layouts[0].group_module
        );
        assert!(frigate.builtin().is_none());
        let layouts = frigate.layouts("learn.com");
        assert_eq!(layouts.len(), 1);
        assert_eq!(layouts[0].crd_name, "frigates.ship.learn.com");
        assert_eq!(frigate.group_with_domain(), "ship.learn.com");
        assert_eq!(deployment.group_with_domain(), "apps");
        let no_group = Resource {
            group: String::new(),
            ..frigate.clone()
        };
        assert_eq!(no_group.group_with_domain(), "learn.com");
        assert!(frigate.is("ship", "v1", "Frigate"));
        for (group, version, kind) in [
            ("sail", "v1", "Frigate"),
            ("ship", "v2", "Frigate"),
            ("ship", "v1", "Sloop"),
        ] {
            assert!(
                !frigate.is(group, version, kind),
                "{group}/{version} {kind}"
            );
        }
    }

    fn project() -> Project {
        Project {
            autoupdate: false,
            cli_version: "0.1.0".into(),
            grafana: false,
            helm: None,
            domain: "learn.com".into(),
            multigroup: false,
            namespaced: false,
            project_name: "otp-operator".into(),
            repo: None,
            kube_version: "5.0.0".into(),
            k8s_openapi_version: "0.29.0".into(),
            runtime: None,
            resources: Vec::new(),
            deploy_images: Vec::new(),
        }
    }

    #[test]
    fn resources_are_written_as_kubebuilder_writes_them_and_read_back() {
        let mut project = project();
        project.resources = vec![
            Resource {
                api: Some(ResourceApi {
                    crd_version: "v1".into(),
                    namespaced: true,
                    ssa: false,
                }),
                controller: true,
                controllers: Vec::new(),
                core: false,
                domain: "learn.com".into(),
                group: "appotp".into(),
                kind: "AppOTP".into(),
                plural: None,
                version: "v1".into(),
                webhooks: Some(ResourceWebhooks {
                    conversion: true,
                    defaulting: true,
                    defaulting_path: None,
                    spoke: vec!["v2".into()],
                    validation: true,
                    validation_path: Some("/custom-validate-appotp".into()),
                    webhook_version: "v1".into(),
                }),
                extra: Default::default(),
            },
            Resource {
                api: Some(ResourceApi {
                    crd_version: "v1".into(),
                    namespaced: false,
                    ssa: false,
                }),
                controller: false,
                controllers: Vec::new(),
                core: false,
                domain: "learn.com".into(),
                group: "fleet".into(),
                kind: "Person".into(),
                plural: Some("persons".into()),
                version: "v1beta1".into(),
                webhooks: None,
                extra: Default::default(),
            },
        ];
        let yaml = project.to_yaml();
        assert!(
            yaml.contains(
                "resources:\n- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n  domain: learn.com\n  group: appotp\n  kind: AppOTP\n  version: v1\n  webhooks:\n    conversion: true\n    defaulting: true\n    spoke:\n    - v2\n    validation: true\n    validationPath: /custom-validate-appotp\n    webhookVersion: v1\n- api:\n    crdVersion: v1\n  domain: learn.com\n  group: fleet\n  kind: Person\n  plural: persons\n  version: v1beta1\nversion: \"3\"\n"
            ),
            "{yaml}"
        );
        assert_eq!(parse(&yaml).unwrap(), project);
    }

    #[test]
    fn kubernetes_kinds_and_images_are_recorded_as_kubebuilder_records_them() {
        let mut project = project();
        project.resources = vec![
            Resource {
                api: None,
                controller: true,
                controllers: Vec::new(),
                core: true,
                domain: String::new(),
                group: "apps".into(),
                kind: "Deployment".into(),
                plural: None,
                version: "v1".into(),
                webhooks: None,
                extra: Default::default(),
            },
            Resource {
                api: None,
                controller: true,
                controllers: Vec::new(),
                core: true,
                domain: "k8s.io".into(),
                group: "networking".into(),
                kind: "Ingress".into(),
                plural: None,
                version: "v1".into(),
                webhooks: None,
                extra: Default::default(),
            },
        ];
        project.deploy_images = vec![DeployImage {
            domain: "learn.com".into(),
            group: "example.com".into(),
            kind: "Memcached".into(),
            options: DeployImageOptions {
                container_command: Some("memcached,--memory-limit=64,-o,modern,-v".into()),
                container_port: Some("11211".into()),
                image: "memcached:1.6.26-alpine3.19".into(),
                run_as_user: Some("1001".into()),
            },
            version: "v1alpha1".into(),
        }];
        let yaml = project.to_yaml();
        assert!(
            yaml.contains(
                "plugins:\n  deploy-image.go.kubebuilder.io/v1-alpha:\n    resources:\n    - domain: learn.com\n      group: example.com\n      kind: Memcached\n      options:\n        containerCommand: \"memcached,--memory-limit=64,-o,modern,-v\"\n        containerPort: \"11211\"\n        image: \"memcached:1.6.26-alpine3.19\"\n        runAsUser: \"1001\"\n      version: v1alpha1\n  rsbuilder.io/v1:\n"
            ),
            "{yaml}"
        );
        assert!(
            yaml.contains(
                "resources:\n- controller: true\n  core: true\n  group: apps\n  kind: Deployment\n  version: v1\n- controller: true\n  core: true\n  domain: k8s.io\n  group: networking\n"
            ),
            "{yaml}"
        );
        assert_eq!(parse(&yaml).unwrap(), project);
    }

    #[test]
    fn the_runtime_is_recorded_under_the_plugin_and_read_back() {
        let mut project = project();
        project.runtime = Some(RuntimeRecord {
            version: "0.1.0".into(),
            checksum: format!("sha256:{}", "ab".repeat(32)),
        });
        let yaml = project.to_yaml();
        assert!(
            yaml.contains(&format!(
                "    kubeVersion: 5.0.0\n    runtimeChecksum: sha256:{}\n    runtimeVersion: 0.1.0\nprojectName:",
                "ab".repeat(32)
            )),
            "{yaml}"
        );
        assert_eq!(parse(&yaml).unwrap(), project);
    }

    #[test]
    fn hand_edited_values_and_unknown_keys_are_refused() {
        let good = project().to_yaml();
        for (edit, message) in [
            (
                good.replace("domain: learn.com", "domain: Learn.COM"),
                "PROJECT is not valid: invalid domain `Learn.COM`",
            ),
            (
                good.replace("projectName: otp-operator", "projectName: My_Operator"),
                "PROJECT is not valid: invalid project name `My_Operator`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- controllers:\n  - name: Bad_Name\n  kind: Foo\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: invalid controller name `Bad_Name`",
            ),
            (
                good.replace("version: \"3\"", "version: \"3\"\nmultiGroup: true"),
                "PROJECT is not valid: unknown field `multiGroup`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: app_otp\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/v1 app_otp: invalid kind `app_otp`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: AppOTP\n  version: one\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/one AppOTP: invalid version `one`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: Apps_X\n  kind: AppOTP\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource Apps_X/v1 AppOTP: ",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: AppOTP\n  version: v1\n- group: apps\n  kind: AppOTP\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/v1 AppOTP is listed twice",
            ),
        ] {
            let error = parse(&edit).unwrap_err();
            assert!(error.to_string().starts_with(message), "{error}");
            let help = error
                .downcast_ref::<UserError>()
                .and_then(UserError::help_text);
            assert!(help.is_some(), "{error}");
        }
    }

    /// Keys of a resource that rsbuilder does not know (kubebuilder's `path`, a later
    /// rsbuilder's) survive a write.
    #[test]
    fn unknown_keys_of_a_resource_round_trip() {
        let text = project().to_yaml().replace(
            "version: \"3\"",
            "resources:\n- group: apps\n  kind: AppOTP\n  version: v1\n  path: example.com/api/v1\n  external: true\n  future:\n    nested:\n    - 'on'\nversion: \"3\"",
        );
        let project = parse(&text).unwrap();
        let extra = &project.resources[0].extra;
        assert_eq!(
            extra.keys().collect::<Vec<_>>(),
            ["external", "future", "path"]
        );
        let written = project.to_yaml();
        assert!(
            written.contains("  version: v1\n  external: true\n  future:\n    nested:\n    - on\n  path: example.com/api/v1\n"),
            "{written}"
        );
        assert_eq!(parse(&written).unwrap(), project);
    }

    #[test]
    fn a_foreign_or_broken_project_file_is_refused() {
        let kubebuilder = "domain: x.io\nlayout:\n- go.kubebuilder.io/v4\nprojectName: p\nversion: \"3\"\ncliVersion: 4.0.0\n";
        let error = parse(kubebuilder).unwrap_err();
        assert!(error.to_string().contains("layout"), "{error}");
        assert!(parse("domain: [").is_err());
    }

    #[test]
    fn written_in_kubebuilder_key_order() {
        assert_eq!(
            project().to_yaml(),
            "# Code generated by rsbuilder. DO NOT EDIT.\n\
             # This file records how the project was scaffolded; rsbuilder reads it on every command.\n\
             cliVersion: 0.1.0\n\
             domain: learn.com\n\
             layout:\n\
             - rsbuilder.io/v1\n\
             plugins:\n  rsbuilder.io/v1:\n    k8sOpenapiVersion: 0.29.0\n    kubeVersion: 5.0.0\n\
             projectName: otp-operator\n\
             version: \"3\"\n"
        );
    }

    /// Every string PROJECT keeps without checking it reads back as it was written, whatever it
    /// holds, at whatever depth it sits, in a key rsbuilder does not know too.
    #[test]
    fn any_string_round_trips() {
        for tricky in crate::yaml::TRICKY {
            let value = || (*tricky).to_owned();
            let mut project = project();
            project.repo = Some(value());
            project.kube_version = value();
            project.k8s_openapi_version = value();
            project.runtime = Some(RuntimeRecord {
                version: value(),
                checksum: value(),
            });
            project.resources = vec![Resource {
                api: Some(ResourceApi {
                    crd_version: value(),
                    namespaced: true,
                    ssa: false,
                }),
                controller: true,
                controllers: Vec::new(),
                // Kind, group and version are checked when PROJECT is read; what `core`
                // resources record is not under the domain.
                core: false,
                domain: "learn.com".into(),
                group: "apps".into(),
                kind: "AppOTP".into(),
                plural: Some(value()),
                version: "v1".into(),
                webhooks: Some(ResourceWebhooks {
                    conversion: true,
                    defaulting: true,
                    defaulting_path: Some(value()),
                    spoke: vec![value(), value()],
                    validation: true,
                    validation_path: Some(value()),
                    webhook_version: value(),
                }),
                extra: BTreeMap::from([(
                    "unknownKey".to_owned(),
                    serde_yaml::Value::String(value()),
                )]),
            }];
            project.deploy_images = vec![DeployImage {
                domain: format!("{tricky}d"),
                group: format!("{tricky}g"),
                kind: format!("{tricky}k"),
                options: DeployImageOptions {
                    container_command: Some(value()),
                    container_port: Some(value()),
                    image: value(),
                    run_as_user: Some(value()),
                },
                version: format!("{tricky}v"),
            }];
            let yaml = project.to_yaml();
            let read = parse(&yaml).unwrap_or_else(|error| panic!("{tricky:?}: {error}\n{yaml}"));
            assert_eq!(read, project, "{tricky:?} in\n{yaml}");
        }
    }

    #[test]
    fn values_that_need_quotes_get_them() {
        let mut project = project();
        project.namespaced = true;
        project.repo = Some("https://github.com/learn/otp-operator: #1".into());
        let yaml = project.to_yaml();
        assert!(yaml.contains("namespaced: true\n"), "{yaml}");
        let parsed: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(
            parsed["repo"].as_str(),
            Some("https://github.com/learn/otp-operator: #1")
        );
        assert_eq!(parsed["version"].as_str(), Some("3"));
        for tricky in ["true", "1.0", "null", "~", "yes", "0x1f"] {
            let quoted = crate::yaml::scalar(tricky);
            let parsed: serde_yaml::Value = serde_yaml::from_str(&quoted).unwrap();
            assert_eq!(parsed.as_str(), Some(tricky), "{quoted}");
        }
    }
}
