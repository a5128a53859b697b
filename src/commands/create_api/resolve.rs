//! From flags, prompts and PROJECT to a [`Request`]: names derived and checked, clashes refused, the parts to scaffold decided.

use super::*;

/// Short names Kubernetes' own resources use; a kind must not shadow them.
pub(super) const BUILTIN_SHORT_NAMES: &[&str] = &[
    "cm", "cj", "crd", "crds", "cs", "csr", "deploy", "ds", "ep", "eps", "ev", "hpa", "ing",
    "limits", "netpol", "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa",
    "sc", "sts", "svc", "va",
];

pub(super) fn resolve(args: &CreateApiArgs, project: &Project) -> anyhow::Result<Request> {
    let args = &with_recorded(args, project);
    validate_names(args, project)?;
    let image = deploy_image::resolve(args)?;
    refuse_flags_that_disagree(args)?;
    if image.is_none()
        && let Some(request) = resolve_builtin(args, project)?
    {
        return Ok(request);
    }
    warn_of_a_kubernetes_kind(args, project);

    let family = Family::of(args, project);
    let (namespaced, plural) = inherit_scope_and_plural(args, project, &family)?;
    let mut names = derive_names(args, project, plural.as_deref())?;
    let gvk = names.gvk().to_string();
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

/// Checks the names the flags give: the group, version and kind, the plural, and the
/// controller's name, which needs a controller.
fn validate_names(args: &CreateApiArgs, project: &Project) -> anyhow::Result<()> {
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
    Ok(())
}

/// Warns that a kind named as one of Kubernetes' own becomes a CRD of the project's group, not
/// a controller of Kubernetes' kind (which `--resource=false` makes).
fn warn_of_a_kubernetes_kind(args: &CreateApiArgs, project: &Project) {
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
}

/// With `--force`, a kind scaffolded again keeps what PROJECT recorded of it unless a flag
/// says otherwise: server-side apply (as kubebuilder keeps it), and the image it runs with its
/// options. Without them, PROJECT would keep records the new files no longer follow.
pub(super) fn with_recorded(args: &CreateApiArgs, project: &Project) -> CreateApiArgs {
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
pub(super) fn refuse_flags_that_disagree(args: &CreateApiArgs) -> anyhow::Result<()> {
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
pub(super) struct Family<'a> {
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
pub(super) fn inherit_scope_and_plural(
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
                "{} would be {}, but version {} of it is {}",
                names::Gvk::new(
                    &names::qualified_group(&args.group, &project.domain),
                    &args.version,
                    &args.kind
                ),
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
pub(super) fn derive_names(
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
pub(super) fn check_clashes(
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
        let other_names = other.names(&project.domain);
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
pub(super) fn refuse_same_group_clash(
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
pub(super) fn shared_controller_module(
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
pub(super) fn pick_short_name(names: &mut ResourceNames, taken: &[String]) {
    names.short_name = [names.short_name.take(), Some(names.kind_lower.clone())]
        .into_iter()
        .flatten()
        .find(|candidate| !taken.contains(candidate));
}

/// Whether to scaffold the types and the controller: from the flags, or the answers on a
/// terminal, after refusing what exists.
pub(super) fn decide_parts(
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
        &names.gvk().group_kind(),
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
        existing.refuse(&names.gvk().group_kind())?;
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
        existing.refuse(&names.gvk().group_kind())?;
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
pub(super) fn nothing_to_scaffold(
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
pub(super) enum Existing {
    /// None: the controller asked for can be scaffolded.
    None,
    /// The controller asked for exists, under this name (`None` for the kind's own).
    Same(Option<String>),
    /// No name was given, and the kind has these controllers: a second one needs a name.
    Others(Vec<String>),
}

impl Existing {
    /// The refusal, unless nothing collides; `kind` names the kind as the message shows it.
    pub(super) fn refuse(&self, kind: &str) -> anyhow::Result<()> {
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
pub(super) fn refuse_respelled_controller(
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
pub(super) fn existing_controller(
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

/// A yes/no flag: its value when given; else the answer to `question` on a terminal; else
/// `default`, so that scripts and CI never wait for input.
pub(super) fn ask(flag: Option<bool>, question: &str, default: bool) -> anyhow::Result<bool> {
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
