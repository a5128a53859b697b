//! The writes of a resolved plan: journaled, atomic, and guarded from Ctrl-C.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;

use crate::ui::UserError;

use super::journal::{Entry, JOURNAL, Journal, finish, undo, write_atomically};
use super::{Action, Change};

/// Refuses to write through a symbolic link: a file of the plan, or a folder on its way, that
/// is a link would send the write outside the project.
pub(super) fn refuse_links(root: &Path, changes: &[Change]) -> anyhow::Result<()> {
    for change in changes {
        if matches!(change.action, Action::Keep | Action::Unchanged) {
            continue;
        }
        let mut at = root.to_path_buf();
        for component in change.path.components() {
            at.push(component);
            let is_link = fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
            if is_link {
                let link = at.strip_prefix(root).unwrap_or(&at);
                return Err(UserError::new(format!(
                    "`{}` is a symbolic link: rsbuilder writes only inside the project, never through links",
                    link.display()
                ))
                .help(format!(
                    "replace `{}` with the file or folder it points to, or remove it, then run the command again",
                    link.display()
                ))
                .into());
            }
        }
    }
    Ok(())
}

pub(super) fn write_all(root: &Path, changes: &[Change]) -> anyhow::Result<()> {
    refuse_links(root, changes)?;
    if changes
        .iter()
        .all(|change| matches!(change.action, Action::Keep | Action::Unchanged))
    {
        return Ok(());
    }
    guarded(|interrupted| write_journaled(root, changes, interrupted))
}

/// Runs `write` with Ctrl-C and SIGTERM caught: they no longer end the process, they set the
/// flag `write` is given, which it checks between its steps to stop and undo what it wrote.
/// Afterwards they end the process again, as before.
pub fn guarded<T>(write: impl FnOnce(&AtomicBool) -> T) -> T {
    let interrupted = Arc::new(AtomicBool::new(false));
    let defaults = signal_defaults();
    defaults.store(false, Ordering::SeqCst);
    let handlers: Vec<_> = TERMINATING
        .into_iter()
        .filter_map(|signal| signal_hook::flag::register(signal, interrupted.clone()).ok())
        .collect();
    let result = write(&interrupted);
    for handler in handlers {
        signal_hook::low_level::unregister(handler);
    }
    defaults.store(true, Ordering::SeqCst);
    result
}

/// The signals that end rsbuilder, but for the time of a write.
pub(super) const TERMINATING: [std::ffi::c_int; 2] =
    [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM];

/// Whether the signals of [`TERMINATING`] take their default action (end the process).
///
/// Once a handler is installed for a signal, removing it does not give the signal its default
/// action back: signal-hook keeps its own handler, which then does nothing. So a handler that
/// runs the default action while this is true is installed once, before the first write.
pub(super) fn signal_defaults() -> &'static AtomicBool {
    static DEFAULTS: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| {
        let defaults = Arc::new(AtomicBool::new(true));
        for signal in TERMINATING {
            // Without it, a signal after the first write would be ignored, not fatal: worse,
            // but no write is at stake.
            let _ = signal_hook::flag::register_conditional_default(signal, defaults.clone());
        }
        defaults
    })
}

pub(super) fn write_journaled(
    root: &Path,
    changes: &[Change],
    interrupted: &AtomicBool,
) -> anyhow::Result<()> {
    write_phases(root, changes, None, interrupted).map(|_| ())
}

/// The second part of a write: the files it may write itself, and the changes planned from the
/// tree the first part leaves.
pub(super) type Then<'a> = (
    &'a [&'a Path],
    &'a mut dyn FnMut(&Path) -> anyhow::Result<Vec<Change>>,
);

/// Writes `changes`, then those `then` plans, under one journal; on a failure, undoes them all.
/// The changes of the second part.
pub(super) fn write_phases(
    root: &Path,
    changes: &[Change],
    then: Option<Then<'_>>,
    interrupted: &AtomicBool,
) -> anyhow::Result<Vec<Change>> {
    let mut journal = Journal::begin(root)?;
    let mut dirs = std::collections::HashSet::new();
    let written = || -> Result<Vec<Change>, (anyhow::Error, Option<PathBuf>)> {
        write_each(root, changes, &mut journal, &mut dirs, interrupted)?;
        let Some((also, then)) = then else {
            return Ok(Vec::new());
        };
        for path in also {
            let entry = if root.join(path).exists() {
                Entry::Replace(path.to_path_buf())
            } else {
                Entry::Create(path.to_path_buf())
            };
            journal
                .record(entry)
                .map_err(|error| (error, Some(path.to_path_buf())))?;
        }
        let second = then(root).map_err(|error| (error, None))?;
        // Ctrl-C while the second part was planned (a build) stops the write too.
        if interrupted.load(Ordering::SeqCst) {
            return Err((UserError::new("interrupted").into(), None));
        }
        refuse_links(root, &second).map_err(|error| (error, None))?;
        write_each(root, &second, &mut journal, &mut dirs, interrupted)?;
        Ok(second)
    };
    let (error, path) = match written() {
        Ok(second) => {
            finish(root)?;
            remove_emptied_folders(root, changes.iter().chain(&second));
            return Ok(second);
        }
        Err(failed) => failed,
    };
    let failures = undo(root, &journal.entries);
    let what = path.map_or_else(String::new, |path| {
        format!("failed to write `{}`", path.display())
    });
    if failures.is_empty() {
        finish(root)?;
        if what.is_empty() {
            return Err(error);
        }
        return Err(error.context(format!("{what}; nothing was changed")));
    }
    Err(error.context(format!(
        "{}could not undo every earlier write: {}; the next rsbuilder command in this project tries again (`{JOURNAL}`)",
        if what.is_empty() { String::new() } else { format!("{what}, and ") },
        failures.join("; ")
    )))
}

