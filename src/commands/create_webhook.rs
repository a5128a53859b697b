//! `rsbuilder create webhook`: defaulting, validation and conversion webhooks for a kind, as
//! one module of the operator per kind and version, and, with the project's first webhook,
//! the config/ that serves them: the webhook Service, cert-manager's Issuer and Certificate,
//! the manager patch and the CA injection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use crate::apply::{self, Options};
use crate::cli::CreateWebhookArgs;
use crate::names::builtin::Builtin;
use crate::names::{self, ResourceNames};
use crate::project::{self, Project, Resource, ResourceWebhooks};
use crate::rbac;
use crate::scaffold::{self, Plan, Policy};
use crate::tree::OnDisk;
use crate::ui::{self, UserError};
use crate::webhook;

/// The kinds of webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Kinds {
    defaulting: bool,
    validation: bool,
    conversion: bool,
}

impl Kinds {
    fn any(self) -> bool {
        self.defaulting || self.validation || self.conversion
    }

    fn union(self, other: Self) -> Self {
        Self {
            defaulting: self.defaulting || other.defaulting,
            validation: self.validation || other.validation,
            conversion: self.conversion || other.conversion,
        }
    }

    /// The template sets of these kinds, in the order their insertions go in.
    fn sets(self) -> Vec<&'static str> {
        [
            (self.defaulting, "webhook-defaulting"),
            (self.validation, "webhook-validation"),
            (self.conversion, "webhook-conversion"),
        ]
        .into_iter()
        .filter_map(|(on, set)| on.then_some(set))
        .collect()
    }
}

/// What to scaffold, once flags and PROJECT agree.
struct Request {
    names: ResourceNames,
    namespaced: bool,
    /// What this command adds.
    add: Kinds,
    /// What the kind's module holds afterwards.
    all: Kinds,
    /// The versions converted to and from this one, once the command is done.
    spokes: Vec<String>,
    /// The spokes whose code this command writes: every spoke when it writes the conversion,
    /// the new ones when it extends a conversion the kind has.
    new_spokes: Vec<String>,
    defaulting_path: String,
    validation_path: String,
    /// The paths PROJECT records: those that differ from the computed ones.
    custom_defaulting_path: Option<String>,
    custom_validation_path: Option<String>,
    /// What the kind's webhook module holds before the command (PROJECT records it): it
    /// exists when it holds any webhook.
    had: Kinds,
    /// Whether no resource of the project has a webhook yet.
    first_in_project: bool,
    /// The kind of Kubernetes itself the webhooks admit, when they admit one.
    builtin: Option<&'static crate::names::builtin::Builtin>,
    force: bool,
}

/// Runs `create webhook` in the project around the current directory.
pub fn run(args: CreateWebhookArgs) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    let mut project = project::load(root)?;
    let mut request = resolve(&args, &project)?;
    keep_earlier_builtin_module(root, &mut request);
    let sources = rbac::read_sources(&OnDisk(root))?;
    let plan = plan(&project, &request, &sources)?;
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
    if request.builtin.is_some() {
        ui::warn(
            "a webhook on one of Kubernetes' own kinds also admits the operator's own objects of that kind; \
             while no replica serves it, `failurePolicy: Fail` can keep the manager itself from starting",
            Some(&format!(
                "narrow it in its `+rsbuilder:webhook` markers in {}, with a label selector such as \
                 `namespaceSelector=kubernetes.io/metadata.name!={}-system` or `objectSelector=...`, then `make manifests`",
                module_path(&request.names).display(),
                project.project_name
            )),
        );
    }
    if args.make {
        super::generate::generate(root, false).context(
            "the webhooks were scaffolded, but `--make` could not regenerate the manifests",
        )?;
    }
    ui::note(&format!(
        "\nNext:\n  implement the webhooks in {}, then `make manifests`\n  cargo test\n  \
         `make deploy` needs cert-manager in the cluster; `make run` serves no webhooks (ENABLE_WEBHOOKS=false)",
        module_path(&request.names).display()
    ));
    super::note_older_runtime(&project);
    Ok(())
}

/// A webhook of one of Kubernetes' own kinds that an earlier rsbuilder scaffolded lives in
/// `webhooks/<group>/` (`webhooks/apps/v1/deployment.rs`), before its module moved to
/// `webhooks/k8s_<group>/`: the webhook added to it goes where its others are.
fn keep_earlier_builtin_module(root: &Path, request: &mut Request) {
    let Some(kind) = request.builtin else {
        return;
    };
    let earlier = names::builtin_names_unprefixed(kind);
    if !root.join(module_path(&request.names)).exists()
        && root.join(module_path(&earlier)).is_file()
    {
        request.names.group_dir = earlier.group_dir;
        request.names.group_module = earlier.group_module;
    }
}

