//! `rsbuilder create api`: a kind's Rust types, CRD, sample and RBAC roles, and a controller
//! for it, wired into the files `init` made.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use crate::apply::{self, Options};
use crate::cli::CreateApiArgs;
use crate::names::{self, ResourceNames};
use crate::project::{self, Project, Resource, ResourceApi};
use crate::rbac;
use crate::scaffold::{self, Plan, PlannedFile, Policy};
use crate::ui::{self, UserError};

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
    storage: bool,
    versions: Vec<CrdVersion>,
    crd_file: String,
    sample_file: String,
    kind_yaml: String,
    plural_yaml: String,
    singular_yaml: String,
    short_name_yaml: String,
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
}

impl Request {
    /// Whether this version is the kind's storage version (its first one).
    fn storage(&self) -> bool {
        self.versions.first() == Some(&self.names.version)
    }
}

/// Runs `create api` in the project around the current directory.
pub fn run(args: CreateApiArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let root = project::find_root(&cwd)?;
    let mut project = project::load(&root)?;
    let request = resolve(&args, &project)?;
    let plan = plan(&root, &project, &request)?;
    let plan = with_project(plan, &mut project, &request);
    apply::apply(
        &root,
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
        super::generate::generate(&root, false)?;
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
            names.group_dir, names.kind_file
        ));
    }
    next.push_str("  cargo test && make install run");
    ui::note(&next);
    Ok(())
}

fn resolve(args: &CreateApiArgs, project: &Project) -> anyhow::Result<Request> {
    names::validate_group(&args.group, &project.domain)?;
    names::validate_version(&args.version)?;
    names::validate_kind(&args.kind)?;
    if let Some(plural) = &args.plural {
        names::validate_plural(plural)?;
    }

    let same_kind: Vec<&Resource> = project
        .resources
        .iter()
        .filter(|r| r.group == args.group && r.kind == args.kind)
        .collect();
    let typed_versions: Vec<&Resource> = same_kind
        .iter()
        .copied()
        .filter(|r| r.api.is_some())
        .collect();
    // Versions of one kind share one CRD: the same plural and scope.
    let kind_plural = typed_versions.iter().find_map(|r| r.plural.clone());
    let plural = match (&args.plural, &kind_plural, typed_versions.is_empty()) {
        (Some(given), _, false)
            if Some(given) != kind_plural.as_ref()
                && !(kind_plural.is_none() && *given == names::plural::plural(&args.kind)) =>
        {
            return Err(UserError::new(format!(
                "invalid plural `{given}`: the other versions of {} call it `{}`",
                args.kind,
                kind_plural
                    .clone()
                    .unwrap_or_else(|| names::plural::plural(&args.kind))
            ))
            .help("drop --plural: the versions of a kind share one resource name")
            .into());
        }
        (Some(given), _, _) => Some(given.clone()),
        (None, Some(existing), _) => Some(existing.clone()),
        (None, None, _) => None,
    };
    let names = ResourceNames::new(
        &args.group,
        &args.version,
        &args.kind,
        plural.as_deref(),
        &project.domain,
    );
    names::validate_plural(&names.plural)?;
    let gvk = format!(
        "{}/{}, Kind={}",
        names.qualified_group, names.version, names.kind
    );

    if let Some(other) = typed_versions.iter().find(|r| {
        r.api
            .as_ref()
            .is_some_and(|api| api.namespaced != args.namespaced)
    }) {
        let scope = |namespaced: bool| {
            if namespaced {
                "namespaced"
            } else {
                "cluster-scoped"
            }
        };
        return Err(UserError::new(format!(
            "{gvk} would be {}, but version {} of it is {}",
            scope(args.namespaced),
            other.version,
            scope(!args.namespaced)
        ))
        .help(format!(
            "pass `--namespaced={}`: the versions of a kind share one scope",
            !args.namespaced
        ))
        .into());
    }
    for other in project
        .resources
        .iter()
        .filter(|r| r.group == args.group && r.kind != args.kind)
    {
        let other_names = ResourceNames::new(
            &other.group,
            &other.version,
            &other.kind,
            other.plural.as_deref(),
            &project.domain,
        );
        if other_names.kind_file == names.kind_file || other_names.plural == names.plural {
            return Err(UserError::new(format!(
                "{gvk} clashes with kind {} of the same group: both would be named `{}` or `{}`",
                other.kind, names.kind_file, names.plural
            ))
            .help("pick another kind, or pass a different --plural")
            .into());
        }
    }

    let existing = same_kind.iter().find(|r| r.version == args.version);
    let kind_has_controller = same_kind.iter().any(|r| r.controller);
    let resource = ask(args.resource, "Create Resource", true)?;
    let controller = ask(
        args.controller,
        "Create Controller",
        !kind_has_controller || args.force,
    )?;

    if !resource && !controller {
        return Err(UserError::new(
            "nothing to scaffold: both --resource and --controller are false",
        )
        .help("pass --resource, --controller or both")
        .into());
    }
    if resource && existing.is_some_and(|r| r.api.is_some()) && !args.force {
        return Err(UserError::new(format!("API {gvk} already exists"))
            .help("pass --force to scaffold it again")
            .into());
    }
    if controller && kind_has_controller && !args.force {
        return Err(UserError::new(format!(
            "a controller for {} Kind={} already exists",
            names.qualified_group, names.kind
        ))
        .help("pass --controller=false, or --force to scaffold it again")
        .into());
    }
    if controller && !resource && typed_versions.iter().all(|r| r.version != args.version) {
        return Err(UserError::new(format!(
            "no API {gvk} in PROJECT: the controller needs its types"
        ))
        .help("run `rsbuilder create api` with --resource first")
        .into());
    }

    let mut versions: Vec<String> = typed_versions.iter().map(|r| r.version.clone()).collect();
    let joins_kind = resource && !versions.is_empty() && !versions.contains(&args.version);
    if resource && !versions.contains(&args.version) {
        versions.push(args.version.clone());
    }
    Ok(Request {
        names,
        resource,
        controller,
        namespaced: args.namespaced,
        versions,
        joins_kind,
    })
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
    dialoguer::Confirm::new()
        .with_prompt(question)
        .default(default)
        .interact()
        .context("failed to read the answer")
}