/// Removes the folders that the removals among `changes` left empty, deepest first, up to the
/// project's root: a folder the command emptied (`runtime/` when `edit --runtime` drops the
/// copy) goes with its files. Once everything is written, nothing needs undoing; a folder that
/// cannot be removed (it holds something else) stays.
fn remove_emptied_folders<'a>(root: &Path, changes: impl Iterator<Item = &'a Change>) {
    let mut folders = std::collections::BTreeSet::new();
    for change in changes.filter(|change| change.action == Action::Remove) {
        let mut dir = change.path.parent();
        while let Some(parent) = dir.filter(|d| !d.as_os_str().is_empty()) {
            folders.insert(parent.to_path_buf());
            dir = parent.parent();
        }
    }
    // Deepest first: a folder's subfolders go before it.
    let mut folders: Vec<PathBuf> = folders.into_iter().collect();
    folders.sort_by_key(|folder| std::cmp::Reverse(folder.components().count()));
    for folder in folders {
        let _ = fs::remove_dir(root.join(folder));
    }
}

/// Writes each change in turn, journaled; the first failure, with the path it was writing.
pub(super) fn write_each(
    root: &Path,
    changes: &[Change],
    journal: &mut Journal,
    dirs: &mut std::collections::HashSet<PathBuf>,
    interrupted: &AtomicBool,
) -> Result<(), (anyhow::Error, Option<PathBuf>)> {
    for change in changes {
        if matches!(change.action, Action::Keep | Action::Unchanged) {
            continue;
        }
        let written = if interrupted.load(Ordering::SeqCst) {
            Err(UserError::new("interrupted").into())
        } else {
            write_one(root, change, journal, dirs)
        };
        written.map_err(|error| (error, Some(change.path.clone())))?;
    }
    Ok(())
}

/// Writes one change, journaled first; `dirs` holds the folders known to exist.
pub(super) fn write_one(
    root: &Path,
    change: &Change,
    journal: &mut Journal,
    dirs: &mut std::collections::HashSet<PathBuf>,
) -> anyhow::Result<()> {
    let path = root.join(&change.path);
    if change.action == Action::Remove {
        journal.record(Entry::Remove(change.path.clone()))?;
        fs::remove_file(&path)?;
        return Ok(());
    }
    if let Some(parent) = change.path.parent()
        && !dirs.contains(parent)
    {
        let mut missing = Vec::new();
        let mut dir = parent;
        while !dir.as_os_str().is_empty() && !root.join(dir).exists() {
            missing.push(dir.to_path_buf());
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
        for dir in missing.into_iter().rev() {
            journal.record(Entry::Dir(dir.clone()))?;
            fs::create_dir(root.join(&dir))?;
        }
        dirs.insert(parent.to_path_buf());
    }
    // A file planned as new was missing when the plan was made, under the lock.
    if change.action == Action::Create || !path.exists() {
        journal.record(Entry::Create(change.path.clone()))?;
    } else {
        journal.record(Entry::Replace(change.path.clone()))?;
    }
    write_atomically(&path, change.contents.as_bytes())?;
    Ok(())
}

/// Makes `dir` (new, or empty) and has `fill` write into it; when `fill` fails, `dir` is
/// removed again, or emptied when it existed, so that a failed command leaves nothing behind.
pub fn fill_new_dir(
    dir: &Path,
    fill: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let existed = dir.exists();
    fs::create_dir_all(dir).with_context(|| format!("failed to create `{}`", dir.display()))?;
    let result = fill(dir);
    if result.is_err() {
        if existed {
            for entry in fs::read_dir(dir)?.flatten() {
                let path = entry.path();
                let _ = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
            }
        } else {
            let _ = fs::remove_dir_all(dir);
        }
    }
    result
}