/// `operator/src/webhooks/<group>/<version>/<kind>.rs`.
fn module_path(names: &ResourceNames) -> PathBuf {
    PathBuf::from("operator/src/webhooks")
        .join(&names.group_dir)
        .join(&names.version)
        .join(format!("{}.rs", names.kind_file))
}

/// The webhooks the flags ask for, once the flags agree with each other.
fn check_flags(args: &CreateWebhookArgs, project: &Project) -> anyhow::Result<Kinds> {
    crate::plugins::check("create webhook", &args.plugins, false)?;
    names::validate_group(&args.group, &project.domain)?;
    names::validate_version(&args.version)?;
    names::validate_kind(&args.kind)?;
    let add = Kinds {
        defaulting: args.defaulting,
        validation: args.programmatic_validation,
        conversion: args.conversion,
    };
    if !add.any() {
        return Err(UserError::new(
            "nothing to scaffold: create webhook needs at least one of --defaulting, --programmatic-validation and --conversion",
        )
        .help(format!(
            "for example `rsbuilder create webhook --group {} --version {} --kind {} --defaulting --programmatic-validation`",
            names::group_flag(&args.group),
            args.version,
            args.kind
        ))
        .into());
    }
    for (path, flag, needs, given) in [
        (
            &args.defaulting_path,
            "--defaulting-path",
            "--defaulting",
            add.defaulting,
        ),
        (
            &args.validation_path,
            "--validation-path",
            "--programmatic-validation",
            add.validation,
        ),
    ] {
        if let Some(path) = path {
            if !given {
                return Err(UserError::new(format!(
                    "{flag} `{path}` can only be used with {needs}"
                ))
                .help(format!("add {needs}, or drop {flag}"))
                .into());
            }
            validate_path(path, flag)?;
        }
    }
    if !args.spoke.is_empty() && !add.conversion {
        return Err(UserError::new(format!(
            "--spoke {} can only be used with --conversion",
            args.spoke.join(",")
        ))
        .help("add --conversion, or drop --spoke")
        .into());
    }
    if add.conversion && args.spoke.is_empty() {
        return Err(UserError::new(
            "--conversion needs the versions to convert to and from the hub",
        )
        .help(format!(
            "pass --spoke with the kind's other versions, as in `--conversion --spoke v2` (the hub is --version {})",
            args.version
        ))
        .into());
    }

    Ok(add)
}

/// The kind the webhooks admit: one of PROJECT's, or one of Kubernetes' own.
struct Found<'a> {
    /// The kind's resource in PROJECT, when it has one.
    resource: Option<&'a Resource>,
    /// The kind of Kubernetes itself, when it is one.
    builtin: Option<&'static crate::names::builtin::Builtin>,
    /// The kind as messages show it: `example.com/v1, Kind=Application`.
    gvk: String,
    names: ResourceNames,
}

/// Refuses webhooks that Kubernetes' own kind `gvk` cannot have: admission of the
/// admission configurations, and conversion.
fn refuse_builtin(gvk: &str, kind: &Builtin, add: Kinds) -> anyhow::Result<()> {
    if kind.group == "admissionregistration.k8s.io" {
        return Err(UserError::new(format!(
            "the API server calls no admission webhook for {gvk}: objects of admissionregistration.k8s.io are never sent to webhooks, so that a webhook cannot lock the cluster out of fixing its webhooks"
        ))
        .help("check those objects in a controller instead: `rsbuilder create api --group admissionregistration --version v1 --kind <Kind> --resource=false`")
        .into());
    }
    if add.conversion {
        return Err(UserError::new(format!(
            "--conversion converts between the versions of a custom resource, and {gvk} is Kubernetes' own"
        ))
        .help("drop --conversion")
        .into());
    }
    Ok(())
}