fn plan(root: &Path, project: &Project, request: &Request) -> anyhow::Result<Plan> {
    let names = &request.names;
    let crd_file = format!("{}_{}.yaml", names.qualified_group, names.plural);
    let sample_file = format!(
        "{}_{}_{}.yaml",
        names.group_dir, names.version, names.kind_file
    );
    let context = Context {
        names: names.clone(),
        project_name: project.project_name.clone(),
        crate_ident: names::crate_ident(&project.project_name),
        api_crate_ident: names::crate_ident(&format!("{}-api", project.project_name)),
        namespaced: request.namespaced,
        storage: request.storage(),
        versions: Vec::new(),
        kind_yaml: yaml_scalar(&names.kind),
        plural_yaml: yaml_scalar(&names.plural),
        singular_yaml: yaml_scalar(&names.kind_lower),
        short_name_yaml: yaml_scalar(&names.short_name),
        crd_file: crd_file.clone(),
        sample_file: sample_file.clone(),
    };
    let crd_stem = crd_file.trim_end_matches(".yaml").to_owned();
    let sample_stem = sample_file.trim_end_matches(".yaml").to_owned();
    let paths: [(&str, &str); 6] = [
        ("group", &names.group_dir),
        ("version", &names.version),
        ("kind", &names.kind_file),
        ("crd", &crd_stem),
        ("sample", &sample_stem),
        ("rbac", &names.file_prefix),
    ];
    let shared = |path: &str| {
        if path.ends_with("/mod.rs") || path.ends_with("kustomization.yaml") {
            Policy::IfMissing
        } else {
            Policy::Owned
        }
    };

    let mut plan = Plan::default();
    if request.resource {
        let crd_path = PathBuf::from("config/crd/bases").join(&crd_file);
        let existing_crd = std::fs::read_to_string(root.join(&crd_path))
            .ok()
            .filter(|_| request.joins_kind);
        let crd_context = context_with_versions(&context, request, existing_crd.is_some())?;
        let mut files = scaffold::render_set("api", &crd_context, &paths, shared)?;
        // A new version of a kind whose CRD exists joins that CRD, which may hold schema
        // changes `generate` made: only its own version block is added.
        if let Some(existing) = existing_crd {
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
            .extend(scaffold::render_insertions("api", &crd_context, &paths)?);
    }
    if request.controller {
        let controller_context = tera::Context::from_serialize(&context)?;
        plan.files.extend(scaffold::render_set(
            "controller",
            &controller_context,
            &paths,
            shared,
        )?);
        plan.insertions.extend(scaffold::render_insertions(
            "controller",
            &controller_context,
            &paths,
        )?);
        plan.files.push(role(root, project, &plan.files)?);
    }
    Ok(plan)
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

/// `config/rbac/role.yaml` from the RBAC markers of `operator/src`, as this plan leaves it.
fn role(root: &Path, project: &Project, planned: &[PlannedFile]) -> anyhow::Result<PlannedFile> {
    let mut sources: std::collections::BTreeMap<PathBuf, String> =
        std::collections::BTreeMap::new();
    let src = root.join("operator/src");
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.with_context(|| format!("failed to read `{}`", src.display()))?;
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "rs") {
            let relative = entry
                .path()
                .strip_prefix(root)
                .unwrap_or(entry.path())
                .to_path_buf();
            let text = std::fs::read_to_string(entry.path())
                .with_context(|| format!("failed to read `{}`", relative.display()))?;
            sources.insert(relative, text);
        }
    }
    for file in planned {
        if file.path.starts_with("operator/src") && file.path.extension().is_some_and(|e| e == "rs")
        {
            sources.insert(file.path.clone(), file.contents.clone());
        }
    }
    let mut markers = Vec::new();
    for (path, text) in &sources {
        markers.extend(rbac::markers(path, text)?);
    }
    Ok(PlannedFile {
        path: rbac::ROLE_FILE.into(),
        contents: rbac::role_yaml(&markers, project.namespaced),
        policy: Policy::Regenerated,
    })
}

