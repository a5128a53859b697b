//! `rsbuilder alpha generate`: the project scaffolded again from its PROJECT file with this
//! rsbuilder, as kubebuilder's `alpha generate` does. It derives the commands that make the
//! project (`init`, every `create api` in PROJECT's order, then every `create webhook`), runs
//! each with this binary in a new tree, and leaves that tree in `--output-dir`, or in place of
//! the project's files (keeping `.git`) with `--force`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::apply;
use crate::project::{self, Project, Resource};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};

/// Runs `alpha generate` for the project around the current directory.
pub fn generate(options: crate::cli::AlphaGenerateArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    // The lock first: PROJECT and the files read next are those no other command is changing.
    let open = super::open()?;
    let root = open.root.clone();
    let project = project::load(&root)?;
    let manifest = match OnDisk(&root)
        .read(Path::new("Cargo.toml"))
        .context("failed to read the workspace Cargo.toml")?
    {
        Some(text) => text,
        None => {
            ui::warn(
                "the workspace Cargo.toml is missing: the project is scaffolded with init's owner and license",
                None,
            );
            String::new()
        }
    };
    let registered = registration_order(&root)?;
    let commands = commands(&project, &manifest, &registered)?;
    if options.dry_run {
        // The commands are the output, for a script or a reader: stdout, a line each.
        let lines: String = commands
            .iter()
            .map(|command| shell_line(command) + "\n")
            .collect();
        return ui::data(lines.as_bytes());
    }
    match &options.output_dir {
        Some(dir) => {
            let dir = cwd.join(dir);
            refuse_inside(&dir, &root)?;
            refuse_unless_empty(&dir)?;
            let exe = std::env::current_exe().context("failed to find the rsbuilder binary")?;
            crate::apply::fill_new_dir(&dir, |dir| {
                scaffold_again(&root, &project, &exe, &commands, dir)
            })?;
            ui::note(&format!(
                "\nScaffolded `{}` again in {} from its PROJECT.",
                project.project_name,
                dir.display()
            ));
        }
        None => in_place(&root, &project, &commands, options.force)?,
    }
    Ok(())
}

/// The commands that make `project` as PROJECT records it: `init` with the settings of PROJECT
/// and of the workspace `manifest` (owner, license), each kind's `create api` (its types and
/// controller, then each named controller) in PROJECT's order, and the webhooks in the order
/// they were added: `registered` lists their modules in that order (PROJECT does not record
/// it). A kind that PROJECT lists only for its webhooks (one of Kubernetes' own) was listed when
/// its webhook was added, so its webhook and those added before it come at its place.
pub fn commands(
    project: &Project,
    manifest: &str,
    registered: &[String],
) -> anyhow::Result<Vec<Vec<String>>> {
    let mut commands = vec![init(project, manifest)?];
    let mut queue: Vec<(usize, &Resource)> = project
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.webhooks.is_some())
        .collect();
    // Stable: a kind whose module is not registered keeps its place in PROJECT, after the rest.
    queue.sort_by_key(|(_, r)| {
        module_paths(project, r)
            .iter()
            .find_map(|path| registered.iter().position(|p| p == path))
            .unwrap_or(usize::MAX)
    });
    for (index, resource) in project.resources.iter().enumerate() {
        commands.extend(create_api(project, resource)?);
        let only_webhooks =
            resource.api.is_none() && !resource.controller && resource.controllers.is_empty();
        if !only_webhooks || resource.webhooks.is_none() {
            continue;
        }
        // The webhooks added before this one, of kinds that exist by now, then this one.
        let Some(at) = queue.iter().position(|(i, _)| *i == index) else {
            continue;
        };
        let (before, after): (Vec<_>, Vec<_>) = queue[..at].iter().partition(|(i, _)| *i < index);
        for (_, earlier) in before {
            commands.extend(create_webhook(earlier));
        }
        commands.extend(create_webhook(resource));
        queue = after
            .into_iter()
            .chain(queue[at + 1..].iter().copied())
            .collect();
    }
    for (_, resource) in queue {
        commands.extend(create_webhook(resource));
    }
    commands.extend(
        crate::plugins::EDIT
            .iter()
            .filter_map(|plugin| plugin.replay(project)),
    );
    Ok(commands)
}