/// Finds the kind that `--group`, `--version` and `--kind` name, refusing one that no webhook
/// can admit, and checks `--plural` against it.
fn find_kind<'a>(
    args: &CreateWebhookArgs,
    project: &'a Project,
    add: Kinds,
) -> anyhow::Result<Found<'a>> {
    let qualified_group = names::qualified_group(&args.group, &project.domain);
    let mut gvk = format!("{qualified_group}/{}, Kind={}", args.version, args.kind);
    let in_project = project
        .resources
        .iter()
        .find(|r| r.is(&args.group, &args.version, &args.kind) && r.api.is_some());
    // Kubernetes' own kinds need no API in PROJECT.
    let builtin = match in_project {
        Some(_) => None,
        None => names::builtin(&args.group, &args.version, &args.kind)?,
    };
    if let Some(kind) = builtin {
        gvk = format!(
            "{}/{}, Kind={}",
            names::group_shown(kind.group),
            kind.version,
            kind.kind
        );
        refuse_builtin(&gvk, kind, add)?;
    }
    let core_record = builtin.map(super::create_api::builtin_group);
    let resource = match (in_project, builtin, &core_record) {
        (Some(resource), _, _) => Some(resource),
        (None, Some(kind), Some((group, _))) => project.resources.iter().find(|r| {
            r.core && r.group == *group && r.version == kind.version && r.kind == kind.kind
        }),
        _ => None,
    };
    if in_project.is_none() && builtin.is_none() {
        return Err(UserError::new(format!("no API {gvk} in PROJECT"))
            .help(format!(
                "run `rsbuilder create api --group {} --version {} --kind {}` first",
                names::group_flag(&args.group),
                args.version,
                args.kind
            ))
            .into());
    };
    let names = match builtin {
        Some(kind) => names::builtin_names(kind),
        None => ResourceNames::new(
            &args.group,
            &args.version,
            &args.kind,
            resource.and_then(|r| r.plural.as_deref()),
            &project.domain,
        ),
    };
    if let Some(plural) = &args.plural
        && *plural != names.plural
    {
        return Err(UserError::new(format!(
            "invalid plural `{plural}`: {gvk} is `{}` in PROJECT",
            names.plural
        ))
        .help("drop --plural: the webhooks use the kind's resource name")
        .into());
    }

    Ok(Found {
        resource,
        builtin,
        gvk,
        names,
    })
}

/// The spokes `--spoke` names, each once, checked against the kind's versions: the hub must be
/// the storage version, and every spoke another version of the kind.
fn asked_spokes(
    args: &CreateWebhookArgs,
    project: &Project,
    add: Kinds,
) -> anyhow::Result<Vec<String>> {
    // The kind's versions with types, in the order they were created: the first is stored.
    let versions: Vec<&str> = project
        .resources
        .iter()
        .filter(|r| r.group == args.group && r.kind == args.kind && r.api.is_some())
        .map(|r| r.version.as_str())
        .collect();
    let mut spokes: Vec<String> = Vec::new();
    if add.conversion {
        if versions.len() < 2 {
            return Err(UserError::new(format!(
                "--conversion needs a second version of {}: it has only {}",
                args.kind, args.version
            ))
            .help(format!(
                "add one with `rsbuilder create api --group {} --version <v2> --kind {}`, then convert",
                names::group_flag(&args.group),
                args.kind
            ))
            .into());
        }
        if versions[0] != args.version {
            return Err(UserError::new(format!(
                "the hub of a conversion must be the storage version of {}, {}, not {}",
                args.kind, versions[0], args.version
            ))
            .help(format!(
                "pass --version {} and list the other versions with --spoke",
                versions[0]
            ))
            .into());
        }
        for spoke in &args.spoke {
            if *spoke == args.version || !versions.contains(&spoke.as_str()) {
                return Err(UserError::new(format!(
                    "invalid spoke version `{spoke}`: the other versions of {} are {}",
                    args.kind,
                    versions[1..].join(", ")
                ))
                .help("pass --spoke with versions that `create api` made for this kind")
                .into());
            }
            if !spokes.contains(spoke) {
                spokes.push(spoke.clone());
            }
        }
    }
    Ok(spokes)
}

/// Refuses, unless `--force`, a defaulting or validating webhook the kind has already, and,
/// whatever `--force` says, a conversion through another hub.
fn refuse_existing(
    args: &CreateWebhookArgs,
    project: &Project,
    (add, had): (Kinds, Kinds),
    gvk: &str,
    names: &ResourceNames,
) -> anyhow::Result<()> {
    if !args.force {
        for (adding, present, what) in [
            (add.defaulting, had.defaulting, "defaulting"),
            (add.validation, had.validation, "validation"),
        ] {
            if adding && present {
                return Err(
                    UserError::new(format!("a {what} webhook for {gvk} already exists"))
                        .help(format!(
                            "pass --force to scaffold it again, overwriting {}",
                            module_path(names).display()
                        ))
                        .into(),
                );
            }
        }
    }
    if add.conversion
        && let Some(other) = project.resources.iter().find(|r| {
            r.group == args.group
                && r.kind == args.kind
                && r.version != args.version
                && r.webhooks.as_ref().is_some_and(|w| w.conversion)
        })
    {
        return Err(UserError::new(format!(
            "{} converts through version {} already",
            args.kind, other.version
        ))
        .help("a kind has one hub: convert from it")
        .into());
    }
    Ok(())
}

