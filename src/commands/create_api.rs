//! `rsbuilder create api`: a kind's Rust types, CRD, sample and RBAC roles, and a controller
//! for it, wired into the files `init` made.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use crate::apply::{self, Options};
use crate::cli::CreateApiArgs;
use crate::names::builtin::Builtin;
use crate::names::{self, ResourceNames};
use crate::project::{
    self, DeployImage, DeployImageOptions, NamedController, Project, Resource, ResourceApi,
};
use crate::rbac;
use crate::scaffold::{self, Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree};
use crate::ui::{self, UserError};

#[cfg(test)]
mod properties;

/// One version of a kind, as the CRD template lists it.
#[derive(Debug, Serialize)]
struct CrdVersion {
    name: String,
    storage: bool,
}

/// What the templates of `create api` receive.
#[derive(Debug, Serialize)]
struct Context {
    #[serde(flatten)]
    names: ResourceNames,
    project_name: String,
    crate_ident: String,
    api_crate_ident: String,
    namespaced: bool,
    /// Whether the project is namespaced: its helper roles are Roles, not ClusterRoles.
    project_namespaced: bool,
    /// `--ssa`: every field of the spec is an `Option` left out when unset.
    ssa: bool,
    storage: bool,
    versions: Vec<CrdVersion>,
    crd_file: String,
    sample_file: String,
    kind_yaml: String,
    plural_yaml: String,
    singular_yaml: String,
    short_name_yaml: Option<String>,
    /// `--image`, for a kind that runs it.
    image: Option<String>,
    image_yaml: Option<String>,
    /// Descriptions of the CRD of a kind that runs an image, as crdgen quotes them.
    spec_description_yaml: Option<String>,
    image_description_yaml: Option<String>,
    ports_description_yaml: Option<String>,
    container_port: Option<u16>,
    /// `--image` and the arguments of `--image-container-command`, as Rust string literals.
    image_rust: Option<String>,
    container_command_rust: Vec<String>,
    run_as_user: Option<i64>,
    /// For a controller of one of Kubernetes' own kinds: its module under
    /// `k8s_openapi::api` and its group as RBAC markers write it.
    builtin_module: Option<String>,
    builtin_group: Option<String>,
}

/// What kind of API `create api` scaffolds.
#[derive(Debug, Clone)]
enum Mode {
    /// Types, and a controller stub to fill in.
    Standard,
    /// Types that describe a Deployment of an image, and the controller that runs it.
    Image(ImageOptions),
    /// A controller for a kind of Kubernetes itself, which has no types to scaffold.
    Builtin(&'static Builtin),
}

/// The flags of `--image`, checked.
#[derive(Debug, Clone)]
struct ImageOptions {
    image: String,
    port: Option<u16>,
    command: Vec<String>,
    run_as_user: Option<i64>,
    /// The flags as given, for PROJECT.
    recorded: DeployImageOptions,
}

/// What to scaffold, once flags, prompts and PROJECT agree.
struct Request {
    names: ResourceNames,
    resource: bool,
    controller: bool,
    namespaced: bool,
    /// Every version of the kind with types, in the order they were created, this one included;
    /// the first is the storage version.
    versions: Vec<String>,
    /// Whether this version is new to a kind that has others.
    joins_kind: bool,
    mode: Mode,
    /// `--controller-name`, recorded in PROJECT.
    controller_name: Option<String>,
    /// `--ssa`: the spec's fields are all optional.
    ssa: bool,
}

impl Request {
    /// Whether this version is the kind's storage version (its first one).
    fn storage(&self) -> bool {
        self.versions.first() == Some(&self.names.version)
    }
}

/// Runs `create api` in the project around the current directory.
pub fn run(args: CreateApiArgs) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    let mut project = project::load(root)?;
    let request = resolve(&args, &project)?;
    let crd = crd_to_join(&OnDisk(root), &request)?;
    let plan = plan(&project, &request, crd.as_deref())?;
    let plan = with_project(plan, &mut project, &request);
    apply::apply(
        root,
        plan,
        Options {
            force: args.force,
            dry_run: args.dry_run,
        },
    )?;
    if args.dry_run {
        return Ok(());
    }
    if args.make {
        super::generate::generate(root, false)
            .context("the API was scaffolded, but `--make` could not regenerate the manifests")?;
    }
    let names = &request.names;
    let mut next = String::from("\nNext:\n");
    if request.resource {
        next.push_str(&format!(
            "  edit api/src/{}/{}/{}.rs, then `make manifests`\n",
            names.group_dir, names.version, names.kind_file
        ));
    }
    if request.controller {
        next.push_str(&format!(
            "  implement reconcile in operator/src/controllers/{}/{}.rs\n",
            names.group_dir, names.controller_file
        ));
    }
    // A new version of a kind that converts through a webhook: the API server sends its
    // objects to the webhook, which cannot convert them until it has the spoke.
    if request.resource
        && let Some(hub) = project.resources.iter().find(|r| {
            r.group == names.group
                && r.kind == names.kind
                && r.version != names.version
                && r.webhooks.as_ref().is_some_and(|w| w.conversion)
        })
    {
        ui::warn(
            &format!(
                "{} converts through its {} webhook, which cannot convert {} objects yet",
                names.kind, hub.version, names.version
            ),
            None,
        );
        next.push_str(&format!(
            "  rsbuilder create webhook --group {} --version {} --kind {} --conversion --spoke {}\n",
            names::group_flag(&names.group),
            hub.version,
            names.kind,
            names.version
        ));
    }
    next.push_str("  cargo test && make install run");
    ui::note(&next);
    super::note_older_runtime(&project);
    Ok(())
}

/// Short names Kubernetes' own resources use; a kind must not shadow them.
const BUILTIN_SHORT_NAMES: &[&str] = &[
    "cm", "cj", "crd", "crds", "cs", "csr", "deploy", "ds", "ep", "eps", "ev", "hpa", "ing",
    "limits", "netpol", "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa",
    "sc", "sts", "svc", "va",
];

