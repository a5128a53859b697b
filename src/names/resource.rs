//! The names of a resource: every module, file and Kubernetes name derived from a group,
//! version and kind.

use heck::ToSnakeCase;
use serde::Serialize;

use super::*;

/// A kind as Kubernetes names it in messages: its API group (with the domain; `core` for the
/// core group), its version and its kind. Shown as Kubernetes' `GroupVersionKind` prints
/// itself: `example.com/v1, Kind=Application`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gvk {
    /// The API group, as [`group_shown`] writes it.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
}

impl Gvk {
    /// The kind `kind` of `version` in the API group `api_group` (empty for the core group).
    pub fn new(api_group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group_shown(api_group).to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// One of Kubernetes' own kinds.
    pub fn builtin(kind: &builtin::Builtin) -> Self {
        Self::new(kind.group, kind.version, kind.kind)
    }

    /// The kind in every version: `example.com Kind=Application`.
    pub fn group_kind(&self) -> String {
        format!("{} Kind={}", self.group, self.kind)
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// The names a project's templates take from the project's own: its name, and the Rust
/// identifiers of its crates.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectNames {
    /// The project's name: `otp-operator`.
    pub project_name: String,
    /// The operator crate's identifier: `otp_operator`.
    pub crate_ident: String,
    /// The api crate's identifier: `otp_operator_api`.
    pub api_crate_ident: String,
}

impl ProjectNames {
    /// The names of the project `project_name`.
    pub fn of(project_name: &str) -> Self {
        Self {
            project_name: project_name.to_owned(),
            crate_ident: crate_ident(project_name),
            api_crate_ident: api_crate_ident(project_name),
        }
    }
}

/// The name of the project's api crate, which holds the types: `<project>-api`.
pub fn api_crate(project_name: &str) -> String {
    format!("{project_name}-api")
}

/// The Rust identifier of the project's api crate: `otp_operator_api`.
pub fn api_crate_ident(project_name: &str) -> String {
    crate_ident(&api_crate(project_name))
}

/// `group` as a `--group` value in a command a message suggests: `''` for the domain's own
/// group, so that the shell passes an empty argument.
pub fn group_flag(group: &str) -> &str {
    if group.is_empty() { "''" } else { group }
}

/// An API group as kubebuilder's flags, markers and messages write it: `core` for the core
/// group, whose name is empty.
pub fn group_shown(api_group: &str) -> &str {
    if api_group.is_empty() {
        "core"
    } else {
        api_group
    }
}

/// The API group that a flag or a marker names: the empty core group for `core`.
pub fn api_group(written: &str) -> &str {
    if written == "core" { "" } else { written }
}

/// The path kubebuilder gives a webhook of `names`: `/<verb>-<group with dashes>-<version>-<kind>`
/// (`/mutate-example-com-v1-application`, `/validate--v1-pod` for the core group).
pub fn webhook_path(verb: &str, names: &ResourceNames) -> String {
    format!(
        "/{verb}-{}-{}-{}",
        names.qualified_group.replace('.', "-"),
        names.version,
        names.kind_lower
    )
}

/// The name of a webhook of `names` in its configuration, as kubebuilder writes it
/// (`mapplication-v1.kb.io`, `prefix` `m` or `v`), or with the group in it when `taken` has
/// that one already (the same kind in another group): `mapplication-example-com-v1.kb.io`.
pub fn webhook_name(prefix: char, names: &ResourceNames, taken: &[String]) -> String {
    let short = format!("{prefix}{}-{}.kb.io", names.kind_lower, names.version);
    if taken.contains(&short) {
        format!(
            "{prefix}{}-{}-{}.kb.io",
            names.kind_lower,
            names.qualified_group.replace('.', "-"),
            names.version
        )
    } else {
        short
    }
}

/// The file of a CRD in `config/crd/bases/`, as controller-gen names it:
/// `<qualified group>_<plural>.yaml`.
pub fn crd_file(qualified_group: &str, plural: &str) -> String {
    format!("{qualified_group}_{plural}.yaml")
}

pub fn qualified_group(group: &str, domain: &str) -> String {
    if group.is_empty() {
        domain.to_owned()
    } else {
        format!("{group}.{domain}")
    }
}

/// The API group of Kubernetes itself that `--group` names, as kubebuilder reads it: `core`
/// is the core group, `apps` is `apps`, and `networking` (or `networking.k8s.io`) is
/// `networking.k8s.io`. `None` when the group is none of Kubernetes' own.
pub(super) fn builtin_group_of(group: &str) -> Option<String> {
    let candidates: Vec<String> = if group == "core" {
        vec![String::new()]
    } else if group.is_empty() {
        Vec::new()
    } else {
        vec![
            group.to_owned(),
            format!("{group}.k8s.io"),
            format!("{group}.apiserver.k8s.io"),
        ]
    };
    candidates.into_iter().find(|candidate| {
        builtin::BUILTINS
            .iter()
            .any(|b| b.group == candidate.as_str())
    })
}

/// The kind of Kubernetes itself that a group (as `--group` writes it), a version and a kind
/// name, if any: the lookup alone, for what PROJECT records. [`builtin`] explains a miss.
pub fn find_builtin(group: &str, version: &str, kind: &str) -> Option<&'static builtin::Builtin> {
    let api_group = builtin_group_of(group)?;
    builtin::BUILTINS
        .iter()
        .find(|b| b.group == api_group && b.version == version && b.kind == kind)
}

/// The kind of Kubernetes itself that `--group`, `--version` and `--kind` name (see
/// [`find_builtin`]). `Ok(None)` when the group is none of Kubernetes' own; an error naming
/// what Kubernetes has when the group is, but the version or the kind is not.
pub fn builtin(
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Option<&'static builtin::Builtin>, UserError> {
    if let Some(found) = find_builtin(group, version, kind) {
        return Ok(Some(found));
    }
    let Some(api_group) = builtin_group_of(group) else {
        return Ok(None);
    };
    let in_group: Vec<&builtin::Builtin> = builtin::BUILTINS
        .iter()
        .filter(|b| b.group == api_group.as_str())
        .collect();
    let shown = group_shown(&api_group);
    let mut versions: Vec<&str> = in_group.iter().map(|b| b.version).collect();
    versions.dedup();
    if !versions.contains(&version) {
        return Err(UserError::new(format!(
            "Kubernetes has no version `{version}` of the `{shown}` group"
        ))
        .help(format!("its versions are {}", versions.join(", "))));
    }
    let kinds: Vec<&str> = in_group
        .iter()
        .filter(|b| b.version == version)
        .map(|b| b.kind)
        .collect();
    Err(UserError::new(format!(
        "Kubernetes has no kind `{kind}` in {shown}/{version}"
    ))
    .help(format!("its kinds there are {}", kinds.join(", "))))
}

/// The prefix of the modules of Kubernetes' own kinds: `controllers/k8s_apps/deployment.rs`,
/// `webhooks/k8s_core/v1/pod.rs`. A group of the project's has the module of its name, so the
/// two meet only for a group called `k8s-apps` or `k8s.apps`, which `create api` refuses then.
pub const BUILTIN_MODULE_PREFIX: &str = "k8s_";

/// The names of a controller or webhook for one of Kubernetes' own kinds: its module is
/// `k8s_` and the group's k8s-openapi module (`k8s_apps`, `k8s_core`, `k8s_networking`), apart
/// from the project's groups (an `apps` group keeps `apps`); `qualified_group` is the real API
/// group (empty for the core group).
pub fn builtin_names(kind: &builtin::Builtin) -> ResourceNames {
    let mut names = builtin_names_unprefixed(kind);
    names.group_module = format!("{BUILTIN_MODULE_PREFIX}{}", names.group_module);
    names.group_dir = format!("{BUILTIN_MODULE_PREFIX}{}", names.group_dir);
    names
}

/// The names of one of Kubernetes' own kinds as rsbuilder made them before its modules moved to
/// `k8s_<group>`: a project made then has `controllers/apps/deployment.rs`, and a webhook added
/// to that kind's module must find it there.
pub fn builtin_names_unprefixed(kind: &builtin::Builtin) -> ResourceNames {
    let label = kind.module.split("::").next().unwrap_or(kind.module);
    let mut names = ResourceNames::new(label, kind.version, kind.kind, Some(kind.plural), "k8s.io");
    names.qualified_group = kind.group.to_owned();
    names.crd_name = String::new();
    names.short_name = None;
    names
}

/// Every name derived from one group, version and kind. Templates receive these and compute
/// none of their own.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ResourceNames {
    /// The group as given (`appotp`); empty for the domain's own group.
    pub group: String,
    /// `appotp.learn.com`.
    pub qualified_group: String,
    /// The group as a Rust module (`appotp`, `r#type`, `super_`).
    pub group_module: String,
    /// The folder of the group's modules (`appotp`).
    pub group_dir: String,
    /// `v1`.
    pub version: String,
    /// `AppOTP`.
    pub kind: String,
    /// `appotp`: the singular resource name.
    pub kind_lower: String,
    /// The kind's module (`app_otp`, `r#loop`).
    pub kind_module: String,
    /// The file stem of the kind's modules (`app_otp`).
    pub kind_file: String,
    /// `appotps`.
    pub plural: String,
    /// Whether `plural` differs from what `plural::plural` computes.
    pub plural_overridden: bool,
    /// The CRD's short name (`aotp`), if it has one.
    pub short_name: Option<String>,
    /// `appotps.appotp.learn.com`.
    pub crd_name: String,
    /// The controller's name (`appotp-appotp`): metrics label, field manager.
    pub controller_name: String,
    /// The controller's module (`app_otp`, or `captain_backup` for `--controller-name
    /// captain-backup`) and its file stem.
    pub controller_module: String,
    pub controller_file: String,
    /// The finalizer the controller keeps on objects it cleans up after.
    pub finalizer: String,
    /// The condition the controller reports its outcome in: `Ready`, or `CaptainBackupReady`
    /// for a controller that is not the kind's own.
    pub condition_type: String,
    /// Prefix of the kind's object names in config/ (`appotp-appotp`).
    pub object_prefix: String,
    /// Prefix of the kind's file names in config/ (`appotp_app_otp`).
    pub file_prefix: String,
}