/// The webhooks' paths: the flags', or those PROJECT records, or kubebuilder's; `custom` are
/// those that PROJECT records.
struct Paths {
    defaulting: String,
    validation: String,
    custom_defaulting: Option<String>,
    custom_validation: Option<String>,
}

/// The paths of the kind's webhooks, refused when two would be one, or when another kind's
/// webhook has one.
fn paths(
    args: &CreateWebhookArgs,
    project: &Project,
    resource: Option<&Resource>,
    existing: &ResourceWebhooks,
    (add, all): (Kinds, Kinds),
    names: &ResourceNames,
) -> anyhow::Result<Paths> {
    let custom_defaulting_path = args
        .defaulting_path
        .clone()
        .or_else(|| existing.defaulting_path.clone().filter(|_| !add.defaulting));
    let custom_validation_path = args
        .validation_path
        .clone()
        .or_else(|| existing.validation_path.clone().filter(|_| !add.validation));
    let defaulting_path = custom_defaulting_path
        .clone()
        .unwrap_or_else(|| names::webhook_path("mutate", names));
    let validation_path = custom_validation_path
        .clone()
        .unwrap_or_else(|| names::webhook_path("validate", names));
    if all.defaulting && all.validation && defaulting_path == validation_path {
        return Err(UserError::new(format!(
            "the defaulting and the validating webhook would share the path `{defaulting_path}`"
        ))
        .help("give --defaulting-path and --validation-path different values")
        .into());
    }
    // Paths other resources' webhooks use.
    for other in project
        .resources
        .iter()
        .filter(|r| !resource.is_some_and(|this| std::ptr::eq(this, *r)))
        .filter(|r| !r.is(&args.group, &args.version, &args.kind))
    {
        let Some(theirs) = &other.webhooks else {
            continue;
        };
        let other_names = resource_names(other, project);
        let taken = [
            theirs.defaulting.then(|| {
                theirs
                    .defaulting_path
                    .clone()
                    .unwrap_or_else(|| names::webhook_path("mutate", &other_names))
            }),
            theirs.validation.then(|| {
                theirs
                    .validation_path
                    .clone()
                    .unwrap_or_else(|| names::webhook_path("validate", &other_names))
            }),
        ];
        for path in taken.into_iter().flatten() {
            let mine = [
                add.defaulting.then_some(&defaulting_path),
                add.validation.then_some(&validation_path),
            ];
            if mine.into_iter().flatten().any(|p| *p == path) {
                return Err(UserError::new(format!(
                    "the webhook path `{path}` is taken by {}/{}, Kind={}",
                    other_names.qualified_group, other.version, other.kind
                ))
                .help("pass another --defaulting-path or --validation-path")
                .into());
            }
        }
    }
    Ok(Paths {
        defaulting: defaulting_path,
        validation: validation_path,
        custom_defaulting: custom_defaulting_path,
        custom_validation: custom_validation_path,
    })
}