fn resolve(args: &CreateApiArgs, project: &Project) -> anyhow::Result<Request> {
    let args = &with_recorded(args, project);
    names::validate_group(&args.group, &project.domain)?;
    names::validate_version(&args.version)?;
    names::validate_kind(&args.kind)?;
    if let Some(plural) = &args.plural {
        names::validate_plural(plural)?;
    }
    if let Some(name) = &args.controller_name {
        names::validate_controller_name(name)?;
        if args.controller == Some(false) {
            return Err(UserError::new(format!(
                "--controller-name {name} names a controller, but --controller=false scaffolds none"
            ))
            .help("drop --controller=false, or drop --controller-name")
            .into());
        }
    }
    let image = resolve_image(args)?;
    refuse_flags_that_disagree(args)?;
    if image.is_none()
        && let Some(request) = resolve_builtin(args, project)?
    {
        return Ok(request);
    }
    if args.resource != Some(false)
        && let Ok(Some(kind)) = names::builtin(&args.group, &args.version, &args.kind)
    {
        ui::warn(
            &format!(
                "{} is one of Kubernetes' own kinds ({}/{}): this scaffolds a new CRD of that name in the group {}.{}, not a controller for Kubernetes' {}",
                kind.kind,
                names::group_shown(kind.group),
                kind.version,
                args.group,
                project.domain,
                kind.kind
            ),
            Some(
                "for a controller of Kubernetes' kind, run the command again with --resource=false",
            ),
        );
    }

    let family = Family::of(args, project);
    let (namespaced, plural) = inherit_scope_and_plural(args, project, &family)?;
    let mut names = derive_names(args, project, plural.as_deref())?;
    let gvk = format!(
        "{}/{}, Kind={}",
        names.qualified_group, names.version, names.kind
    );
    let taken = check_clashes(args, project, &names, &gvk)?;
    pick_short_name(&mut names, &taken);
    let (resource, controller) = decide_parts(
        args,
        project,
        &family,
        image.is_some(),
        namespaced,
        &names,
        &gvk,
    )?;
    if controller {
        refuse_builtin_controller_name(project, &names, &gvk)?;
    }
    let Family {
        same_kind,
        siblings,
        ..
    } = family;

    let mut versions: Vec<String> = same_kind
        .iter()
        .filter(|r| r.api.is_some())
        .map(|r| r.version.clone())
        .collect();
    let joins_kind = resource && !siblings.is_empty() && !versions.contains(&args.version);
    if resource && !versions.contains(&args.version) {
        versions.push(args.version.clone());
    }
    Ok(Request {
        names,
        resource,
        controller,
        namespaced,
        versions,
        joins_kind,
        mode: image.map_or(Mode::Standard, Mode::Image),
        controller_name: args.controller_name.clone(),
        ssa: args.ssa == Some(true),
    })
}

/// With `--force`, a kind scaffolded again keeps what PROJECT recorded of it unless a flag
/// says otherwise: server-side apply (as kubebuilder keeps it), and the image it runs with its
/// options. Without them, PROJECT would keep records the new files no longer follow.
fn with_recorded(args: &CreateApiArgs, project: &Project) -> CreateApiArgs {
    let mut args = args.clone();
    if !args.force {
        return args;
    }
    let same = |group: &str, version: &str, kind: &str| {
        group == args.group && version == args.version && kind == args.kind
    };
    if args.ssa.is_none() && args.image.is_none() && args.resource != Some(false) {
        args.ssa = project
            .resources
            .iter()
            .find(|r| same(&r.group, &r.version, &r.kind))
            .and_then(|r| r.api.as_ref())
            .map(|api| api.ssa);
    }
    let recorded = project
        .deploy_images
        .iter()
        .find(|d| same(&d.group, &d.version, &d.kind));
    if let Some(recorded) = recorded
        && args.image.is_none()
        && args.resource != Some(false)
    {
        let options = &recorded.options;
        args.image = Some(options.image.clone());
        args.image_container_port = args
            .image_container_port
            .or_else(|| options.container_port.clone());
        args.image_container_command = args
            .image_container_command
            .or_else(|| options.container_command.clone());
        args.run_as_user = args.run_as_user.or_else(|| options.run_as_user.clone());
    }
    args
}

/// Refuses flags that cannot go together: `--ssa` without types of the kind's own, and
/// `--image` with a part it needs turned off.
fn refuse_flags_that_disagree(args: &CreateApiArgs) -> anyhow::Result<()> {
    if args.ssa == Some(true) && (args.image.is_some() || args.resource == Some(false)) {
        return Err(UserError::new(format!(
            "--ssa shapes the types of a kind, and {} scaffolds none of its own",
            if args.image.is_some() {
                "--image"
            } else {
                "--resource=false"
            }
        ))
        .help(if args.image.is_some() {
            "drop --ssa: the spec of a kind that runs an image is applied whole by its controller"
        } else {
            "drop --resource=false, or drop --ssa"
        })
        .into());
    }
    if args.image.is_some() {
        for (value, flag) in [
            (args.resource, "--resource"),
            (args.controller, "--controller"),
            (args.namespaced, "--namespaced"),
        ] {
            if value == Some(false) {
                return Err(UserError::new(format!(
                    "--image scaffolds a namespaced kind and its controller: it cannot go with {flag}=false"
                ))
                .help(format!("drop {flag}=false, or drop --image"))
                .into());
            }
        }
    }
    Ok(())
}

/// The kind's entries in PROJECT (Kubernetes' own kind of the same name, recorded as `core`,
/// is another kind): all of them, this version's, and the other versions with
/// types, which share one CRD with this one, so one plural and one scope. (The version itself
/// does not count among them: `--force` may scaffold it with other ones.)
struct Family<'a> {
    same_kind: Vec<&'a Resource>,
    this: Option<&'a Resource>,
    siblings: Vec<&'a Resource>,
}

impl<'a> Family<'a> {
    fn of(args: &CreateApiArgs, project: &'a Project) -> Self {
        let same_kind: Vec<&Resource> = project
            .resources
            .iter()
            .filter(|r| !r.core && r.group == args.group && r.kind == args.kind)
            .collect();
        let this = same_kind
            .iter()
            .find(|r| r.version == args.version)
            .copied();
        let siblings: Vec<&Resource> = same_kind
            .iter()
            .copied()
            .filter(|r| r.api.is_some() && r.version != args.version)
            .collect();
        Self {
            same_kind,
            this,
            siblings,
        }
    }
}