impl ResourceNames {
    /// The kind these are the names of.
    pub fn gvk(&self) -> Gvk {
        Gvk::new(&self.qualified_group, &self.version, &self.kind)
    }

    /// Derives every name; the inputs must have passed validation.
    pub fn new(group: &str, version: &str, kind: &str, plural: Option<&str>, domain: &str) -> Self {
        let qualified_group = qualified_group(group, domain);
        let group_label = if group.is_empty() { domain } else { group };
        let (group_module, group_dir) = module(&group_label.replace(['.', '-'], "_"));
        let (kind_module, kind_file) = module(&kind.to_snake_case());
        let (controller_module, controller_file) = (kind_module.clone(), kind_file.clone());
        let computed = plural::plural(kind);
        let plural = plural.map_or_else(|| computed.clone(), str::to_owned);
        let kind_lower = kind.to_lowercase();
        let initials: String = kind
            .chars()
            .filter(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            .collect::<String>()
            .to_lowercase();
        let short_name = Some(
            if initials.len() >= 2 && initials.starts_with(|c: char| c.is_ascii_lowercase()) {
                initials
            } else {
                kind_lower.clone()
            },
        );
        Self {
            group: group.to_owned(),
            group_module,
            version: version.to_owned(),
            kind: kind.to_owned(),
            kind_module,
            plural_overridden: plural != computed,
            crd_name: format!("{plural}.{qualified_group}"),
            controller_name: format!("{group_label}-{kind_lower}"),
            controller_module,
            controller_file,
            finalizer: format!("{qualified_group}/finalizer"),
            condition_type: "Ready".to_owned(),
            object_prefix: format!("{group_label}-{kind_lower}"),
            file_prefix: format!("{group_dir}_{kind_file}"),
            short_name,
            kind_lower,
            kind_file,
            group_dir,
            plural,
            qualified_group,
        }
    }
}

/// The module and file stem of the controller named `name` (`--controller-name`).
pub fn controller_module(name: &str) -> (String, String) {
    module(&name.to_snake_case())
}

impl ResourceNames {
    /// The names of the kind's controller called `name` (`--controller-name`, already
    /// validated). A name whose module is the kind's own is the kind's controller; any other
    /// gets its own module, field manager, finalizer and condition, so that two controllers of
    /// one kind never take each other's fields or finalizers.
    pub fn with_controller(mut self, name: &str) -> Self {
        let (module, file) = controller_module(name);
        if module == self.kind_module {
            return self;
        }
        let group_label = self
            .controller_name
            .strip_suffix(&format!("-{}", self.kind_lower))
            .unwrap_or_default()
            .to_owned();
        self.controller_name = format!("{group_label}-{name}");
        self.finalizer = format!("{}/{name}", self.qualified_group);
        self.condition_type = format!("{}Ready", heck::ToUpperCamelCase::to_upper_camel_case(name));
        self.controller_module = module;
        self.controller_file = file;
        self
    }

    /// Whether these are the names of a controller other than the kind's own.
    pub fn named_controller(&self) -> bool {
        self.controller_module != self.kind_module
    }
}