/// The module paths (`example::v1::cache`) a kind's webhooks may be registered under: one of
/// Kubernetes' kinds has had two (`k8s_core::v1::pod`, and `core::v1::pod` before).
fn module_paths(project: &Project, resource: &Resource) -> Vec<String> {
    resource
        .layouts(&project.domain)
        .iter()
        .map(|n| format!("{}::{}::{}", n.group_module, n.version, n.kind_module))
        .collect()
}

/// The webhook modules `operator/src/webhooks/mod.rs` registers, in its order: the order in
/// which `create webhook` added them. Empty when the project has no webhooks.
pub fn registration_order(root: &Path) -> anyhow::Result<Vec<String>> {
    let path = Path::new("operator/src/webhooks/mod.rs");
    let Some(text) = crate::apply::read_existing(root, path)? else {
        return Ok(Vec::new());
    };
    Ok(text
        .lines()
        .filter_map(|line| line.trim().strip_suffix("::register(&mut webhooks);"))
        .map(str::to_owned)
        .collect())
}

fn init(project: &Project, manifest: &str) -> anyhow::Result<Vec<String>> {
    let mut args = words(&["init", "--domain", &project.domain]);
    args.extend(words(&["--project-name", &project.project_name]));
    if let Some(repo) = &project.repo {
        args.extend(words(&["--repo", repo]));
    }
    // No workspace manifest (it is missing): init's own owner and license.
    if manifest.is_empty() {
        return Ok(finish_init(project, args));
    }
    if let Some(owner) = crate::manifest::string(manifest, "workspace.package", "authors") {
        args.extend(words(&["--owner", &owner]));
    }
    match crate::manifest::string(manifest, "workspace.package", "license").as_deref() {
        None => args.extend(words(&["--license", "none"])),
        Some(spdx) if Some(spdx) == super::init::spdx(crate::cli::License::Apache2) => {}
        Some(spdx) => {
            return Err(UserError::new(format!(
                "the workspace Cargo.toml has `license = \"{spdx}\"`, which `rsbuilder init` does not write"
            ))
            .help("set `license = \"Apache-2.0\"` or remove the line, then scaffold again and put your license back")
            .into());
        }
    }
    Ok(finish_init(project, args))
}

/// `init`'s flags of scope and layout, after `args`.
fn finish_init(project: &Project, mut args: Vec<String>) -> Vec<String> {
    if project.namespaced {
        args.push("--namespaced".into());
    }
    if project.multigroup {
        args.push("--multigroup".into());
    }
    if let Some(runtime) = project.runtime.as_ref().filter(|r| !r.form.is_vendored()) {
        args.push(format!("--runtime={}", runtime.form));
    }
    args
}

/// The kind's `create api` commands: its types and its own controller, then each controller
/// named with `--controller-name`.
fn create_api(project: &Project, resource: &Resource) -> anyhow::Result<Vec<Vec<String>>> {
    if !resource.core && !resource.domain.is_empty() && resource.domain != project.domain {
        return Err(UserError::new(format!(
            "PROJECT has {} of the domain `{}`, another than the project's `{}`",
            gvk(resource),
            resource.domain,
            project.domain
        ))
        .help("alpha generate scaffolds the kinds of the project's domain and Kubernetes' own; remove the entry, scaffold again, and put it back by hand")
        .into());
    }
    let base = kind_words("api", resource);
    let mut commands = Vec::new();
    if let Some(api) = &resource.api {
        let mut args = base.clone();
        args.push("--resource".into());
        args.push(format!("--controller={}", resource.controller));
        if !api.namespaced {
            args.push("--namespaced=false".into());
        }
        if let Some(plural) = &resource.plural {
            args.extend(words(&["--plural", plural]));
        }
        if api.ssa {
            args.push("--ssa".into());
        }
        args.extend(image_flags(project, resource));
        commands.push(args);
    } else if resource.controller {
        let mut args = base.clone();
        args.extend(words(&["--resource=false", "--controller"]));
        commands.push(args);
    }
    for named in &resource.controllers {
        let mut args = base.clone();
        args.extend(words(&[
            "--resource=false",
            "--controller",
            "--controller-name",
            &named.name,
        ]));
        commands.push(args);
    }
    Ok(commands)
}