/// The scope and the plural: as given, else as the kind's other versions have them, else as
/// this version had them.
fn inherit_scope_and_plural(
    args: &CreateApiArgs,
    project: &Project,
    family: &Family<'_>,
) -> anyhow::Result<(bool, Option<String>)> {
    let Family { this, siblings, .. } = family;
    let this = *this;
    let computed_plural = names::plural::plural(&args.kind);
    let plural_of = |r: &Resource| r.plural.clone().unwrap_or_else(|| computed_plural.clone());
    let scope = |namespaced: bool| {
        if namespaced {
            "namespaced"
        } else {
            "cluster-scoped"
        }
    };

    let sibling_scope = siblings
        .first()
        .and_then(|r| r.api.as_ref())
        .map(|api| api.namespaced);
    let namespaced = match (args.namespaced, sibling_scope) {
        (Some(given), Some(theirs)) if given != theirs => {
            return Err(UserError::new(format!(
                "{}/{}, Kind={} would be {}, but version {} of it is {}",
                names::qualified_group(&args.group, &project.domain),
                args.version,
                args.kind,
                scope(given),
                siblings[0].version,
                scope(theirs)
            ))
            .help(format!(
                "pass `--namespaced={theirs}`: the versions of a kind share one scope"
            ))
            .into());
        }
        (Some(given), _) => given,
        (None, Some(theirs)) => theirs,
        (None, None) => this
            .and_then(|r| r.api.as_ref())
            .is_none_or(|api| api.namespaced),
    };

    let sibling_plural = siblings.first().map(|r| plural_of(r));
    let plural = match (&args.plural, sibling_plural) {
        (Some(given), Some(theirs)) if *given != theirs => {
            return Err(UserError::new(format!(
                "invalid plural `{given}`: the other versions of {} call it `{theirs}`",
                args.kind
            ))
            .help("drop --plural: the versions of a kind share one resource name")
            .into());
        }
        (Some(given), _) => Some(given.clone()),
        (None, Some(theirs)) => Some(theirs),
        (None, None) => this.and_then(|r| r.plural.clone()),
    };
    Ok((namespaced, plural))
}

/// The derived names, checked against the limits of where they land.
fn derive_names(
    args: &CreateApiArgs,
    project: &Project,
    plural: Option<&str>,
) -> anyhow::Result<ResourceNames> {
    let mut names = ResourceNames::new(
        &args.group,
        &args.version,
        &args.kind,
        plural,
        &project.domain,
    );
    if let Some(name) = &args.controller_name {
        names = names.with_controller(name);
    }
    // The CRD's file, `<group>_<plural>.yaml`, must fit the file systems' 255 bytes too.
    let crd_file_len = names::crd_file(&names.qualified_group, &names.plural).len();
    if names.plural.len() > 63 || names.crd_name.len() > 253 || crd_file_len > 255 {
        return Err(UserError::new(format!(
            "the resource name `{}` of kind {} is too long: the plural may have 63 characters, `<plural>.<group>` 253, and the CRD's file name `<group>_<plural>.yaml` 255",
            names.plural, names.kind
        ))
        .help(if names.plural.len() > 63 {
            "pass a shorter --plural"
        } else {
            "pass a shorter --plural or --group"
        })
        .into());
    }
    names::validate_plural(&names.plural)?;
    if names.controller_name.len() > 63 {
        return Err(UserError::new(format!(
            "the controller name `{}` of kind {} is longer than 63 characters, the limit of the names it is published under (event reporter, field manager)",
            names.controller_name, names.kind
        ))
        .help(if args.controller_name.is_some() {
            "pick a shorter --controller-name or group"
        } else {
            "pick a shorter group or kind"
        })
        .into());
    }
    Ok(names)
}

/// Refuses a kind whose modules, files or names another resource of the project has; the names
/// others use, so that the short name takes none of them.
fn check_clashes(
    args: &CreateApiArgs,
    project: &Project,
    names: &ResourceNames,
    gvk: &str,
) -> anyhow::Result<Vec<String>> {
    let mut taken: Vec<String> = BUILTIN_SHORT_NAMES
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for other in project.resources.iter().filter(|r| r.core) {
        let Some(theirs) = other.builtin().map(names::builtin_names) else {
            continue;
        };
        if theirs.group_dir == names.group_dir {
            return Err(UserError::new(format!(
                "group `{}` would share the module `{}` with the controller of Kubernetes' {}, Kind={}",
                names.qualified_group, names.group_dir, other.group, other.kind
            ))
            .help("pick another group name")
            .into());
        }
    }
    for other in project
        .resources
        .iter()
        .filter(|r| !(r.core || (r.group == args.group && r.kind == args.kind)))
    {
        let other_names = ResourceNames::new(
            &other.group,
            &other.version,
            &other.kind,
            other.plural.as_deref(),
            &project.domain,
        );
        if other.group != args.group && other_names.group_dir == names.group_dir {
            return Err(UserError::new(format!(
                "group `{}` would share the module `{}` with group `{}`",
                names.qualified_group, names.group_dir, other_names.qualified_group
            ))
            .help("pick a group that differs by more than `.` or `-`")
            .into());
        }
        if other.group == args.group {
            refuse_same_group_clash(args, names, gvk, other, &other_names)?;
        }
        // Two kinds must never write the same files (their RBAC roles, their tests).
        if other_names.file_prefix == names.file_prefix {
            return Err(UserError::new(format!(
                "{gvk} would write the files of kind {} of group `{}`: both are named `{}_*`",
                other.kind, other_names.qualified_group, names.file_prefix
            ))
            .help("pick another kind or group name; --force would overwrite the other kind's files")
            .into());
        }
        taken.extend(other_names.short_name.clone());
        taken.push(other_names.kind_lower);
        taken.push(other_names.plural);
    }
    Ok(taken)
}

/// Refuses a kind of the same group as `other` whose file names, controller module, plural or
/// singular are `other`'s.
fn refuse_same_group_clash(
    args: &CreateApiArgs,
    names: &ResourceNames,
    gvk: &str,
    other: &Resource,
    other_names: &ResourceNames,
) -> anyhow::Result<()> {
    if other_names.kind_file == names.kind_file || other_names.plural == names.plural {
        return Err(UserError::new(format!(
            "{gvk} clashes with kind {} of the same group: both would be named `{}` or `{}`",
            other.kind, names.kind_file, names.plural
        ))
        .help("pick another kind, or pass a different --plural")
        .into());
    }
    // The controllers of a group share one folder of modules: a named controller must not
    // take the module of another kind, nor another kind's named controller this one's.
    if let Some(module) = shared_controller_module(names, other, other_names) {
        return Err(UserError::new(format!(
            "{gvk} would have the controller module `{module}`, which kind {} of the same group has",
            other.kind
        ))
        .help(if args.controller_name.is_some() {
            "pick another --controller-name"
        } else {
            "pick another kind name"
        })
        .into());
    }
    // The API server serves the plural, the singular and the short names of every CRD of a
    // group from one set: a name another kind has is not served.
    let theirs = [&other_names.plural, &other_names.kind_lower];
    if let Some(clash) = [&names.plural, &names.kind_lower]
        .into_iter()
        .find(|name| theirs.contains(name))
    {
        return Err(UserError::new(format!(
                "{gvk} would be called `{clash}`, a name kind {} of the same group has: the API server would not serve it",
                other.kind
            ))
            .help("pass a different --plural, or pick another kind")
            .into());
    }
    Ok(())
}

