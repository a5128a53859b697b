//! `rsbuilder edit`: changes what `init` decided for an existing project: its scope
//! (`--namespaced`), its license, its owner and where it takes the runtime crate from
//! (`--runtime`).
//!
//! The files `init` wrote for the old settings and those it writes for the new ones differ in a
//! few lines; `edit` carries exactly that difference over to the project's files, which the user
//! and later commands have changed since, and touches no other line, `--force` or not. A change
//! the user made by hand already is left as it is; one whose place cannot be found is refused
//! with the diff it needs. `--force` lets a change be placed by the unchanged lines on one side
//! of it, where the other side was edited.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::apply::{self, Options};
use crate::cli::EditArgs;
use crate::commands::init::{self, Settings};
use crate::diff::{self, Placement};
use crate::lockfile;
use crate::names;
use crate::project::{self, Project};
use crate::rbac;
use crate::runtime;
use crate::scaffold::{Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};

/// Files whose change is left out, with a note, when their lines were rewritten.
const OPTIONAL: &[&str] = &["README.md"];

/// Refuses flags that are wrong whatever the project: before it is opened.
fn check_args(args: &EditArgs) -> anyhow::Result<Option<runtime::Form>> {
    crate::plugins::check("edit", &args.plugins, false)?;
    crate::plugins::refuse_idle_options(
        &args.plugins,
        &[
            ("--reset-workflows", args.reset_workflows),
            ("--reset-dashboards", args.reset_dashboards),
            ("--manifests", args.manifests.is_some()),
            ("--output-dir", args.output_dir.is_some()),
            ("--reset-values", args.reset_values),
        ],
    )?;
    if args.multigroup == Some(false) {
        return Err(UserError::new(
            "--multigroup=false: every rsbuilder project holds any number of groups, each in its own module",
        )
        .help("drop --multigroup=false; rsbuilder has no single-group layout")
        .into());
    }
    if let Some(owner) = &args.owner {
        names::validate_text("owner", owner, "\"The otp-operator Authors\"")?;
    }
    Ok(args
        .runtime
        .as_deref()
        .map(runtime::Form::parse)
        .transpose()?)
}

/// Runs `edit` in the project around the current directory.
pub fn run(args: EditArgs) -> anyhow::Result<()> {
    let asked_runtime = check_args(&args)?;
    let open = super::open()?;
    let root = open.root.as_path();
    let mut project = project::load(root)?;
    let runtime = runtime_forms(root, &project, asked_runtime)?;
    let manifest = OnDisk(root)
        .read(Path::new("Cargo.toml"))
        .context("failed to read the workspace Cargo.toml")?
        .context("the workspace Cargo.toml is missing")?;
    let old = Settings {
        owner: crate::manifest::string(&manifest, "workspace.package", "authors"),
        license: license_of(
            crate::manifest::string(&manifest, "workspace.package", "license").as_deref(),
            args.license.is_some(),
        )?,
        namespaced: project.namespaced,
        runtime: runtime.0,
    };
    let new = Settings {
        owner: args.owner.clone().or_else(|| old.owner.clone()),
        license: args.license.map_or(old.license, init::spdx),
        namespaced: args.namespaced.unwrap_or(old.namespaced),
        runtime: runtime.1,
    };
    if new.namespaced && !old.namespaced {
        refuse_cluster_scoped(&project)?;
    }

    // `--multigroup` is recorded as kubebuilder records it; it changes no file but PROJECT.
    if args.multigroup == Some(true) {
        project.multigroup = true;
    }
    let asked: Vec<_> = crate::plugins::asked_of_edit(&args.plugins).collect();
    for plugin in &asked {
        plugin.record(&args, &mut project)?;
    }
    let mut plan = plan(root, &mut project, &old, &new, args.force)?;
    let edit = crate::plugins::Edit {
        tree: &OnDisk(root),
        project: &project,
        args: &args,
    };
    for plugin in &asked {
        plugin.plan(&edit, &mut plan)?;
    }
    apply::apply(
        root,
        plan,
        Options {
            force: true,
            dry_run: args.dry_run,
        },
    )?;
    if !args.dry_run && new.namespaced != old.namespaced {
        ui::note(if new.namespaced {
            "\nThe manager now watches its own namespace (WATCH_NAMESPACE) with a Role. Webhooks still receive requests from every namespace: give their `+rsbuilder:webhook` markers a `namespaceSelector=kubernetes.io/metadata.name=<namespace>` if they must not."
        } else {
            "\nThe manager now watches every namespace with a ClusterRole."
        });
    }
    Ok(())
}