fn resolve(args: &CreateWebhookArgs, project: &Project) -> anyhow::Result<Request> {
    let add = check_flags(args, project)?;
    let Found {
        resource,
        builtin,
        gvk,
        names,
    } = find_kind(args, project, add)?;
    let mut spokes = asked_spokes(args, project, add)?;
    let existing = resource
        .and_then(|r| r.webhooks.clone())
        .unwrap_or_default();
    let had = Kinds {
        defaulting: existing.defaulting,
        validation: existing.validation,
        conversion: existing.conversion,
    };
    // A conversion that exists takes new spokes at its markers; its spokes are never dropped,
    // `--force` or not.
    let mut new_spokes = spokes.clone();
    if add.conversion && had.conversion {
        new_spokes.retain(|spoke| !existing.spoke.contains(spoke));
        if new_spokes.is_empty() && !args.force {
            return Err(UserError::new(format!(
                "a conversion webhook for {gvk} already exists, with the spokes {}",
                existing.spoke.join(", ")
            ))
            .help(format!(
                "pass --spoke with a version it does not convert yet, or --force to scaffold {} again",
                module_path(&names).display()
            ))
            .into());
        }
        let mut all_spokes = existing.spoke.clone();
        all_spokes.extend(new_spokes.iter().cloned());
        spokes = all_spokes;
        if args.force {
            new_spokes.clone_from(&spokes);
        }
    }
    refuse_existing(args, project, (add, had), &gvk, &names)?;
    let all = had.union(add);
    // A module written again keeps the conversion it had.
    if !add.conversion {
        spokes.clone_from(&existing.spoke);
        new_spokes.clone_from(&spokes);
    }

    let paths = paths(args, project, resource, &existing, (add, all), &names)?;
    let first_in_project = project.resources.iter().all(|r| r.webhooks.is_none());
    Ok(Request {
        namespaced: match builtin {
            Some(kind) => kind.namespaced,
            None => resource
                .and_then(|r| r.api.as_ref())
                .is_some_and(|api| api.namespaced),
        },
        builtin,
        names,
        add,
        all,
        spokes,
        new_spokes,
        defaulting_path: paths.defaulting,
        validation_path: paths.validation,
        custom_defaulting_path: paths.custom_defaulting,
        custom_validation_path: paths.custom_validation,
        had,
        first_in_project,
        force: args.force,
    })
}

/// The names of a resource of PROJECT: a kind of the project's, or one of Kubernetes' own.
fn resource_names(resource: &Resource, project: &Project) -> ResourceNames {
    resource.names(&project.domain)
}

/// A webhook path: an absolute URL path the manifests and the router share.
/// A path for a webhook, by the rule the marker it goes into is read with (`generate` reads
/// the same rule back): `/`, then DNS-1123 subdomains, as the API server requires.
fn validate_path(path: &str, flag: &str) -> Result<(), UserError> {
    let valid = path.len() > 1
        && path.len() <= 253
        && crate::webhook::checked_path(path).is_ok()
        && path != CONVERT_PATH;
    if valid {
        Ok(())
    } else {
        Err(UserError::new(format!(
            "invalid {flag} `{}`: must be `/` then segments of lowercase letters, digits, `-` and `.` (each starting and ending with a letter or digit, as the API server requires), other than /convert",
            crate::ui::shown(path)
        ))
        .help(format!("pass something like `{flag}=/custom-mutate-application`")))
    }
}

/// The path of conversion reviews, which the runtime serves for every kind.
const CONVERT_PATH: &str = "/convert";

/// What the templates of `create webhook` receive.
#[derive(Debug, Serialize)]
struct Context {
    #[serde(flatten)]
    names: ResourceNames,
    project_name: String,
    crate_ident: String,
    api_crate_ident: String,
    namespaced: bool,
    defaulting_path: String,
    validation_path: String,
    mutating_name: String,
    validating_name: String,
    /// For one of Kubernetes' own kinds, its module under `k8s_openapi::api`.
    builtin_module: Option<String>,
}

fn plan(
    project: &Project,
    request: &Request,
    sources: &BTreeMap<PathBuf, String>,
) -> anyhow::Result<Plan> {
    let names = &request.names;
    let module = module_path(names);
    let context = tera::Context::from_serialize(context(project, request, sources, &module)?)?;
    let paths: [(&str, &str); 4] = [
        ("group", &names.group_dir),
        ("version", &names.version),
        ("kind", &names.kind_file),
        ("plural", &names.plural),
    ];
    let policy = |path: &str| {
        if Path::new(path) == module || path.starts_with("config/crd/patches/") {
            Policy::Owned
        } else {
            Policy::IfMissing
        }
    };

    let mut plan = Plan::default();
    // The module is written whole when it is new, or again with --force; otherwise the new
    // webhooks are inserted into it.
    let rewrite = !request.had.any() || request.force;
    let mut files = scaffold::render_set("webhook", &context, &paths, policy)?;
    if !rewrite {
        files.retain(|file| file.path != module);
    }
    plan.files.extend(files);
    plan.insertions
        .extend(scaffold::render_insertions("webhook", &context, &paths)?);
    if request.first_in_project {
        plan.files.extend(scaffold::render_set(
            "webhook-project",
            &context,
            &paths,
            policy,
        )?);
        plan.insertions.extend(scaffold::render_insertions(
            "webhook-project",
            &context,
            &paths,
        )?);
    }
    plan_kinds(&mut plan, request, rewrite, &context, &paths, policy)?;
    plan.derived.push(webhook::derived_manifests());
    Ok(plan)
}