/// A controller module that the kind of `ours` would share with `other` (named `theirs`), of
/// the same folder: the kind's own module, whether its controller exists yet or not, and the
/// modules of its named controllers, on either side.
fn shared_controller_module(
    ours: &ResourceNames,
    other: &Resource,
    theirs: &ResourceNames,
) -> Option<String> {
    let mut modules = vec![theirs.kind_module.clone()];
    for controller in &other.controllers {
        modules.push(names::controller_module(&controller.name).0);
    }
    [&ours.kind_module, &ours.controller_module]
        .into_iter()
        .find(|module| modules.contains(module))
        .cloned()
}

/// The short name: short names are global in a cluster, so the kind's initials, else its
/// singular, else none.
fn pick_short_name(names: &mut ResourceNames, taken: &[String]) {
    names.short_name = [names.short_name.take(), Some(names.kind_lower.clone())]
        .into_iter()
        .flatten()
        .find(|candidate| !taken.contains(candidate));
}

/// Whether to scaffold the types and the controller: from the flags, or the answers on a
/// terminal, after refusing what exists.
fn decide_parts(
    args: &CreateApiArgs,
    project: &Project,
    family: &Family<'_>,
    image: bool,
    namespaced: bool,
    names: &ResourceNames,
    gvk: &str,
) -> anyhow::Result<(bool, bool)> {
    let Family {
        same_kind, this, ..
    } = family;
    let this = *this;
    refuse_respelled_controller(
        args,
        same_kind,
        &names.kind_module,
        &format!("{} Kind={}", names.qualified_group, names.kind),
    )?;
    let existing = existing_controller(args, same_kind, names);
    // What exists already is refused before any question is asked: the types, unless
    // `--resource=false` leaves them be; the controller, when `--controller` asks for another.
    let api_exists = this.is_some_and(|r| r.api.is_some());
    if !args.force && api_exists && args.resource != Some(false) {
        return Err(UserError::new(format!("API {gvk} already exists"))
            .help("pass --force to scaffold it again, or --resource=false to add only a controller")
            .into());
    }
    let wants_controller = args.controller == Some(true) || args.controller_name.is_some();
    if !args.force && wants_controller {
        existing.refuse(&format!("{} Kind={}", names.qualified_group, names.kind))?;
    }
    let (resource, controller) = if image {
        (true, true)
    } else {
        let resource = ask(args.resource, "Create Resource", true)?;
        let controller = match args.controller_name {
            Some(_) => true,
            None => ask(
                args.controller,
                "Create Controller",
                matches!(existing, Existing::None) || args.force,
            )?,
        };
        (resource, controller)
    };

    if !resource && !controller {
        return Err(nothing_to_scaffold(args, &existing, names));
    }
    if controller && !args.force {
        existing.refuse(&format!("{} Kind={}", names.qualified_group, names.kind))?;
    }
    if controller && !resource && this.is_none_or(|r| r.api.is_none()) {
        return Err(UserError::new(format!(
            "no API {gvk} in PROJECT: the controller needs its types"
        ))
        .help("run `rsbuilder create api` with --resource first")
        .into());
    }
    if project.namespaced && !namespaced {
        return Err(UserError::new(format!(
            "{gvk} would be cluster-scoped, but the project is namespaced: its manager's Role cannot grant cluster-scoped resources"
        ))
        .help("pass `--namespaced=true`")
        .into());
    }

    Ok((resource, controller))
}

/// Why neither the types nor a controller are scaffolded, in the words of what the user did:
/// the flags they passed, the answers they gave, or the controllers the kind has already.
fn nothing_to_scaffold(
    args: &CreateApiArgs,
    existing: &Existing,
    names: &ResourceNames,
) -> anyhow::Error {
    let kind = format!("{} Kind={}", names.qualified_group, names.kind);
    let resource = match args.resource {
        Some(_) => "--resource=false",
        None => "no resource",
    };
    let has = match existing {
        Existing::None => None,
        Existing::Same(None) => Some("its controller".to_owned()),
        Existing::Same(Some(name)) => Some(format!("its controller `{name}`")),
        Existing::Others(others) => Some(format!("its controllers ({})", others.join(", "))),
    };
    let error = match (args.resource, args.controller, has) {
        // The controller was left out because the kind has one.
        (_, None, Some(has)) => UserError::new(format!(
            "nothing to scaffold: {resource}, and {kind} has {has} already"
        ))
        .help("pass --controller-name <name> to add another controller, or `--controller --force` to scaffold it again"),
        (Some(false), Some(false), _) => {
            UserError::new("nothing to scaffold: both --resource and --controller are false")
                .help("pass --resource, --controller or both")
        }
        _ => UserError::new("nothing to scaffold: neither the resource nor a controller was asked for")
            .help("answer yes to a question, or pass --resource, --controller or both"),
    };
    error.into()
}

/// The controllers a kind has that a new one would collide with.
enum Existing {
    /// None: the controller asked for can be scaffolded.
    None,
    /// The controller asked for exists, under this name (`None` for the kind's own).
    Same(Option<String>),
    /// No name was given, and the kind has these controllers: a second one needs a name.
    Others(Vec<String>),
}

impl Existing {
    /// The refusal, unless nothing collides; `kind` names the kind as the message shows it.
    fn refuse(&self, kind: &str) -> anyhow::Result<()> {
        match self {
            Existing::None => Ok(()),
            Existing::Same(None) => Err(UserError::new(format!(
                "a controller for {kind} already exists"
            ))
            .help("pass --controller-name <name> to add another controller, --controller=false, or --force to scaffold it again")
            .into()),
            Existing::Same(Some(name)) => Err(UserError::new(format!(
                "a controller named `{name}` for {kind} already exists"
            ))
            .help("pick another --controller-name, or pass --force to scaffold it again")
            .into()),
            Existing::Others(others) => Err(UserError::new(format!(
                "{kind} already has controllers ({}): another one needs a name of its own",
                others.join(", ")
            ))
            .help("pass --controller-name <name>, or --controller=false")
            .into()),
        }
    }
}