/// The deploy-image flags PROJECT records for the kind, if it runs an image.
fn image_flags(project: &Project, resource: &Resource) -> Vec<String> {
    let Some(image) = project.deploy_images.iter().find(|d| {
        d.group == resource.group && d.version == resource.version && d.kind == resource.kind
    }) else {
        return Vec::new();
    };
    let options = &image.options;
    let mut args = words(&["--image", &options.image]);
    for (flag, value) in [
        ("--image-container-command", &options.container_command),
        ("--image-container-port", &options.container_port),
        ("--run-as-user", &options.run_as_user),
    ] {
        if let Some(value) = value {
            args.push(format!("{flag}={value}"));
        }
    }
    args
}

/// The kind's `create webhook` commands: admission, then conversion.
fn create_webhook(resource: &Resource) -> Vec<Vec<String>> {
    let Some(webhooks) = &resource.webhooks else {
        return Vec::new();
    };
    let base = kind_words("webhook", resource);
    let mut commands = Vec::new();
    if webhooks.defaulting || webhooks.validation {
        let mut args = base.clone();
        if webhooks.defaulting {
            args.push("--defaulting".into());
        }
        if webhooks.validation {
            args.push("--programmatic-validation".into());
        }
        if let Some(path) = &webhooks.defaulting_path {
            args.extend(words(&["--defaulting-path", path]));
        }
        if let Some(path) = &webhooks.validation_path {
            args.extend(words(&["--validation-path", path]));
        }
        commands.push(args);
    }
    if webhooks.conversion {
        let mut args = base;
        args.push("--conversion".into());
        if !webhooks.spoke.is_empty() {
            args.extend(words(&["--spoke", &webhooks.spoke.join(",")]));
        }
        commands.push(args);
    }
    commands
}

/// `create <what> --group G --version V --kind K` for `resource`.
fn kind_words(what: &str, resource: &Resource) -> Vec<String> {
    words(&["create", what, "--group", &resource.group])
        .into_iter()
        .chain(words(&[
            "--version",
            &resource.version,
            "--kind",
            &resource.kind,
        ]))
        .collect()
}

fn words(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn gvk(resource: &Resource) -> String {
    resource.gvk().to_string()
}

/// `rsbuilder` and `args` as a shell reads them back: words with anything but
/// `[A-Za-z0-9,._+:@%/=-]` in single quotes.
fn shell_line(args: &[String]) -> String {
    let quoted: Vec<String> = args
        .iter()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ",._+:@%/=-".contains(c));
            if plain {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect();
    format!("rsbuilder {}", quoted.join(" "))
}

/// Refuses an output directory inside the project: the new tree would land among the files it
/// is made from, and the next `alpha generate --force` would take it for part of the project.
fn refuse_inside(dir: &Path, root: &Path) -> anyhow::Result<()> {
    // The directory need not exist: resolve its nearest ancestor that does.
    let mut existing = dir;
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            break;
        };
        rest.push(name);
        existing = parent;
    }
    let mut resolved = existing
        .canonicalize()
        .unwrap_or_else(|_| existing.to_path_buf());
    resolved.extend(rest.iter().rev());
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root) {
        return Err(UserError::new(format!(
            "--output-dir {}: the directory is inside the project {}",
            dir.display(),
            root.display()
        ))
        .help("pass a directory outside the project, such as ../<name>-again")
        .into());
    }
    Ok(())
}