/// Adds the resource to PROJECT and PROJECT to the plan, to be written last.
fn with_project(mut plan: Plan, project: &mut Project, request: &Request) -> Plan {
    let names = &request.names;
    let plural = names.plural_overridden.then(|| names.plural.clone());
    let index = project
        .resources
        .iter()
        .position(|r| r.is(&names.group, &names.version, &names.kind));
    let entry = match index {
        Some(index) => &mut project.resources[index],
        None => {
            project.resources.push(Resource {
                api: None,
                controller: false,
                domain: project.domain.clone(),
                group: names.group.clone(),
                kind: names.kind.clone(),
                plural: None,
                version: names.version.clone(),
            });
            project.resources.last_mut().expect("just pushed")
        }
    };
    if request.resource {
        entry.api = Some(ResourceApi {
            crd_version: "v1".into(),
            namespaced: request.namespaced,
        });
        entry.plural = plural;
    }
    if request.controller {
        entry.controller = true;
    }
    plan.files.push(PlannedFile {
        path: project::FILE.into(),
        contents: project.to_yaml(),
        policy: Policy::Regenerated,
    });
    plan
}

/// `value` as serde_yaml writes it, so that templates reproduce crdgen's output byte for byte.
fn yaml_scalar(value: &str) -> String {
    serde_yaml::to_string(value)
        .map(|text| text.trim_end().to_owned())
        .unwrap_or_else(|_| value.to_owned())
}
