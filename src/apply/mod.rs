//! Applying a plan: check every collision first, then write, one status line per file.
//!
//! Nothing is written unless the whole plan can be: conflicts and missing markers are found
//! before the first write, and a write that still fails (a path component that is a file, a
//! full disk) undoes every change made before it, so the tree is left as it was.

//!
//! The modules, by concern: `lock` (one command at a time, and the recovery it starts with),
//! `resolve` (a plan against a tree, with no writes), `journal` (what a write records first,
//! and its undoing), `write` (the writes, guarded from Ctrl-C), `scratch` (folders that are
//! not the project's).

mod journal;
mod lock;
mod resolve;
mod scratch;
pub mod swap;
mod write;

use std::path::{Path, PathBuf};

use crate::scaffold::Plan;
use crate::tree::OnDisk;
use crate::ui;

pub use lock::{ProjectLock, lock};
pub use resolve::read_existing;
pub use scratch::{Scratch, carry};
pub use write::{fill_new_dir, guarded};

use resolve::resolve;
use write::{refuse_links, write_all, write_phases};

/// How to apply.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Overwrite files that exist with other contents.
    pub force: bool,
    /// Only list what would change.
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Create,
    Update,
    Overwrite,
    Keep,
    Unchanged,
    Remove,
}

struct Change {
    path: PathBuf,
    action: Action,
    contents: String,
    /// What the file held before, for a change that replaces it: a plan whose insertions
    /// give back the same bytes leaves the file unchanged, `--force` or not.
    before: Option<String>,
}

/// Applies `plan` under `root`. Files are written in path order, `PROJECT` last.
pub fn apply(root: &Path, plan: Plan, options: Options) -> anyhow::Result<()> {
    let changes = resolve(&OnDisk(root), plan, options)?;
    if options.dry_run {
        // The listing is what the command was asked for: data, on stdout.
        let mut listing = String::new();
        for change in &changes {
            let verb = match change.action {
                Action::Create => "would create",
                Action::Update => "would update",
                Action::Overwrite => "would overwrite",
                Action::Keep => "would keep",
                Action::Unchanged => "unchanged",
                Action::Remove => "would remove",
            };
            listing.push_str(&format!("{verb} {}\n", change.path.display()));
        }
        return ui::data(listing.as_bytes());
    }
    write_all(root, &changes)?;
    for change in &changes {
        ui::file(done(change.action), &change.path);
    }
    Ok(())
}

/// The status word of a change made.
fn done(action: Action) -> &'static str {
    match action {
        Action::Create => "created",
        Action::Update => "updated",
        Action::Overwrite => "overwrote",
        Action::Keep => "kept",
        Action::Unchanged => "unchanged",
        Action::Remove => "removed",
    }
}

/// Writes `plan` (as `apply --force` does), then the plan `then` makes of the tree that
/// leaves, under the same journal: one write, undone whole when either part fails or the
/// process is killed. `alpha update` writes its merge so, with the manifests `generate` makes
/// of the merged code in place. `also` names files `then` may write itself (cargo's
/// `Cargo.lock`): they are journaled before it runs, and undone with the rest. The status of
/// each file, as printed: once a file, as the write left it.
pub fn apply_then(
    root: &Path,
    plan: Plan,
    also: &[&Path],
    then: impl FnOnce(&Path) -> anyhow::Result<Plan>,
) -> anyhow::Result<Vec<(&'static str, PathBuf)>> {
    let options = Options {
        force: true,
        dry_run: false,
    };
    let changes = resolve(&OnDisk(root), plan, options)?;
    refuse_links(root, &changes)?;
    let mut then = Some(then);
    let mut next = |root: &Path| -> anyhow::Result<Vec<Change>> {
        let then = then.take().expect("the second part is planned once");
        resolve(&OnDisk(root), then(root)?, options)
    };
    let second =
        guarded(|interrupted| write_phases(root, &changes, Some((also, &mut next)), interrupted))?;
    // A file the second part changes again is reported as it left it.
    let again: std::collections::HashSet<&Path> = second
        .iter()
        .filter(|change| !matches!(change.action, Action::Keep | Action::Unchanged))
        .map(|change| change.path.as_path())
        .collect();
    // A file of the first part the second leaves as it is was reported already.
    let first: std::collections::HashSet<&Path> =
        changes.iter().map(|change| change.path.as_path()).collect();
    let statuses: Vec<(&'static str, PathBuf)> = changes
        .iter()
        .filter(|change| !again.contains(change.path.as_path()))
        .chain(second.iter().filter(|change| {
            !first.contains(change.path.as_path()) || again.contains(change.path.as_path())
        }))
        .map(|change| (done(change.action), change.path.clone()))
        .collect();
    for (verb, path) in &statuses {
        ui::file(verb, path);
    }
    Ok(statuses)
}

/// Applies `plan` to a project in memory, as `apply` does to one on disk: the same decisions,
/// conflicts and refusals, with the files of `tree` changed instead of written.
#[cfg(test)]
pub fn apply_in_memory(
    tree: &mut crate::tree::Memory,
    plan: Plan,
    options: Options,
) -> anyhow::Result<()> {
    for change in resolve(tree, plan, options)? {
        match change.action {
            Action::Remove => {
                tree.files.remove(&change.path);
            }
            Action::Keep | Action::Unchanged => {}
            Action::Create | Action::Update | Action::Overwrite => {
                tree.files.insert(change.path, change.contents);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
