//! `rsbuilder init`: a new operator project in the current directory.

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::apply::{self, Options};
use crate::cli::{InitArgs, License};
use crate::lockfile;
use crate::names;
use crate::project::{self, Project};
use crate::rbac;
use crate::runtime;
use crate::scaffold::{self, Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};
use crate::versions;

/// Files and folders whose presence means a project is already here.
const PROJECT_MARKERS: &[&str] = &["PROJECT", "Makefile", "Cargo.toml", "operator"];

/// The version a new project's crates start at.
const PROJECT_VERSION: &str = "0.1.0";

/// Generated files that are often the user's own already; an existing one is kept.
const USER_FILES: &[&str] = &["README.md", ".gitignore", ".dockerignore", "Cargo.lock"];

/// What the templates of `init` receive: every name already derived.
#[derive(Debug, Serialize)]
struct Context {
    project_name: String,
    crate_ident: String,
    api_crate: String,
    api_crate_ident: String,
    domain: String,
    repo: Option<String>,
    owner: Option<String>,
    license: Option<&'static str>,
    namespaced: bool,
    leader_election_id: String,
    rsbuilder_version: &'static str,
    kube_version: &'static str,
    k8s_openapi_version: &'static str,
    k8s_openapi_feature: &'static str,
    kubernetes_version: &'static str,
    rust_version: &'static str,
    runtime_version: String,
    /// `rsbuilder-runtime`'s value in `[workspace.dependencies]`.
    runtime_dependency: String,
    /// Whether the project holds the runtime in `runtime/`.
    runtime_vendored: bool,
    /// The version of the project's own crates.
    project_version: &'static str,
}

impl Context {
    /// Every name the templates use, derived from the project's name, domain and settings.
    fn new(project_name: String, domain: &str, repo: Option<String>, settings: &Settings) -> Self {
        Self {
            crate_ident: names::crate_ident(&project_name),
            api_crate: names::api_crate(&project_name),
            api_crate_ident: names::api_crate_ident(&project_name),
            leader_election_id: names::leader_election_id(&project_name, domain),
            project_name,
            domain: domain.to_owned(),
            repo,
            owner: settings.owner.clone(),
            license: settings.license,
            namespaced: settings.namespaced,
            rsbuilder_version: versions::RSBUILDER,
            kube_version: versions::KUBE,
            k8s_openapi_version: versions::K8S_OPENAPI,
            k8s_openapi_feature: versions::K8S_OPENAPI_FEATURE,
            kubernetes_version: versions::KUBERNETES,
            rust_version: versions::RUST,
            runtime_version: runtime::version(),
            runtime_dependency: settings.runtime.dependency(&runtime::version()),
            runtime_vendored: settings.runtime.is_vendored(),
            project_version: PROJECT_VERSION,
        }
    }
}

/// Runs `init` in the current directory.
pub fn run(args: InitArgs) -> anyhow::Result<()> {
    let root = std::env::current_dir().context("failed to read the current directory")?;
    // One command at a time plans and writes a project.
    let _lock = apply::lock(&root)?;
    refuse_nested_project(&root)?;
    let (context, mut project) = resolve(&args, &root)?;
    if args.force {
        refuse_project_with_apis(&root)?;
        // The plugins' files stay: so do their records, which later commands follow.
        if root.join(project::FILE).is_file() {
            let existing = project::load(&root)?;
            project.helm = existing.helm;
            project.grafana = existing.grafana;
            project.autoupdate = existing.autoupdate;
        }
    } else {
        refuse_existing_project(&root)?;
    }
    let plan = plan(&context, &project)?;
    apply::apply(
        &root,
        plan,
        Options {
            force: args.force,
            dry_run: args.dry_run,
        },
    )?;
    if !args.dry_run {
        ui::note(&format!(
            "\nScaffolded `{}`. Next, define a resource with:\n  rsbuilder create api --group <group> --version v1 --kind <Kind>\n`make help` lists the project's targets.",
            context.project_name
        ));
    }
    Ok(())
}

fn resolve(args: &InitArgs, root: &Path) -> anyhow::Result<(Context, Project)> {
    crate::plugins::check("init", &args.plugins, false)?;
    names::validate_domain(&args.domain)?;
    let (project_name, from_directory) = match &args.project_name {
        Some(name) => (name.clone(), false),
        None => (
            names::default_project_name(root).ok_or_else(|| {
                UserError::new(format!(
                    "cannot take a project name from `{}`",
                    root.display()
                ))
                .help("pass `--project-name my-operator`")
            })?,
            true,
        ),
    };
    names::validate_project_name(&project_name, from_directory)?;
    if let Some(repo) = &args.repo {
        names::validate_text("repo", repo, "https://github.com/<owner>/<project>")?;
    }
    if let Some(owner) = &args.owner {
        names::validate_text("owner", owner, "\"The otp-operator Authors\"")?;
    }
    let form = runtime::Form::parse(&args.runtime)?;
    // `alpha generate` and `alpha update` scaffold elsewhere, and say where the project is.
    let from = std::env::var_os(runtime::form::ROOT_VARIABLE).map(std::path::PathBuf::from);
    form.check(from.as_deref().unwrap_or(root), &runtime::version())?;

    let context = Context::new(
        project_name,
        &args.domain,
        args.repo.clone(),
        &Settings {
            owner: args.owner.clone(),
            license: spdx(args.license),
            namespaced: args.namespaced,
            runtime: form.clone(),
        },
    );
    let project = Project {
        autoupdate: false,
        cli_version: versions::RSBUILDER.to_owned(),
        grafana: false,
        helm: None,
        domain: context.domain.clone(),
        multigroup: args.multigroup,
        namespaced: context.namespaced,
        project_name: context.project_name.clone(),
        repo: context.repo.clone(),
        kube_version: versions::KUBE.to_owned(),
        k8s_openapi_version: versions::K8S_OPENAPI.to_owned(),
        runtime: Some(crate::project::RuntimeRecord::current(form)),
        resources: Vec::new(),
        deploy_images: Vec::new(),
    };
    Ok((context, project))
}