/// Refuses an output directory that holds anything.
fn refuse_unless_empty(dir: &Path) -> anyhow::Result<()> {
    if !crate::tree::is_empty_dir(dir) {
        return Err(UserError::new(format!(
            "--output-dir {}: the directory is not empty",
            dir.display()
        ))
        .help("pass a new or empty directory")
        .into());
    }
    Ok(())
}

/// `commands` without the Helm chart's command, and that command: the chart is made from the
/// project's install file, which [`carry_helm_chart`] brings along first. [`commands`] puts it
/// last, as [`crate::plugins::EDIT`] lists the Helm plugin last.
pub fn split_helm(commands: &[Vec<String>]) -> (&[Vec<String>], Option<&Vec<String>>) {
    match commands.split_last() {
        Some((last, rest))
            if last.get(1).and_then(|flag| flag.strip_prefix("--plugins="))
                == Some(crate::plugins::helm::PLUGIN.key) =>
        {
            (rest, Some(last))
        }
        _ => (commands, None),
    }
}

/// Runs `commands` in `dir`, then what carries the user's own files along: the Grafana
/// configuration, and the install file, `Chart.yaml` and `values.yaml` of the Helm chart.
fn scaffold_again(
    root: &Path,
    project: &Project,
    exe: &Path,
    commands: &[Vec<String>],
    dir: &Path,
) -> anyhow::Result<()> {
    let (commands, helm) = split_helm(commands);
    run_all(root, exe, commands, dir)?;
    carry_grafana_config(root, project, exe, dir)?;
    if let Some(helm) = helm {
        carry_helm_chart(root, project, exe, helm, dir)?;
    }
    Ok(())
}

/// The chart is made from the install file (`make build-installer`), which is not part of the
/// scaffold: it is copied into the new tree with the chart's `Chart.yaml` and `values.yaml`,
/// which are the user's, and the Helm command runs there.
fn carry_helm_chart(
    root: &Path,
    project: &Project,
    exe: &Path,
    command: &[String],
    dir: &Path,
) -> anyhow::Result<()> {
    let record = project
        .helm
        .as_ref()
        .expect("a Helm command comes from PROJECT's record");
    let tree = OnDisk(root);
    let manifests = Path::new(&record.manifests);
    if !tree.is_file(manifests) || tree.read_bytes(manifests)?.is_none() {
        return Err(UserError::new(format!(
            "PROJECT records a Helm chart made from `{}`, which does not exist",
            record.manifests
        ))
        .help("run `make build-installer` first, so that the chart can be made again")
        .into());
    }
    let chart = Path::new(&record.output).join("chart");
    for file in [
        PathBuf::from(&record.manifests),
        chart.join("Chart.yaml"),
        chart.join("values.yaml"),
    ] {
        apply::carry(&OnDisk(root), &file, dir)?;
    }
    // The new tree's config/ is the scaffold's, not the one the install file was built from.
    let mut command = command.to_vec();
    command.push("--install-as-is".to_owned());
    run_all(root, exe, &[command], dir)
}

/// The user's list of metrics, `grafana/custom-metrics/config.yaml`, is the user's, not the
/// scaffold's: it is copied into the new tree, and the Grafana edit run again there to chart it.
fn carry_grafana_config(
    root: &Path,
    project: &Project,
    exe: &Path,
    dir: &Path,
) -> anyhow::Result<()> {
    use crate::plugins::EditPlugin as _;
    let config = Path::new(crate::plugins::grafana::CONFIG);
    let Some(edit) = crate::plugins::grafana::GRAFANA.replay(project) else {
        return Ok(());
    };
    if !apply::carry(&OnDisk(root), config, dir)? {
        return Ok(());
    }
    run_all(root, exe, &[edit], dir)
}