/// A namespaced project's manager has a Role, which cannot grant cluster-scoped resources.
fn refuse_cluster_scoped(project: &Project) -> anyhow::Result<()> {
    let mut cluster_scoped: Vec<String> = project
        .resources
        .iter()
        .filter(|r| r.api.as_ref().is_some_and(|api| !api.namespaced))
        .map(|r| format!("{}/{} {}", r.group_with_domain(), r.version, r.kind))
        .collect();
    for resource in project.resources.iter().filter(|r| r.core) {
        let kind = resource.builtin();
        if kind.is_some_and(|kind| !kind.namespaced) {
            cluster_scoped.push(format!(
                "{}/{} {}",
                resource.group, resource.version, resource.kind
            ));
        }
    }
    if cluster_scoped.is_empty() {
        return Ok(());
    }
    Err(UserError::new(format!(
        "the project has cluster-scoped kinds ({}): a namespaced manager's Role cannot grant them",
        cluster_scoped.join(", ")
    ))
    .help("keep the project cluster-wide, or remove those kinds first")
    .into())
}

/// The files `edit` changes: the difference between `init`'s files for `old` and for `new`,
/// carried over to the project's; the RBAC role; PROJECT.
fn plan(
    root: &Path,
    project: &mut Project,
    old: &Settings,
    new: &Settings,
    force: bool,
) -> anyhow::Result<Plan> {
    let mut plan = Plan::default();
    let before = init::template_files(project, old)?;
    let after = init::template_files(project, new)?;
    let mut refused = Vec::new();
    // Only the runtime's form changes: a file an older scaffold wrote still takes the change,
    // placed without the template's context, and one the project lacks needs none.
    let only_runtime = Settings {
        runtime: new.runtime.clone(),
        ..old.clone()
    } == *new;
    for (was, will) in before.iter().zip(&after) {
        debug_assert_eq!(was.path, will.path);
        if was.contents == will.contents {
            continue;
        }
        if only_runtime && apply::read_existing(root, &will.path)?.is_none() {
            continue;
        }
        match carry(root, was, will, force)? {
            Carried::Write(contents) => plan.files.push(PlannedFile {
                path: will.path.clone(),
                contents,
                policy: Policy::Regenerated,
            }),
            Carried::Skip => {}
            Carried::Refused(diff) => {
                match only_runtime
                    .then(|| runtime_fallback(root, &will.path, &new.runtime, &diff))
                    .transpose()?
                {
                    Some(Some(contents)) => plan.files.push(PlannedFile {
                        path: will.path.clone(),
                        contents,
                        policy: Policy::Regenerated,
                    }),
                    Some(None) => {}
                    None => refused.push((will.path.display().to_string(), diff)),
                }
            }
        }
    }
    if let Some((first, change)) = refused.first() {
        let names: Vec<&str> = refused.iter().map(|(path, _)| path.as_str()).collect();
        return Err(UserError::new(format!(
            "the lines `edit` changes were edited by hand in {}; the change {first} needs:\n{change}",
            names.join(", ")
        ))
        .help(if force {
            "make the change by hand, then run `rsbuilder edit` again: it finds the change made"
        } else {
            "make the change by hand, then run `rsbuilder edit` again (it finds the change made), or pass --force to place it by fewer unchanged lines"
        })
        .into());
    }
    // The form first: the derived role reads the runtime's markers as the form leaves them.
    if old.runtime != new.runtime {
        switch_runtime(root, project, &new.runtime, force, &mut plan)?;
    }
    if old.namespaced != new.namespaced {
        project.namespaced = new.namespaced;
        plan.files.extend(helper_roles(root, project)?);
        plan.derived.push(rbac::derived_role(project));
    }
    plan.files.push(project.planned());
    Ok(plan)
}

/// What becomes of `path`, which an older scaffold wrote, when the runtime's form changes to
/// `form` and the change cannot be carried over: the workspace manifest gets the new
/// `rsbuilder-runtime` entry, its layout and comments kept; any other file is left as it is,
/// with a note that shows the change it needs.
fn runtime_fallback(
    root: &Path,
    path: &Path,
    form: &runtime::Form,
    diff: &str,
) -> anyhow::Result<Option<String>> {
    if path != Path::new("Cargo.toml") {
        ui::note(&format!(
            "note: {} was changed since rsbuilder wrote it; make this change by hand:\n{diff}",
            path.display()
        ));
        return Ok(None);
    }
    let manifest = apply::read_existing(root, path)?.unwrap_or_default();
    Ok(Some(form.set_in(&manifest, &runtime::version())?))
}