/// A project inside another rsbuilder project would turn one of its folders (`operator/`, say)
/// into a second workspace root, which breaks the outer one, even with `--force`.
fn refuse_nested_project(root: &Path) -> anyhow::Result<()> {
    let Some(outer) = root
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(project::FILE).is_file())
    else {
        return Ok(());
    };
    Err(UserError::new(format!(
        "the current directory is inside the rsbuilder project at `{}`: a project in it would break its Cargo workspace",
        outer.display()
    ))
    .help(format!(
        "run `rsbuilder init` outside `{}`, or run the command you need from there",
        outer.display()
    ))
    .into())
}

/// The layout of the PROJECT file in `root` when it is not rsbuilder's (kubebuilder's
/// `go.kubebuilder.io/v4`, say); `None` for rsbuilder's, or a file that says no layout.
fn other_layout(root: &Path) -> Option<String> {
    let text = OnDisk(root).read(Path::new(project::FILE)).ok()??;
    let value: serde_yaml::Value = serde_yaml::from_str(&text).ok()?;
    let layouts: Vec<&str> = value
        .get("layout")?
        .as_sequence()?
        .iter()
        .filter_map(serde_yaml::Value::as_str)
        .collect();
    let ours = layouts.iter().any(|l| l.starts_with("rsbuilder.io/"));
    (!ours).then(|| layouts.first().map(|l| (*l).to_owned()))?
}

fn refuse_existing_project(root: &Path) -> anyhow::Result<()> {
    let Some(found) = PROJECT_MARKERS.iter().find(|name| root.join(name).exists()) else {
        return Ok(());
    };
    let error = if root.join(project::FILE).is_file() {
        match other_layout(root) {
            Some(layout) => UserError::new(format!(
                "the current directory is a project of another tool: its `PROJECT` has the layout `{}`",
                crate::ui::shown(&layout)
            ))
            .help("run `rsbuilder init` in a new directory; `rsbuilder create api` there for each kind of this one"),
            None => UserError::new(
                "the current directory is already an rsbuilder project: found `PROJECT`",
            )
            .help("add APIs with `rsbuilder create api`, or pass --force to scaffold the files of `init` again"),
        }
    } else if *found == "Cargo.toml" {
        UserError::new(
            "the current directory holds a Cargo project that rsbuilder did not scaffold: found `Cargo.toml`",
        )
        .help("run `rsbuilder init` in a new directory; --force would replace that Cargo.toml")
    } else {
        UserError::new(format!(
            "the current directory holds files that rsbuilder would overwrite: found `{found}`"
        ))
        .help("run `rsbuilder init` in a new directory, or pass --force to scaffold over them")
    };
    Err(error.into())
}

/// `--force` scaffolds the files of `init` again; in a project that has APIs that would cut
/// them loose from `main.rs`, `lib.rs` and the kustomizations, so it is refused.
fn refuse_project_with_apis(root: &Path) -> anyhow::Result<()> {
    if !root.join(project::FILE).is_file() {
        return Ok(());
    }
    let existing = project::load(root)?;
    if let Some(first) = existing.resources.first() {
        return Err(UserError::new(format!(
            "the project already has {} API{} ({} first): `init --force` would unwire {}",
            existing.resources.len(),
            if existing.resources.len() == 1 { "" } else { "s" },
            first.kind,
            if existing.resources.len() == 1 { "it" } else { "them" },
        ))
        .help("run `rsbuilder init` in a new directory, or scaffold a single API again with `create api --force`")
        .into());
    }
    Ok(())
}