/// Refuses to replace the project's files when git shows some it could not bring back:
/// changes not committed, untracked files, ignored ones (`.env`, `.idea/`, `bin/`), but for
/// `target/`, cargo's build output. A project outside git is not checked: the refusal without
/// `--force` said to commit first.
fn refuse_what_git_cannot_restore(root: &Path) -> anyhow::Result<()> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (Some(prefix), Some(status)) = (
        git(&["rev-parse", "--show-prefix"]),
        git(&[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--ignored",
            "--",
            ".",
        ]),
    ) else {
        return Ok(());
    };
    let prefix = prefix.trim();
    let at_risk: Vec<String> = status
        .lines()
        .filter_map(|line| {
            let (state, path) = line.split_at_checked(3)?;
            let path = path.strip_prefix(prefix).unwrap_or(path);
            (path != "target/" && !path.starts_with("target/"))
                .then(|| format!("{}{}", state, ui::shown(path)))
        })
        .collect();
    if at_risk.is_empty() {
        return Ok(());
    }
    const SHOWN: usize = 10;
    let mut listed = at_risk[..at_risk.len().min(SHOWN)].join("\n");
    if at_risk.len() > SHOWN {
        listed.push_str(&format!("\n... and {} more", at_risk.len() - SHOWN));
    }
    Err(UserError::new(format!(
        "alpha generate --force would delete what git cannot bring back ({} entr{} that `git status --ignored` shows):\n{listed}",
        at_risk.len(),
        if at_risk.len() == 1 { "y" } else { "ies" }
    ))
    .help("commit them, or move them out of the project (ignored files too: only target/ may stay), or pass --output-dir <dir> for a new tree beside the project")
    .into())
}

/// Runs `commands` with the rsbuilder `exe` in `dir`, one after the other; the first that fails
/// is an error with its output.
pub fn run_all(
    root: &Path,
    exe: &Path,
    commands: &[Vec<String>],
    dir: &Path,
) -> anyhow::Result<()> {
    run_all_or(
        root,
        exe,
        commands,
        dir,
        "fix the entry of PROJECT it comes from, or scaffold that part by hand",
    )
}

/// [`run_all`], with `help` for a command that fails.
pub fn run_all_or(
    root: &Path,
    exe: &Path,
    commands: &[Vec<String>],
    dir: &Path,
    help: &str,
) -> anyhow::Result<()> {
    for args in commands {
        ui::note(&shell_line(args));
        let output = Command::new(exe)
            .args(args)
            .current_dir(dir)
            // A relative `--runtime=path:DIR` names a folder from the project, not from `dir`.
            .env(crate::runtime::form::ROOT_VARIABLE, root)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("failed to run `{}`", shell_line(args)))?;
        if !output.status.success() {
            return Err(UserError::new(format!(
                "`{}` failed:\n{}",
                shell_line(args),
                String::from_utf8_lossy(&output.stderr).trim_end()
            ))
            .help(help)
            .into());
        }
    }
    Ok(())
}

/// Scaffolds the project again next to it, then puts the new tree in place of every file of
/// the project but `.git` (`swap::replace_tree`).
fn in_place(
    root: &Path,
    project: &Project,
    commands: &[Vec<String>],
    force: bool,
) -> anyhow::Result<()> {
    if !force {
        return Err(UserError::new(format!(
            "alpha generate without --output-dir replaces every file of {} but .git",
            root.display()
        ))
        .help("pass --output-dir <dir> for a new tree, or --force to replace the project's files (commit them first)")
        .into());
    }
    refuse_what_git_cannot_restore(root)?;
    let exe = std::env::current_exe().context("failed to find the rsbuilder binary")?;
    crate::apply::swap::replace_tree(root, &project.project_name, |fresh| {
        scaffold_again(root, project, &exe, commands, fresh)
    })?;
    ui::note(&format!(
        "\nScaffolded `{}` again in place from its PROJECT; `git status` and `git diff` show what changed.",
        project.project_name
    ));
    Ok(())
}