/// Cargo.lock as `init` writes it for `form`: cargo would mend it on the next build, but a
/// lock that `--locked` refuses should not be what `edit` leaves. `None` when the project has
/// no lock, or it needs no change.
fn lock_for(
    root: &Path,
    project: &Project,
    form: &runtime::Form,
) -> anyhow::Result<Option<PlannedFile>> {
    let Some(lock) = apply::read_existing(root, Path::new("Cargo.lock"))? else {
        return Ok(None);
    };
    let manifest = runtime::files()
        .remove(&Path::new(runtime::DIR).join("Cargo.toml"))
        .context("the runtime has a Cargo.toml")?;
    let member =
        lockfile::Member::from_manifest("rsbuilder-runtime", &runtime::version(), &manifest);
    let contents = lockfile::with_runtime(
        &lock,
        &[project.project_name.as_str()],
        form.is_vendored().then_some(&member),
    )?;
    Ok((contents != lock).then(|| PlannedFile {
        path: "Cargo.lock".into(),
        contents,
        policy: Policy::Regenerated,
    }))
}

/// The runtime's form as PROJECT records it, and as `--runtime` asks for it. A form other
/// than the recorded one needs the project's runtime at this rsbuilder's version: `edit`
/// writes that version, and moving to it is `upgrade`'s work.
fn runtime_forms(
    root: &Path,
    project: &Project,
    asked: Option<runtime::Form>,
) -> anyhow::Result<(runtime::Form, runtime::Form)> {
    let Some(recorded) = &project.runtime else {
        if asked.is_some() {
            return Err(UserError::new(
                "PROJECT records no runtime crate: this project was scaffolded before rsbuilder kept its runtime in `runtime/`",
            )
            .help("scaffold a new project with `rsbuilder init --runtime=<form>`, then move your types and controllers into it")
            .into());
        }
        return Ok(Default::default());
    };
    let Some(asked) = asked.filter(|asked| *asked != recorded.form) else {
        return Ok((recorded.form.clone(), recorded.form.clone()));
    };
    let installed = runtime::version();
    if recorded.version != installed {
        return Err(UserError::new(format!(
            "the project's runtime is rsbuilder-runtime {}, and this rsbuilder writes {installed}: `--runtime={asked}` would change its version too",
            recorded.version
        ))
        .help("run `rsbuilder upgrade` first, then `rsbuilder edit --runtime` again")
        .into());
    }
    asked.check(root, &installed)?;
    Ok((recorded.form.clone(), asked))
}

/// Takes the runtime from `form`: writes the crate into `runtime/` or removes it (refused,
/// unless `force`, when its files were changed), and records the form in PROJECT.
fn switch_runtime(
    root: &Path,
    project: &mut Project,
    form: &runtime::Form,
    force: bool,
    plan: &mut Plan,
) -> anyhow::Result<()> {
    let on_disk = super::upgrade::read_runtime(root)?;
    let vendored = project.runtime.as_ref().filter(|r| r.form.is_vendored());
    // `runtime/` is rsbuilder's only in the vendored form: otherwise it is the user's (a
    // checkout a `path:` names, say), never removed, and written over only with `--force`.
    if vendored.is_none() && !on_disk.is_empty() && form.is_vendored() && !force {
        return Err(UserError::new(
            "`runtime/` holds files, and `--runtime=vendored` writes the runtime there",
        )
        .help("move those files elsewhere, or pass --force to write the runtime over them")
        .into());
    }
    if let Some(recorded) = vendored {
        let changed = super::upgrade::changed_files(recorded, &on_disk);
        if !changed.is_empty() {
            let list: Vec<String> = changed.iter().map(|p| format!("`{p}`")).collect();
            let message = format!(
                "the runtime was changed since rsbuilder wrote it: {} {} not match PROJECT's checksum, and `--runtime={form}` removes runtime/",
                list.join(", "),
                if list.len() == 1 { "does" } else { "do" }
            );
            if !force {
                return Err(UserError::new(message)
                    .help("move your changes out of runtime/ (into operator/), or pass --force to remove them")
                    .into());
            }
            ui::warn(&format!("{message}; --force removes them"), None);
        }
    }
    let files = if form.is_vendored() {
        runtime::files()
    } else {
        Default::default()
    };
    if vendored.is_some() {
        plan.removals.extend(
            on_disk
                .keys()
                .filter(|path| !files.contains_key(*path))
                .cloned(),
        );
    }
    plan.files
        .extend(files.into_iter().map(|(path, contents)| PlannedFile {
            path,
            contents,
            policy: Policy::Regenerated,
        }));
    project.runtime = Some(crate::project::RuntimeRecord::current(form.clone()));
    plan.files.extend(lock_for(root, project, form)?);
    ui::note(&format!(
        "the project takes rsbuilder-runtime {} {}",
        runtime::version(),
        match form {
            runtime::Form::Vendored => "from its copy in runtime/".to_owned(),
            runtime::Form::Registry => {
                "from crates.io; `cargo build` adds its entry to Cargo.lock".to_owned()
            }
            runtime::Form::Path(dir) => {
                format!("from `{dir}`; `cargo build` adds its entry to Cargo.lock")
            }
            runtime::Form::Git { url, .. } => {
                format!("from `{url}`; `cargo build` adds its entry to Cargo.lock")
            }
        }
    ));
    Ok(())
}