/// What the templates receive. kubebuilder's names (`mbar-v1.kb.io`) omit the group: the same
/// kind in another group takes the group into its names.
fn context(
    project: &Project,
    request: &Request,
    sources: &BTreeMap<PathBuf, String>,
    module: &Path,
) -> anyhow::Result<Context> {
    let names = &request.names;
    let taken: Vec<String> = crate::webhook::markers_from_sources(
        sources
            .iter()
            .filter(|(path, _)| path.as_path() != module)
            .map(|(path, text)| (path.as_path(), text.as_str())),
    )?
    .iter()
    .map(|marker| marker.name().to_owned())
    .collect();
    let webhook_name = |prefix| names::webhook_name(prefix, names, &taken);
    Ok(Context {
        names: names.clone(),
        project_name: project.project_name.clone(),
        crate_ident: names::crate_ident(&project.project_name),
        api_crate_ident: names::crate_ident(&format!("{}-api", project.project_name)),
        namespaced: request.namespaced,
        defaulting_path: request.defaulting_path.clone(),
        validation_path: request.validation_path.clone(),
        mutating_name: webhook_name('m'),
        validating_name: webhook_name('v'),
        builtin_module: request.builtin.map(|kind| kind.module.to_owned()),
    })
}

/// The code of each kind of webhook the module gets, and of each spoke of its conversion. A
/// conversion that exists only takes spokes, at its markers: its own code is there, and a
/// module written before it had markers must get a missing marker, not a second conversion.
fn plan_kinds(
    plan: &mut Plan,
    request: &Request,
    rewrite: bool,
    context: &tera::Context,
    paths: &[(&str, &str)],
    policy: impl Fn(&str) -> Policy + Copy,
) -> anyhow::Result<()> {
    let kinds = if rewrite { request.all } else { request.add };
    let extending = !rewrite && request.add.conversion && request.had.conversion;
    for set in kinds.sets() {
        if set == "webhook-conversion" && extending {
            continue;
        }
        if set == "webhook-conversion" {
            plan.files
                .extend(scaffold::render_set(set, context, paths, policy)?);
        }
        plan.insertions
            .extend(scaffold::render_insertions(set, context, paths)?);
    }
    // Each spoke at the conversion's markers, after the conversion that has them.
    if request.all.conversion && (rewrite || request.add.conversion) {
        for spoke in &request.new_spokes {
            let mut context = context.clone();
            context.insert("spoke", spoke);
            plan.insertions.extend(scaffold::render_insertions(
                "webhook-spoke",
                &context,
                paths,
            )?);
        }
    }
    Ok(())
}

/// Records the webhooks in PROJECT and adds PROJECT to the plan, to be written last.
fn with_project(mut plan: Plan, project: &mut Project, request: &Request) -> Plan {
    let names = &request.names;
    let (group, version, kind) = match request.builtin {
        Some(builtin) => {
            let (group, domain) = super::create_api::builtin_group(builtin);
            if !project
                .resources
                .iter()
                .any(|r| r.core && r.is(&group, builtin.version, builtin.kind))
            {
                project.resources.push(Resource {
                    api: None,
                    controller: false,
                    controllers: Vec::new(),
                    core: true,
                    domain,
                    group: group.clone(),
                    kind: builtin.kind.to_owned(),
                    plural: None,
                    version: builtin.version.to_owned(),
                    webhooks: None,
                    extra: Default::default(),
                });
            }
            (group, builtin.version.to_owned(), builtin.kind.to_owned())
        }
        None => (
            names.group.clone(),
            names.version.clone(),
            names.kind.clone(),
        ),
    };
    if let Some(resource) = project
        .resources
        .iter_mut()
        .find(|r| r.core == request.builtin.is_some() && r.is(&group, &version, &kind))
    {
        let all = request.all;
        resource.webhooks = Some(ResourceWebhooks {
            conversion: all.conversion,
            defaulting: all.defaulting,
            defaulting_path: request
                .custom_defaulting_path
                .clone()
                .filter(|_| all.defaulting),
            spoke: if all.conversion {
                request.spokes.clone()
            } else {
                Vec::new()
            },
            validation: all.validation,
            validation_path: request
                .custom_validation_path
                .clone()
                .filter(|_| all.validation),
            webhook_version: "v1".into(),
        });
    }
    plan.files.push(project.planned());
    plan
}
