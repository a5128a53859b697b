//! From flags and PROJECT to a [`Request`]: the kinds of webhook, the kind they serve, the spokes of a conversion, and their paths.

use super::*;

/// The webhooks the flags ask for, once the flags agree with each other.
pub(super) fn check_flags(args: &CreateWebhookArgs, project: &Project) -> anyhow::Result<Kinds> {
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
pub(super) struct Found<'a> {
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
pub(super) fn refuse_builtin(gvk: &str, kind: &Builtin, add: Kinds) -> anyhow::Result<()> {
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
pub(super) fn find_kind<'a>(
    args: &CreateWebhookArgs,
    project: &'a Project,
    add: Kinds,
) -> anyhow::Result<Found<'a>> {
    let qualified_group = names::qualified_group(&args.group, &project.domain);
    let mut gvk = names::Gvk::new(&qualified_group, &args.version, &args.kind).to_string();
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
        gvk = names::Gvk::builtin(kind).to_string();
        refuse_builtin(&gvk, kind, add)?;
    }
    let core_record = builtin.map(crate::commands::create_api::builtin_group);
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
pub(super) fn asked_spokes(
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
pub(super) fn refuse_existing(
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
        && let Some(other) = project.conversion_hub(&args.group, &args.kind, &args.version)
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
pub(super) struct Paths {
    defaulting: String,
    validation: String,
    custom_defaulting: Option<String>,
    custom_validation: Option<String>,
}

/// The paths of the kind's webhooks, refused when two would be one, or when another kind's
/// webhook has one.
pub(super) fn paths(
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
                    "the webhook path `{path}` is taken by {}",
                    other_names.gvk()
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

pub(super) fn resolve(args: &CreateWebhookArgs, project: &Project) -> anyhow::Result<Request> {
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
pub(super) fn resource_names(resource: &Resource, project: &Project) -> ResourceNames {
    resource.names(&project.domain)
}

/// A webhook path: an absolute URL path the manifests and the router share.
/// A path for a webhook, by the rule the marker it goes into is read with (`generate` reads
/// the same rule back): `/`, then DNS-1123 subdomains, as the API server requires.
pub(super) fn validate_path(path: &str, flag: &str) -> Result<(), UserError> {
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
