//! One module per command. Each runs the same steps: open the project (`open`: find its root,
//! lock it, undo an interrupted command), load PROJECT, resolve the flags into a request, plan
//! every file in memory (PROJECT last, through `Project::planned`), apply the plan, and print
//! what to do next.

pub mod alpha;
pub mod create_api;
pub mod create_webhook;
pub mod edit;
pub mod generate;
pub mod init;
pub mod update;
pub mod upgrade;

use std::path::PathBuf;

use anyhow::Context as _;

use crate::apply::{self, ProjectLock};
use crate::cli::{AlphaCommand, Cli, Command, CreateCommand};
use crate::project;
use crate::versions;

/// The project around the current directory, locked for one command.
pub struct Open {
    /// The project's root, where PROJECT is.
    pub root: PathBuf,
    _lock: ProjectLock,
}

/// Finds the project around the current directory and takes its lock, so that one command at
/// a time plans and writes it; an interrupted command's writes are undone first.
pub fn open() -> anyhow::Result<Open> {
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    // PROJECT may be aside, or the current folder with it, in an `alpha generate --force` that
    // was interrupted: the lock puts them back. The project is the nearer of the two roots.
    let root = match (
        project::find_root(&cwd),
        crate::apply::swap::interrupted_root(&cwd),
    ) {
        (_, Some((swapped, true))) => swapped,
        (Ok(root), Some((swapped, false))) if swapped.starts_with(&root) => swapped,
        (Ok(root), _) => root,
        (Err(_), Some((swapped, _))) => swapped,
        (Err(error), None) => return Err(error.into()),
    };
    let lock = apply::lock(&root)?;
    Ok(Open { root, _lock: lock })
}

/// After a command that scaffolded code against the runtime: a note when the project's runtime
/// is older than this rsbuilder's, whose scaffold the new code follows.
pub fn note_older_runtime(project: &project::Project) {
    let Some(recorded) = &project.runtime else {
        return;
    };
    let installed = crate::runtime::version();
    let older = match (
        semver::Version::parse(&recorded.version),
        semver::Version::parse(&installed),
    ) {
        (Ok(recorded), Ok(installed)) => recorded < installed,
        _ => false,
    };
    if older {
        crate::ui::note(&format!(
            "the project's runtime is rsbuilder-runtime {}, older than this rsbuilder's {installed}, which the new code is written for: `rsbuilder upgrade` brings it",
            recorded.version
        ));
    }
}

/// Applies the plan of a command that scaffolds; whether it wrote (not with `--dry-run`).
fn apply_plan(
    root: &std::path::Path,
    plan: crate::scaffold::Plan,
    force: bool,
    dry_run: bool,
) -> anyhow::Result<bool> {
    apply::apply(root, plan, apply::Options { force, dry_run })?;
    Ok(!dry_run)
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init(args) => init::run(args),
        Command::Create(CreateCommand::Api(args)) => create_api::run(args),
        Command::Create(CreateCommand::Webhook(args)) => create_webhook::run(args),
        Command::Edit(args) => edit::run(args),
        Command::Generate { check } => generate::run(check),
        Command::Upgrade { force, dry_run } => {
            upgrade::run(upgrade::UpgradeOptions { force, dry_run })
        }
        Command::Alpha(AlphaCommand::Generate(args)) => alpha::generate(args),
        Command::Alpha(AlphaCommand::Update(args)) => update::update(args),
        Command::Version => {
            let text = format!(
                "rsbuilder {}\nrsbuilder-runtime {}\nkube {}\nk8s-openapi {}\nkubernetes {} (k8s-openapi feature {})\n",
                versions::RSBUILDER,
                crate::runtime::version(),
                versions::KUBE,
                versions::K8S_OPENAPI,
                versions::KUBERNETES,
                versions::K8S_OPENAPI_FEATURE
            );
            crate::ui::data(text.as_bytes())
        }
        Command::Completion { shell } => crate::ui::data(&crate::cli::completions(shell)),
    }
}