/// Refuses a `--controller-name` spelled otherwise than a controller the kind has, but with its
/// module (`a--b` next to `a-b`): the two would be one module, and `--force` would overwrite
/// the other's code and change its finalizer. Whatever `--force` says; `kind` names the kind
/// as the message shows it.
fn refuse_respelled_controller(
    args: &CreateApiArgs,
    same_kind: &[&Resource],
    kind_module: &str,
    kind: &str,
) -> anyhow::Result<()> {
    let Some(name) = &args.controller_name else {
        return Ok(());
    };
    let (module, _) = names::controller_module(name);
    if module == kind_module && same_kind.iter().any(|r| r.controller) {
        return Err(UserError::new(format!(
            "controller name `{name}` would share the module `{module}` with the controller of {kind}: the controllers of a kind need modules of their own"
        ))
        .help(format!(
            "pick another --controller-name, or pass `--controller --force` without --controller-name to scaffold the controller of {kind} again"
        ))
        .into());
    }
    let Some(other) = same_kind
        .iter()
        .flat_map(|r| &r.controllers)
        .map(|c| c.name.as_str())
        .find(|other| other != name && names::controller_module(other).0 == module)
    else {
        return Ok(());
    };
    Err(UserError::new(format!(
        "controller name `{name}` would share the module `{module}` with controller `{other}` of {kind}: the controllers of a kind need modules of their own"
    ))
    .help(format!(
        "pick another --controller-name, or pass `--controller-name {other} --force` to scaffold `{other}` again"
    ))
    .into())
}

/// Which of the kind's controllers the one asked for collides with.
fn existing_controller(
    args: &CreateApiArgs,
    same_kind: &[&Resource],
    names: &ResourceNames,
) -> Existing {
    let own = same_kind.iter().any(|r| r.controller);
    let named: Vec<String> = same_kind
        .iter()
        .flat_map(|r| r.controllers.iter().map(|c| c.name.clone()))
        .collect();
    let module_of = |name: &str| names::controller_module(name).0;
    match &args.controller_name {
        Some(_) => {
            let same = named
                .iter()
                .find(|other| module_of(other) == names.controller_module)
                .cloned();
            match same {
                Some(other) => Existing::Same(Some(other)),
                None if own && !names.named_controller() => Existing::Same(None),
                None => Existing::None,
            }
        }
        None if own => Existing::Same(None),
        None if named.is_empty() => Existing::None,
        None => Existing::Others(named),
    }
}

/// Checks `--image` and the flags that go with it.
fn resolve_image(args: &CreateApiArgs) -> anyhow::Result<Option<ImageOptions>> {
    let deploy_image = crate::plugins::check("create api", &args.plugins, true)?;
    let Some(image) = &args.image else {
        for (given, flag) in [
            (
                args.image_container_port.is_some(),
                "--image-container-port",
            ),
            (
                args.image_container_command.is_some(),
                "--image-container-command",
            ),
            (args.run_as_user.is_some(), "--run-as-user"),
            (deploy_image, "--plugins deploy-image/v1-alpha"),
        ] {
            if given {
                return Err(
                    UserError::new(format!("{flag} can only be used with --image"))
                        .help(format!("add --image <image>, or drop {flag}"))
                        .into(),
                );
            }
        }
        return Ok(None);
    };
    names::validate_image(image)?;
    let port = args.image_container_port.as_deref().map(port).transpose()?;
    let run_as_user = args.run_as_user.as_deref().map(user_id).transpose()?;
    let command = match &args.image_container_command {
        None => Vec::new(),
        Some(text) => container_command(text)?,
    };
    Ok(Some(ImageOptions {
        image: image.clone(),
        port,
        command,
        run_as_user,
        recorded: DeployImageOptions {
            container_command: args.image_container_command.clone(),
            container_port: args.image_container_port.clone(),
            image: image.clone(),
            run_as_user: args.run_as_user.clone(),
        },
    }))
}

/// `--image-container-port`: a port from 1 to 65535.
fn port(text: &str) -> anyhow::Result<u16> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(UserError::new(format!(
            "invalid --image-container-port `{text}`: a port is a number from 1 to 65535"
        ))
        .help("pass the port the image listens on, such as `--image-container-port 11211`")
        .into()),
    }
}

/// `--run-as-user`: a user ID other than root's that a pod can run as.
fn user_id(text: &str) -> anyhow::Result<i64> {
    match text.parse::<i64>() {
        Ok(uid) if (1..=i64::from(i32::MAX)).contains(&uid) => Ok(uid),
        _ => Err(UserError::new(format!(
            "invalid --run-as-user `{text}`: a user ID is a number from 1 to 2147483647 (the pod runs as non-root)"
        ))
        .help("pass the image's non-root user, such as `--run-as-user 1001`")
        .into()),
    }
}

/// `--image-container-command`: arguments separated by commas, on one line.
fn container_command(text: &str) -> anyhow::Result<Vec<String>> {
    // An argv of one line: a newline or a tab in it is a slip of the shell far more often than
    // an argument, and a script does not fit between commas anyway.
    if text.chars().any(char::is_control) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{}`: a command is one line of arguments separated by commas, without newlines, tabs or other control characters",
            crate::ui::shown(text)
        ))
        .help("pass the command on one line, such as `--image-container-command memcached,-m,64`; for a script, edit `COMMAND` in the controller")
        .into());
    }
    let parts: Vec<String> = text.split(',').map(str::to_owned).collect();
    if parts.iter().any(|part| part.trim().is_empty()) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{text}`: it has an empty argument"
        ))
        .help("separate the command and its arguments with single commas: `memcached,-m,64`")
        .into());
    }
    Ok(parts)
}

