//! A [`Request`] rendered into a plan: the webhook module, its registration, the config/ of the first webhook, and PROJECT's record.

use super::*;

/// The path of conversion reviews, which the runtime serves for every kind.
pub(super) const CONVERT_PATH: &str = "/convert";

/// What the templates of `create webhook` receive.
#[derive(Debug, Serialize)]
pub(super) struct Context {
    #[serde(flatten)]
    names: ResourceNames,
    #[serde(flatten)]
    project: names::ProjectNames,
    namespaced: bool,
    defaulting_path: String,
    validation_path: String,
    mutating_name: String,
    validating_name: String,
    /// For one of Kubernetes' own kinds, its module under `k8s_openapi::api`.
    builtin_module: Option<String>,
}

pub(super) fn plan(
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
pub(super) fn context(
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
        project: names::ProjectNames::of(&project.project_name),
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
pub(super) fn plan_kinds(
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
pub(super) fn with_project(mut plan: Plan, project: &mut Project, request: &Request) -> Plan {
    let names = &request.names;
    let (group, version, kind) = match request.builtin {
        Some(builtin) => {
            let (group, domain) = crate::commands::create_api::builtin_group(builtin);
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
