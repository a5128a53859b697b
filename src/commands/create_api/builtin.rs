//! A controller for one of Kubernetes' own kinds.

use super::*;

/// A controller for one of Kubernetes' own kinds: `--resource=false` with a group of
/// Kubernetes (`apps`, `core`, `networking`) and no such API in PROJECT.
pub(super) fn resolve_builtin(
    args: &CreateApiArgs,
    project: &Project,
) -> anyhow::Result<Option<Request>> {
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
    let gvk = names::Gvk::builtin(kind).to_string();
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
pub(super) fn refuse_builtin_flags(
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
pub(super) fn refuse_shared_modules(
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
        let other_names = other.names(&other.domain);
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
                &other_names.gvk().to_string(),
            ));
        }
    }
    Ok(())
}

/// Refuses a controller named as the controller of one of Kubernetes' own kinds is: the
/// project's `apps` Deployment and Kubernetes' both default to `apps-deployment`.
pub(super) fn refuse_builtin_controller_name(
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
                &format!("Kubernetes' {}", other.gvk()),
            ));
        }
    }
    Ok(())
}

/// Two controllers of one manager must not share a name: it labels their metrics, reports
/// their events and manages their fields.
pub(super) fn same_controller_name(gvk: &str, name: &str, other: &str) -> anyhow::Error {
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