/// The admin, editor and viewer roles of every kind, switched between `ClusterRole` (a
/// cluster-wide project) and `Role` (a namespaced one), as `create api` writes them: only their
/// `kind:` line changes. A role whose `kind:` line is neither is left as it is, with a note.
fn helper_roles(root: &Path, project: &Project) -> anyhow::Result<Vec<PlannedFile>> {
    let (from, to) = if project.namespaced {
        ("kind: ClusterRole", "kind: Role")
    } else {
        ("kind: Role", "kind: ClusterRole")
    };
    let mut files = Vec::new();
    // One set of roles per kind, whatever its versions; named as `create api` names them.
    let mut prefixes = std::collections::BTreeSet::new();
    for resource in project.resources.iter().filter(|r| r.api.is_some()) {
        let names = resource.names(&project.domain);
        if !prefixes.insert(names.file_prefix.clone()) {
            continue;
        }
        for role in ["admin", "editor", "viewer"] {
            let path = PathBuf::from(format!(
                "config/rbac/{}_{role}_role.yaml",
                names.file_prefix
            ));
            let Some(text) = apply::read_existing(root, &path)? else {
                continue;
            };
            let is = |line: &str, kind: &str| line.trim_end_matches(['\r', '\n']) == kind;
            if text.split_inclusive('\n').any(|line| is(line, to)) {
                continue;
            }
            let mut found = false;
            let contents: String = text
                .split_inclusive('\n')
                .map(|line| {
                    if !found && is(line, from) {
                        found = true;
                        line.replacen(from, to, 1)
                    } else {
                        line.to_owned()
                    }
                })
                .collect();
            if !found {
                ui::note(&format!(
                    "note: {} has no `{from}` line; change its kind to `{}` by hand",
                    path.display(),
                    &to["kind: ".len()..]
                ));
                continue;
            }
            files.push(PlannedFile {
                path,
                contents,
                policy: Policy::Regenerated,
            });
        }
    }
    Ok(files)
}

/// What becomes of one file `init` renders differently under the new settings.
enum Carried {
    /// The file with the change carried over.
    Write(String),
    /// An optional file, missing or rewritten: left as it is.
    Skip,
    /// The change cannot be placed: its diff, to show.
    Refused(String),
}

/// Carries the change from `was` to `will` over to the file as it is in the project.
fn carry(
    root: &Path,
    was: &PlannedFile,
    will: &PlannedFile,
    force: bool,
) -> anyhow::Result<Carried> {
    let path = &will.path;
    let shown = path.display().to_string();
    let optional = OPTIONAL.contains(&shown.as_str());
    let Some(current) = apply::read_existing(root, path)? else {
        if optional {
            return Ok(Carried::Skip);
        }
        return Err(UserError::new(format!(
            "`{shown}` is missing, and this change of settings changes it"
        ))
        .help(format!(
            "restore `{shown}` (from version control, or from `rsbuilder init` in an empty folder), then run the command again"
        ))
        .into());
    };
    // A checkout with CRLF line ends (git's `core.autocrlf`) is compared as LF, and keeps its
    // line ends.
    let crlf = current.contains("\r\n");
    let current = if crlf {
        current.replace("\r\n", "\n")
    } else {
        current
    };
    let carried = |placement| diff::carry_over(&was.contents, &will.contents, &current, placement);
    let contents = if current == was.contents {
        will.contents.clone()
    } else if let Some(carried) = carried(Placement::Strict) {
        carried
    } else if optional {
        ui::note(&format!(
            "note: {shown} was rewritten; it keeps its text, which may name the old settings"
        ));
        return Ok(Carried::Skip);
    } else if let Some(carried) = carried(Placement::Loose).filter(|_| force) {
        // `--force` places a change by less context, and still touches only its lines.
        carried
    } else {
        return Ok(Carried::Refused(diff::unified(
            &shown,
            &was.contents,
            &will.contents,
            40,
        )));
    };
    Ok(Carried::Write(if crlf {
        contents.replace('\n', "\r\n")
    } else {
        contents
    }))
}

/// The license `init` wrote as `spdx`. One it does not write is left alone, unless
/// `--license` asks to change it, which `edit` cannot do safely.
fn license_of(spdx: Option<&str>, changing: bool) -> anyhow::Result<Option<&'static str>> {
    let apache = init::spdx(crate::cli::License::Apache2);
    match spdx {
        None => Ok(None),
        Some(spdx) if apache == Some(spdx) => Ok(apache),
        Some(_) if !changing => Ok(None),
        Some(spdx) => Err(UserError::new(format!(
            "the workspace Cargo.toml has `license = \"{spdx}\"`, which `rsbuilder init` does not write"
        ))
        .help("change the license in Cargo.toml by hand; `edit --license` switches between apache2 and none")
        .into()),
    }
}