/// A controller for one of Kubernetes' own kinds: `--resource=false` with a group of
/// Kubernetes (`apps`, `core`, `networking`) and no such API in PROJECT.
fn resolve_builtin(args: &CreateApiArgs, project: &Project) -> anyhow::Result<Option<Request>> {
    let in_project = project
        .resources
        .iter()
        .any(|r| r.is(&args.group, &args.version, &args.kind) && r.api.is_some());
    if args.resource != Some(false) || in_project {
        return Ok(None);
    }
    let Some(kind) = names::builtin(&args.group, &args.version, &args.kind)? else {
        return Ok(None);
    };
    let mut names = names::builtin_names(kind);
    if let Some(name) = &args.controller_name {
        names = names.with_controller(name);
    }
    let gvk = format!(
        "{}/{}, Kind={}",
        names::group_shown(kind.group),
        kind.version,
        kind.kind
    );
    refuse_builtin_flags(args, project, kind, &gvk)?;
    let (group, _) = builtin_group(kind);
    let existing = project
        .resources
        .iter()
        .find(|r| r.core && r.group == group && r.version == kind.version && r.kind == kind.kind);
    let same_kind: Vec<&Resource> = existing.into_iter().collect();
    refuse_respelled_controller(args, &same_kind, &names.kind_module, &gvk)?;
    if !args.force {
        existing_controller(args, &same_kind, &names).refuse(&gvk)?;
    }
    if names.controller_name.len() > 63 {
        return Err(UserError::new(format!(
            "the controller name `{}` of {gvk} is longer than 63 characters, the limit of the names it is published under (event reporter, field manager)",
            names.controller_name
        ))
        .help("pick a shorter --controller-name")
        .into());
    }
    refuse_shared_modules(project, kind, &names, &gvk)?;
    Ok(Some(Request {
        names,
        resource: false,
        controller: true,
        namespaced: kind.namespaced,
        versions: Vec::new(),
        joins_kind: false,
        mode: Mode::Builtin(kind),
        controller_name: args.controller_name.clone(),
        ssa: false,
    }))
}

/// Refuses flags that contradict what Kubernetes says of its own kind `gvk`: no controller,
/// another plural, another scope, or a cluster-scoped kind in a namespaced project.
fn refuse_builtin_flags(
    args: &CreateApiArgs,
    project: &Project,
    kind: &Builtin,
    gvk: &str,
) -> anyhow::Result<()> {
    if args.controller == Some(false) {
        return Err(UserError::new(
            "nothing to scaffold: both --resource and --controller are false",
        )
        .help(format!(
            "pass --controller to scaffold a controller for {gvk}"
        ))
        .into());
    }
    if let Some(plural) = &args.plural
        && plural != kind.plural
    {
        return Err(UserError::new(format!(
            "invalid plural `{plural}`: Kubernetes calls {gvk} `{}`",
            kind.plural
        ))
        .help("drop --plural")
        .into());
    }
    if args
        .namespaced
        .is_some_and(|given| given != kind.namespaced)
    {
        return Err(UserError::new(format!(
            "{gvk} is {}",
            if kind.namespaced {
                "namespaced"
            } else {
                "cluster-scoped"
            }
        ))
        .help("drop --namespaced: Kubernetes decides the scope of its own kinds")
        .into());
    }
    if project.namespaced && !kind.namespaced {
        return Err(UserError::new(format!(
            "{gvk} is cluster-scoped, but the project is namespaced: its manager's Role cannot grant cluster-scoped resources"
        ))
        .help("pick a namespaced kind, or scaffold a cluster-wide project")
        .into());
    }
    Ok(())
}