fn plan(context: &Context, project: &Project) -> anyhow::Result<Plan> {
    let context =
        tera::Context::from_serialize(context).context("failed to build the template context")?;
    let mut files = scaffold::render_set("init", &context, &[], |path| {
        if USER_FILES.contains(&path) {
            Policy::KeepExisting
        } else {
            Policy::Owned
        }
    })?;
    let sums = crate::owned::checksums(
        files
            .iter()
            .map(|file| (file.path.as_path(), file.contents.as_str())),
    );
    files.push(PlannedFile {
        path: crate::owned::CHECKSUMS.into(),
        contents: sums,
        policy: Policy::Owned,
    });
    let vendored = project
        .runtime
        .as_ref()
        .is_some_and(|r| r.form.is_vendored());
    files.extend(
        runtime::files()
            .into_iter()
            .filter(|_| vendored)
            .map(|(path, contents)| PlannedFile {
                path,
                contents,
                policy: Policy::Owned,
            }),
    );
    let runtime_sources = rbac::runtime_sources(project);
    let role = rbac::role_from_sources(
        files
            .iter()
            .map(|file| (file.path.as_path(), file.contents.as_str()))
            .chain(
                runtime_sources
                    .iter()
                    .map(|(path, text)| (path.as_path(), text.as_str())),
            ),
        project.namespaced,
    )?;
    files.push(PlannedFile {
        path: rbac::ROLE_FILE.into(),
        contents: role,
        policy: Policy::Owned,
    });
    complete_lock(&mut files, project)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.push(PlannedFile {
        path: project::FILE.into(),
        contents: project.to_yaml(),
        policy: Policy::Owned,
    });
    Ok(Plan {
        files,
        insertions: Vec::new(),
        removals: Vec::new(),
        derived: Vec::new(),
    })
}

/// What `edit` changes of a project after `init`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub owner: Option<String>,
    /// The SPDX identifier, or none.
    pub license: Option<&'static str>,
    pub namespaced: bool,
    /// Where the project takes the runtime crate from.
    pub runtime: runtime::Form,
}

/// The SPDX identifier `--license` writes.
pub fn spdx(license: License) -> Option<&'static str> {
    match license {
        License::Apache2 => Some("Apache-2.0"),
        License::None => None,
    }
}

/// The files of `init`'s templates for the project of `project` with `settings`, rendered as
/// `init` renders them; for `edit`, which carries the difference between two settings over to
/// the project's files.
pub fn template_files(project: &Project, settings: &Settings) -> anyhow::Result<Vec<PlannedFile>> {
    let context = Context::new(
        project.project_name.clone(),
        &project.domain,
        project.repo.clone(),
        settings,
    );
    let context =
        tera::Context::from_serialize(&context).context("failed to build the template context")?;
    scaffold::render_set("init", &context, &[], |_| Policy::Regenerated)
}

/// Adds the workspace's own packages to the planned `Cargo.lock`, so that the project builds
/// with `--locked` as scaffolded.
fn complete_lock(files: &mut [PlannedFile], project: &Project) -> anyhow::Result<()> {
    let manifest = |path: &str| {
        files
            .iter()
            .find(|file| file.path == Path::new(path))
            .map(|file| file.contents.clone())
            .with_context(|| format!("init plans no `{path}`"))
    };
    let version = PROJECT_VERSION;
    let mut members = vec![
        lockfile::Member::from_manifest(
            &project.project_name,
            version,
            &manifest("operator/Cargo.toml")?,
        ),
        lockfile::Member::from_manifest(
            &names::api_crate(&project.project_name),
            version,
            &manifest("api/Cargo.toml")?,
        ),
    ];
    if project
        .runtime
        .as_ref()
        .is_some_and(|r| r.form.is_vendored())
    {
        members.push(lockfile::Member::from_manifest(
            "rsbuilder-runtime",
            &runtime::version(),
            &manifest("runtime/Cargo.toml")?,
        ));
    } else {
        // From crates.io, a path or git, the runtime's entry is cargo's to write on the first
        // build: its checksum or commit is not known here.
        for member in &mut members {
            member.dependencies.remove("rsbuilder-runtime");
        }
    }
    let lock = files
        .iter_mut()
        .find(|file| file.path == Path::new("Cargo.lock"))
        .context("init plans no `Cargo.lock`")?;
    lock.contents = lockfile::with_members(&lock.contents, &members)?;
    Ok(())
}

/// The files `init` writes for a project named `name` in `domain`, and its PROJECT, planned in
/// memory: for tests that scaffold without a disk.
#[cfg(test)]
pub fn planned(name: &str, domain: &str, namespaced: bool) -> (Plan, Project) {
    let args = InitArgs {
        domain: domain.into(),
        project_name: Some(name.into()),
        repo: None,
        owner: None,
        license: License::Apache2,
        namespaced,
        force: false,
        multigroup: false,
        plugins: Vec::new(),
        runtime: "vendored".into(),
        dry_run: false,
    };
    let (context, project) = resolve(&args, Path::new("/tmp/x")).unwrap();
    (plan(&context, &project).unwrap(), project)
}

/// A context with every field set, for template tests.
#[cfg(test)]
pub fn sample_context() -> tera::Context {
    let args = InitArgs {
        domain: "learn.com".into(),
        project_name: Some("otp-operator".into()),
        repo: Some("https://github.com/learn/otp-operator".into()),
        owner: Some("The otp-operator Authors".into()),
        license: License::Apache2,
        namespaced: true,
        force: false,
        multigroup: false,
        plugins: Vec::new(),
        runtime: "vendored".into(),
        dry_run: false,
    };
    let (context, _) = resolve(&args, Path::new("/tmp/x")).unwrap();
    tera::Context::from_serialize(context).unwrap()
}
