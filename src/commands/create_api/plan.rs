//! A [`Request`] rendered into a plan: the kind's types and manifests, its controller, and PROJECT's record.

use super::*;

/// The controller test binary's root and helpers: written by the first controller, then only
/// inserted into.
pub(super) const SHARED_TEST_FILES: &[&str] = &[
    "operator/tests/controllers/main.rs",
    "operator/tests/controllers/support.rs",
];

/// The kind's CRD in `tree`, when this version joins a kind whose CRD exists and lacks it.
pub(super) fn crd_to_join(tree: &dyn Tree, request: &Request) -> anyhow::Result<Option<String>> {
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
pub(super) fn crd_path(names: &ResourceNames) -> PathBuf {
    PathBuf::from("config/crd/bases").join(names::crd_file(&names.qualified_group, &names.plural))
}

/// Whether a CRD file already lists `version`.
pub(super) fn crd_lists_version(crd: &str, version: &str) -> bool {
    serde_yaml::from_str::<serde_yaml::Value>(crd)
        .ok()
        .and_then(|value| value["spec"]["versions"].as_sequence().cloned())
        .is_some_and(|versions| versions.iter().any(|v| v["name"].as_str() == Some(version)))
}

/// The templates' paths: `{group}`, `{version}`, `{kind}`, `{crd}`, `{sample}` and `{rbac}`
/// stand for these names of the kind.
pub(super) struct Paths {
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
pub(super) fn policy(path: &str) -> Policy {
    if path.ends_with("/mod.rs")
        || path.ends_with("kustomization.yaml")
        || SHARED_TEST_FILES.contains(&path)
    {
        Policy::IfMissing
    } else {
        Policy::Owned
    }
}

pub(super) fn plan(
    project: &Project,
    request: &Request,
    crd_to_join: Option<&str>,
) -> anyhow::Result<Plan> {
    let context = context(project, request);
    let paths = Paths::new(&context);
    let mut plan = Plan::default();
    if request.resource {
        plan_api(&mut plan, &context, request, &paths, crd_to_join)?;
    }
    if request.controller {
        plan_controller(&mut plan, &context, request, &paths)?;
        plan.derived.push(rbac::derived_role(project));
    }
    Ok(plan)
}

/// The names and values the templates receive.
pub(super) fn context(project: &Project, request: &Request) -> Context {
    let names = &request.names;
    let crd_file = names::crd_file(&names.qualified_group, &names.plural);
    let sample_file = format!(
        "{}_{}_{}.yaml",
        names.group_dir, names.version, names.kind_file
    );
    let mut context = Context {
        names: names.clone(),
        project: names::ProjectNames::of(&project.project_name),
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
pub(super) fn image_context(context: &mut Context, options: &ImageOptions) {
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
pub(super) fn plan_api(
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
pub(super) fn plan_controller(
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
pub(super) fn overlay(files: &mut Vec<PlannedFile>, with: Vec<PlannedFile>) {
    for file in with {
        match files.iter_mut().find(|f| f.path == file.path) {
            Some(existing) => *existing = file,
            None => files.push(file),
        }
    }
}

/// The template context, with the versions the kind's CRD lists: all of them, or only the new
/// one when it joins an existing CRD file.
pub(super) fn context_with_versions(
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
pub(super) fn with_project(mut plan: Plan, project: &mut Project, request: &Request) -> Plan {
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