/// Refuses a controller of Kubernetes' kind `gvk` whose module another controller has:
/// controllers of Kubernetes' kinds of one group share a folder of modules, and a group of the
/// project's own may have that folder's name.
fn refuse_shared_modules(
    project: &Project,
    kind: &Builtin,
    names: &ResourceNames,
    gvk: &str,
) -> anyhow::Result<()> {
    for other in project
        .resources
        .iter()
        .filter(|r| r.core && r.kind != kind.kind)
    {
        let Some(theirs) = other
            .builtin()
            .map(names::builtin_names)
            .filter(|theirs| theirs.group_dir == names.group_dir)
        else {
            continue;
        };
        if let Some(module) = shared_controller_module(names, other, &theirs) {
            return Err(UserError::new(format!(
                "the controller of {gvk} would have the module `{module}`, which the controller of Kubernetes' {} has",
                other.kind
            ))
            .help("pick another --controller-name")
            .into());
        }
    }
    for other in project.resources.iter().filter(|r| !r.core) {
        let other_names = ResourceNames::new(
            &other.group,
            &other.version,
            &other.kind,
            other.plural.as_deref(),
            &other.domain,
        );
        if other_names.group_dir == names.group_dir {
            return Err(UserError::new(format!(
                "the controllers of {gvk} would share the module `{}` with group `{}`",
                names.group_dir, other_names.qualified_group
            ))
            .help("rename one of the groups; Kubernetes' own are named after their k8s-openapi module")
            .into());
        }
        if other.controller && other_names.controller_name == names.controller_name {
            return Err(same_controller_name(
                gvk,
                &names.controller_name,
                &format!(
                    "{}/{}, Kind={}",
                    other_names.qualified_group, other.version, other.kind
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a controller named as the controller of one of Kubernetes' own kinds is: the
/// project's `apps` Deployment and Kubernetes' both default to `apps-deployment`.
fn refuse_builtin_controller_name(
    project: &Project,
    names: &ResourceNames,
    gvk: &str,
) -> anyhow::Result<()> {
    for other in project.resources.iter().filter(|r| r.core && r.controller) {
        let theirs = other.builtin().map(names::builtin_names);
        if theirs.is_some_and(|theirs| theirs.controller_name == names.controller_name) {
            return Err(same_controller_name(
                gvk,
                &names.controller_name,
                &format!(
                    "Kubernetes' {}/{}, Kind={}",
                    other.group, other.version, other.kind
                ),
            ));
        }
    }
    Ok(())
}

/// Two controllers of one manager must not share a name: it labels their metrics, reports
/// their events and manages their fields.
fn same_controller_name(gvk: &str, name: &str, other: &str) -> anyhow::Error {
    UserError::new(format!(
        "the controller of {gvk} would be named `{name}`, as the controller of {other} is"
    ))
    .help("pick another --controller-name")
    .into()
}

/// The group and domain kubebuilder records for one of Kubernetes' own kinds: `core` for the
/// core group, `networking` and `k8s.io` for `networking.k8s.io`.
pub(crate) fn builtin_group(kind: &Builtin) -> (String, String) {
    if kind.group.is_empty() {
        (names::group_shown(kind.group).into(), String::new())
    } else if let Some(group) = kind.group.strip_suffix(".k8s.io") {
        (group.into(), "k8s.io".into())
    } else {
        (kind.group.into(), String::new())
    }
}

/// A yes/no flag: its value when given; else the answer to `question` on a terminal; else
/// `default`, so that scripts and CI never wait for input.
fn ask(flag: Option<bool>, question: &str, default: bool) -> anyhow::Result<bool> {
    if let Some(value) = flag {
        return Ok(value);
    }
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(default);
    }
    match ui::confirm(question, default).context("failed to read the answer")? {
        Some(answer) => Ok(answer),
        None => Err(
            UserError::new(format!("no answer to `{question}`: the input ended"))
                .help("pass --resource and --controller to answer without a terminal")
                .into(),
        ),
    }
}

/// The controller test binary's root and helpers: written by the first controller, then only
/// inserted into.
const SHARED_TEST_FILES: &[&str] = &[
    "operator/tests/controllers/main.rs",
    "operator/tests/controllers/support.rs",
];

/// The kind's CRD in `tree`, when this version joins a kind whose CRD exists and lacks it.
fn crd_to_join(tree: &dyn Tree, request: &Request) -> anyhow::Result<Option<String>> {
    if !request.joins_kind {
        return Ok(None);
    }
    let names = &request.names;
    Ok(tree
        .read(&crd_path(names))
        .ok()
        .flatten()
        .filter(|text| !crd_lists_version(text, &names.version)))
}

/// `config/crd/bases/<group>_<plural>.yaml`.
fn crd_path(names: &ResourceNames) -> PathBuf {
    PathBuf::from("config/crd/bases").join(names::crd_file(&names.qualified_group, &names.plural))
}

/// Whether a CRD file already lists `version`.
fn crd_lists_version(crd: &str, version: &str) -> bool {
    serde_yaml::from_str::<serde_yaml::Value>(crd)
        .ok()
        .and_then(|value| value["spec"]["versions"].as_sequence().cloned())
        .is_some_and(|versions| versions.iter().any(|v| v["name"].as_str() == Some(version)))
}

/// The templates' paths: `{group}`, `{version}`, `{kind}`, `{crd}`, `{sample}` and `{rbac}`
/// stand for these names of the kind.
struct Paths {
    crd_stem: String,
    sample_stem: String,
}

impl Paths {
    fn new(context: &Context) -> Self {
        Self {
            crd_stem: context.crd_file.trim_end_matches(".yaml").to_owned(),
            sample_stem: context.sample_file.trim_end_matches(".yaml").to_owned(),
        }
    }

    /// The values, with `kind` standing for `file` (the kind's, or its controller's).
    fn values<'a>(&'a self, names: &'a ResourceNames, file: &'a str) -> [(&'a str, &'a str); 6] {
        [
            ("group", &names.group_dir),
            ("version", &names.version),
            ("kind", file),
            ("crd", &self.crd_stem),
            ("sample", &self.sample_stem),
            ("rbac", &names.file_prefix),
        ]
    }
}

/// Who owns a file `create api` writes: the shared module files, kustomizations and test
/// harness are created once, the rest is the kind's own.
fn policy(path: &str) -> Policy {
    if path.ends_with("/mod.rs")
        || path.ends_with("kustomization.yaml")
        || SHARED_TEST_FILES.contains(&path)
    {
        Policy::IfMissing
    } else {
        Policy::Owned
    }
}

fn plan(project: &Project, request: &Request, crd_to_join: Option<&str>) -> anyhow::Result<Plan> {
    let context = context(project, request);
    let paths = Paths::new(&context);
    let mut plan = Plan::default();
    if request.resource {
        plan_api(&mut plan, &context, request, &paths, crd_to_join)?;
    }
    if request.controller {
        plan_controller(&mut plan, &context, request, &paths)?;
        plan.derived.push(rbac::derived_role(project.namespaced));
    }
    Ok(plan)
}

/// The names and values the templates receive.
fn context(project: &Project, request: &Request) -> Context {
    let names = &request.names;
    let crd_file = names::crd_file(&names.qualified_group, &names.plural);
    let sample_file = format!(
        "{}_{}_{}.yaml",
        names.group_dir, names.version, names.kind_file
    );
    let mut context = Context {
        names: names.clone(),
        project_name: project.project_name.clone(),
        crate_ident: names::crate_ident(&project.project_name),
        api_crate_ident: names::crate_ident(&format!("{}-api", project.project_name)),
        namespaced: request.namespaced,
        project_namespaced: project.namespaced,
        ssa: request.ssa,
        storage: request.storage(),
        versions: Vec::new(),
        kind_yaml: crate::yaml::scalar(&names.kind),
        plural_yaml: crate::yaml::scalar(&names.plural),
        singular_yaml: crate::yaml::scalar(&names.kind_lower),
        short_name_yaml: names.short_name.as_deref().map(crate::yaml::scalar),
        crd_file,
        sample_file,
        image: None,
        image_yaml: None,
        spec_description_yaml: None,
        image_description_yaml: None,
        ports_description_yaml: None,
        container_port: None,
        image_rust: None,
        container_command_rust: Vec::new(),
        run_as_user: None,
        builtin_module: None,
        builtin_group: None,
    };
    match &request.mode {
        Mode::Standard => {}
        Mode::Image(options) => image_context(&mut context, options),
        Mode::Builtin(kind) => {
            context.builtin_module = Some(kind.module.to_owned());
            context.builtin_group = Some(names::group_shown(kind.group).to_owned());
        }
    }
    context
}

/// The values of a kind that runs an image: the image and command as YAML and Rust literals,
/// and the CRD's descriptions that name them.
fn image_context(context: &mut Context, options: &ImageOptions) {
    let kind = &context.names.kind;
    context.spec_description_yaml = Some(crate::yaml::scalar(&format!(
        "{kind}Spec defines the desired state of {kind}: what its Deployment runs."
    )));
    context.image = Some(options.image.clone());
    context.image_yaml = Some(crate::yaml::scalar(&options.image));
    context.image_description_yaml = Some(crate::yaml::scalar(&format!(
        "The container image; `{}` when unset.",
        options.image
    )));
    context.ports_description_yaml = Some(crate::yaml::scalar(&match options.port {
        Some(port) => format!("The ports the container listens on; port {port} when unset."),
        None => "The ports the container listens on.".to_owned(),
    }));
    context.container_port = options.port;
    context.image_rust = Some(names::rust_string(&options.image));
    context.container_command_rust = options
        .command
        .iter()
        .map(|part| names::rust_string(part))
        .collect();
    context.run_as_user = options.run_as_user;
}

/// The kind's types, CRD, samples and RBAC helper roles, and their insertions. A new version
/// of a kind whose CRD exists joins that CRD, which may hold schema changes `generate` made:
/// only its own version block is added.
fn plan_api(
    plan: &mut Plan,
    context: &Context,
    request: &Request,
    paths: &Paths,
    crd_to_join: Option<&str>,
) -> anyhow::Result<()> {
    let names = &request.names;
    let values = paths.values(names, &names.kind_file);
    let crd_context = context_with_versions(context, request, crd_to_join.is_some())?;
    let mut files = scaffold::render_set("api", &crd_context, &values, policy)?;
    if let Mode::Image(_) = request.mode {
        overlay(
            &mut files,
            scaffold::render_set("api-image", &crd_context, &values, policy)?,
        );
    }
    if let Some(existing) = crd_to_join {
        let crd_path = crd_path(names);
        let file = files
            .iter_mut()
            .find(|file| file.path == crd_path)
            .expect("the api templates render the CRD");
        let (_, block) = file
            .contents
            .split_once("\n  versions:\n")
            .context("the CRD template has no `versions:`")?;
        file.contents = format!("{}\n{block}", existing.trim_end());
        file.policy = Policy::Regenerated;
    }
    plan.files.extend(files);
    plan.insertions
        .extend(scaffold::render_insertions("api", &crd_context, &values)?);
    Ok(())
}

/// The controller, its tests and their insertions. Its files are named after the controller,
/// which is the kind unless `--controller-name` says otherwise.
fn plan_controller(
    plan: &mut Plan,
    context: &Context,
    request: &Request,
    paths: &Paths,
) -> anyhow::Result<()> {
    let names = &request.names;
    let values = paths.values(names, &names.controller_file);
    let controller_context = tera::Context::from_serialize(context)?;
    let mut files = scaffold::render_set("controller", &controller_context, &values, policy)?;
    let overlay_set = match request.mode {
        Mode::Standard => None,
        Mode::Image(_) => Some("controller-image"),
        Mode::Builtin(_) => Some("controller-builtin"),
    };
    if let Some(set) = overlay_set {
        overlay(
            &mut files,
            scaffold::render_set(set, &controller_context, &values, policy)?,
        );
    }
    plan.files.extend(files);
    plan.insertions.extend(scaffold::render_insertions(
        "controller",
        &controller_context,
        &values,
    )?);
    Ok(())
}

/// Replaces the files of `files` that `with` renders too.
fn overlay(files: &mut Vec<PlannedFile>, with: Vec<PlannedFile>) {
    for file in with {
        match files.iter_mut().find(|f| f.path == file.path) {
            Some(existing) => *existing = file,
            None => files.push(file),
        }
    }
}

/// The template context, with the versions the kind's CRD lists: all of them, or only the new
/// one when it joins an existing CRD file.
fn context_with_versions(
    context: &Context,
    request: &Request,
    joining: bool,
) -> anyhow::Result<tera::Context> {
    let mut value = tera::Context::from_serialize(context)?;
    let versions: Vec<CrdVersion> = request
        .versions
        .iter()
        .enumerate()
        .filter(|(_, name)| !joining || **name == request.names.version)
        .map(|(index, name)| CrdVersion {
            name: name.clone(),
            storage: index == 0,
        })
        .collect();
    value.insert("versions", &versions);
    Ok(value)
}

/// Adds the resource to PROJECT and PROJECT to the plan, to be written last.
fn with_project(mut plan: Plan, project: &mut Project, request: &Request) -> Plan {
    match &request.mode {
        Mode::Builtin(kind) => record_builtin(project, kind, request.controller_name.as_deref()),
        Mode::Image(options) => {
            record_deploy_image(project, &request.names, options);
            record_resource(project, request);
        }
        Mode::Standard => record_resource(project, request),
    }
    plan.files.push(project.planned());
    plan
}

/// Records a controller of one of Kubernetes' own kinds, under `core: true`.
fn record_builtin(project: &mut Project, kind: &Builtin, controller_name: Option<&str>) {
    let (group, domain) = builtin_group(kind);
    match project
        .resources
        .iter_mut()
        .find(|r| r.core && r.group == group && r.version == kind.version && r.kind == kind.kind)
    {
        Some(existing) => record_controller(existing, controller_name),
        None => project.resources.push(Resource {
            api: None,
            controller: controller_name.is_none(),
            controllers: controller_name
                .iter()
                .map(|name| NamedController {
                    name: (*name).to_owned(),
                })
                .collect(),
            core: true,
            domain,
            group,
            kind: kind.kind.to_owned(),
            plural: None,
            version: kind.version.to_owned(),
            webhooks: None,
            extra: Default::default(),
        }),
    }
}

/// Records the deploy-image plugin's options of a kind that runs an image, replacing the
/// kind's earlier ones.
fn record_deploy_image(project: &mut Project, names: &ResourceNames, options: &ImageOptions) {
    let record = DeployImage {
        domain: project.domain.clone(),
        group: names.group.clone(),
        kind: names.kind.clone(),
        options: options.recorded.clone(),
        version: names.version.clone(),
    };
    match project
        .deploy_images
        .iter_mut()
        .find(|d| d.group == record.group && d.version == record.version && d.kind == record.kind)
    {
        Some(existing) => *existing = record,
        None => project.deploy_images.push(record),
    }
}

/// Records the kind's API and controller in its entry, made when it has none.
fn record_resource(project: &mut Project, request: &Request) {
    let names = &request.names;
    let index = project
        .resources
        .iter()
        .position(|r| !r.core && r.is(&names.group, &names.version, &names.kind));
    let entry = match index {
        Some(index) => &mut project.resources[index],
        None => {
            project.resources.push(Resource {
                api: None,
                controller: false,
                controllers: Vec::new(),
                core: false,
                domain: project.domain.clone(),
                group: names.group.clone(),
                kind: names.kind.clone(),
                plural: None,
                version: names.version.clone(),
                webhooks: None,
                extra: Default::default(),
            });
            project.resources.last_mut().expect("just pushed")
        }
    };
    if request.resource {
        entry.api = Some(ResourceApi {
            crd_version: "v1".into(),
            namespaced: request.namespaced,
            ssa: request.ssa,
        });
        entry.plural = names.plural_overridden.then(|| names.plural.clone());
    }
    if request.controller {
        record_controller(entry, request.controller_name.as_deref());
    }
}

/// Records a controller of `resource`: the kind's own, or one named `name`.
fn record_controller(resource: &mut Resource, name: Option<&str>) {
    match name {
        None => resource.controller = true,
        Some(name) => {
            if !resource.controllers.iter().any(|c| c.name == name) {
                resource.controllers.push(NamedController {
                    name: name.to_owned(),
                });
            }
        }
    }
}
