//! Applying a plan: check every collision first, then write, one status line per file.
//!
//! Nothing is written unless the whole plan can be: conflicts and missing markers are found
//! before the first write, and a write that still fails (a path component that is a file, a
//! full disk) undoes every change made before it, so the tree is left as it was.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::scaffold::{Plan, Policy, markers};
use crate::ui::{self, UserError};

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
}

/// Applies `plan` under `root`. Files are written in path order, `PROJECT` last.
pub fn apply(root: &Path, plan: Plan, options: Options) -> anyhow::Result<()> {
    let changes = resolve(root, plan, options)?;
    if options.dry_run {
        for change in &changes {
            let verb = match change.action {
                Action::Create => "would create",
                Action::Update => "would update",
                Action::Overwrite => "would overwrite",
                Action::Keep => "would keep",
                Action::Unchanged => "unchanged",
                Action::Remove => "would remove",
            };
            ui::file(verb, &change.path);
        }
        return Ok(());
    }
    write_all(root, &changes)?;
    for change in &changes {
        let verb = match change.action {
            Action::Create => "created",
            Action::Update => "updated",
            Action::Overwrite => "overwrote",
            Action::Keep => "kept",
            Action::Unchanged => "unchanged",
            Action::Remove => "removed",
        };
        ui::file(verb, &change.path);
    }
    Ok(())
}

/// Decides what happens to every path, with no writes: the final contents of each file, or the
/// conflicts and missing markers that stop the whole plan.
fn resolve(root: &Path, plan: Plan, options: Options) -> anyhow::Result<Vec<Change>> {
    let mut changes: BTreeMap<PathBuf, Change> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for file in plan.files {
        let existing = read_existing(root, &file.path)?;
        let action = match (&existing, file.policy) {
            (None, _) => Action::Create,
            (Some(old), _) if *old == file.contents => Action::Unchanged,
            (Some(_), Policy::IfMissing) => Action::Unchanged,
            (Some(_), Policy::Regenerated) => Action::Update,
            // The user's own files are kept, even with --force.
            (Some(_), Policy::KeepExisting) => Action::Keep,
            (Some(_), _) if options.force => Action::Overwrite,
            (Some(_), _) => {
                conflicts.push(file.path.clone());
                continue;
            }
        };
        let contents = match action {
            Action::Keep | Action::Unchanged => existing.unwrap_or_default(),
            _ => file.contents,
        };
        changes.insert(
            file.path.clone(),
            Change {
                path: file.path,
                action,
                contents,
            },
        );
    }
    if !conflicts.is_empty() {
        let list: Vec<String> = conflicts
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect();
        return Err(UserError::new(format!(
            "{} already exist{} and would be overwritten",
            list.join(", "),
            if list.len() == 1 { "s" } else { "" }
        ))
        .help("pass --force to overwrite them")
        .into());
    }

    for insertion in plan.insertions {
        let change = match changes.get_mut(&insertion.path) {
            Some(change) => change,
            None => {
                let contents = read_existing(root, &insertion.path)?.ok_or_else(|| {
                    UserError::new(format!(
                        "cannot insert into `{}`: the file does not exist",
                        insertion.path.display()
                    ))
                    .help(
                        "restore the file from version control, or scaffold it again with --force",
                    )
                })?;
                changes.entry(insertion.path.clone()).or_insert(Change {
                    path: insertion.path.clone(),
                    action: Action::Unchanged,
                    contents,
                })
            }
        };
        if let Some(updated) = markers::insert(
            &insertion.path,
            &change.contents,
            &insertion.marker,
            &insertion.fragment,
            insertion.block,
        )? {
            change.contents = updated;
            if matches!(change.action, Action::Unchanged | Action::Keep) {
                change.action = Action::Update;
            }
        }
    }

    for path in plan.removals {
        // Any file goes, text or not; a folder or a missing path is left alone.
        let is_file = fs::symlink_metadata(root.join(&path)).is_ok_and(|meta| !meta.is_dir());
        if changes.contains_key(&path) || !is_file {
            continue;
        }
        changes.insert(
            path.clone(),
            Change {
                path,
                action: Action::Remove,
                contents: String::new(),
            },
        );
    }

    let read_only: Vec<String> = changes
        .values()
        .filter(|change| {
            matches!(
                change.action,
                Action::Update | Action::Overwrite | Action::Remove
            )
        })
        .filter(|change| {
            fs::metadata(root.join(&change.path)).is_ok_and(|meta| meta.permissions().readonly())
        })
        .map(|change| format!("`{}`", change.path.display()))
        .collect();
    if !read_only.is_empty() {
        return Err(UserError::new(format!(
            "{} {} read-only, and rsbuilder would change {}",
            read_only.join(", "),
            if read_only.len() == 1 { "is" } else { "are" },
            if read_only.len() == 1 { "it" } else { "them" },
        ))
        .help("make it writable (`chmod u+w <file>`), then run the command again")
        .into());
    }

    let mut changes: Vec<Change> = changes.into_values().collect();
    changes.sort_by_key(|change| {
        (
            change.path == Path::new(crate::project::FILE),
            change.path.clone(),
        )
    });
    Ok(changes)
}

/// The text of `relative` under `root`, or `None` when it does not exist; a folder in its
/// place or bytes that are not UTF-8 are errors that name it.
pub fn read_existing(root: &Path, relative: &Path) -> anyhow::Result<Option<String>> {
    let path = root.join(relative);
    match fs::read(&path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            UserError::new(format!(
                "`{}` exists and is not UTF-8 text",
                relative.display()
            ))
            .into()
        }),
        // A path below a file cannot exist; writing it fails later, and is undone.
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(_) if path.is_dir() => Err(UserError::new(format!(
            "`{}` is a directory, where rsbuilder would write a file",
            relative.display()
        ))
        .help("move the directory away, then run the command again")
        .into()),
        Err(error) => {
            Err(error).with_context(|| format!("failed to read `{}`", relative.display()))
        }
    }
}

/// What a write replaced, so that it can be put back.
enum Undo {
    RemoveFile(PathBuf),
    RemoveDir(PathBuf),
    Restore(PathBuf, Vec<u8>),
}

fn write_all(root: &Path, changes: &[Change]) -> anyhow::Result<()> {
    let mut journal = Vec::new();
    let mut dirs = std::collections::HashSet::new();
    for change in changes {
        if matches!(change.action, Action::Keep | Action::Unchanged) {
            continue;
        }
        if let Err(error) = write_one(root, change, &mut journal, &mut dirs) {
            let path = change.path.display();
            return Err(match rollback(journal) {
                Ok(()) => error.context(format!("failed to write `{path}`; nothing was changed")),
                Err(undo) => error.context(format!(
                    "failed to write `{path}`, and could not undo the earlier writes ({undo:#})"
                )),
            });
        }
    }
    Ok(())
}

/// Writes one change, journaling how to undo it; `dirs` holds the folders known to exist.
fn write_one(
    root: &Path,
    change: &Change,
    journal: &mut Vec<Undo>,
    dirs: &mut std::collections::HashSet<PathBuf>,
) -> anyhow::Result<()> {
    let path = root.join(&change.path);
    if change.action == Action::Remove {
        let old = fs::read(&path)?;
        fs::remove_file(&path)?;
        journal.push(Undo::Restore(path, old));
        return Ok(());
    }
    if let Some(parent) = path.parent()
        && !dirs.contains(parent)
    {
        let mut missing = Vec::new();
        let mut dir = parent;
        while !dir.exists() {
            missing.push(dir.to_path_buf());
            match dir.parent() {
                Some(up) => dir = up,
                None => break,
            }
        }
        for dir in missing.into_iter().rev() {
            fs::create_dir(&dir)?;
            journal.push(Undo::RemoveDir(dir));
        }
        dirs.insert(parent.to_path_buf());
    }
    // A file planned as new was missing when the plan was made, a moment ago: undoing its
    // write removes it, and reading it again first would only cost time.
    if change.action == Action::Create {
        if let Err(error) = fs::write(&path, &change.contents) {
            // A write that failed half way leaves a file behind.
            let _ = fs::remove_file(&path);
            return Err(error.into());
        }
        journal.push(Undo::RemoveFile(path));
        return Ok(());
    }
    match fs::read(&path) {
        Ok(old) => journal.push(Undo::Restore(path.clone(), old)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            journal.push(Undo::RemoveFile(path.clone()))
        }
        Err(error) => return Err(error.into()),
    }
    fs::write(&path, &change.contents)?;
    Ok(())
}

fn rollback(journal: Vec<Undo>) -> anyhow::Result<()> {
    for undo in journal.into_iter().rev() {
        match undo {
            Undo::RemoveFile(path) => match fs::remove_file(&path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => {
                    return Err(error)
                        .with_context(|| format!("failed to remove `{}`", path.display()));
                }
                _ => {}
            },
            Undo::RemoveDir(path) => fs::remove_dir(&path)
                .with_context(|| format!("failed to remove `{}`", path.display()))?,
            Undo::Restore(path, bytes) => fs::write(&path, bytes)
                .with_context(|| format!("failed to restore `{}`", path.display()))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaffold::{Insertion, PlannedFile};

    fn file(path: &str, contents: &str, policy: Policy) -> PlannedFile {
        PlannedFile {
            path: path.into(),
            contents: contents.into(),
            policy,
        }
    }

    fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out: Vec<_> = walkdir::WalkDir::new(root)
            .into_iter()
            .map(|e| e.unwrap())
            .map(|e| {
                let bytes = if e.file_type().is_file() {
                    fs::read(e.path()).unwrap()
                } else {
                    Vec::new()
                };
                (e.path().strip_prefix(root).unwrap().to_path_buf(), bytes)
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn writes_files_and_insertions() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            files: vec![file(
                "a/b.yaml",
                "x: 1\n# +rsbuilder:scaffold:list\n",
                Policy::Owned,
            )],
            insertions: vec![Insertion {
                path: "a/b.yaml".into(),
                marker: "list".into(),
                fragment: "y: 2\n".into(),
                block: false,
            }],
            removals: Vec::new(),
        };
        apply(dir.path(), plan, Options::default()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b.yaml")).unwrap(),
            "x: 1\ny: 2\n# +rsbuilder:scaffold:list\n"
        );
    }

    #[test]
    fn conflicts_stop_everything_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("b.txt"), "mine").unwrap();
        let before = snapshot(dir.path());
        let plan = Plan {
            files: vec![
                file("a.txt", "new", Policy::Owned),
                file("b.txt", "theirs", Policy::Owned),
            ],
            insertions: Vec::new(),
            removals: Vec::new(),
        };
        let error = apply(dir.path(), plan, Options::default()).unwrap_err();
        assert!(
            error.to_string().contains("`b.txt` already exists"),
            "{error}"
        );
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn user_files_are_kept_even_when_forced() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("README.md"), "mine").unwrap();
        let plan = || Plan {
            files: vec![file("README.md", "theirs", Policy::KeepExisting)],
            insertions: Vec::new(),
            removals: Vec::new(),
        };
        apply(dir.path(), plan(), Options::default()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("README.md")).unwrap(),
            "mine"
        );
        apply(
            dir.path(),
            plan(),
            Options {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("README.md")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_failed_write_undoes_the_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("keep.txt"), "old").unwrap();
        // `z` is a file, so `z/late.txt` cannot be written after the others were.
        fs::write(dir.path().join("z"), "in the way").unwrap();
        let before = snapshot(dir.path());
        let plan = Plan {
            files: vec![
                file("a/deep/early.txt", "1", Policy::Owned),
                file("keep.txt", "new", Policy::Owned),
                file("z/late.txt", "2", Policy::Owned),
            ],
            insertions: Vec::new(),
            removals: Vec::new(),
        };
        let error = apply(
            dir.path(),
            plan,
            Options {
                force: true,
                dry_run: false,
            },
        )
        .unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with("failed to write `z/late.txt`; nothing was changed"),
            "{message}"
        );
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn a_missing_marker_stops_everything() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("main.rs"), "fn main() {}\n").unwrap();
        let before = snapshot(dir.path());
        let plan = Plan {
            files: vec![file("new.rs", "//! new\n", Policy::Owned)],
            insertions: vec![Insertion {
                path: "main.rs".into(),
                marker: "controllers".into(),
                fragment: "a();\n".into(),
                block: false,
            }],
            removals: Vec::new(),
        };
        let error = apply(dir.path(), plan, Options::default()).unwrap_err();
        assert!(error.to_string().contains("`main.rs`"), "{error}");
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn read_only_files_are_not_changed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("role.yaml");
        fs::write(&locked, "old").unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o444)).unwrap();
        let before = snapshot(dir.path());
        let plan = Plan {
            files: vec![
                file("a.yaml", "new", Policy::Owned),
                file("role.yaml", "new", Policy::Regenerated),
            ],
            insertions: Vec::new(),
            removals: Vec::new(),
        };
        let error = apply(dir.path(), plan, Options::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`role.yaml` is read-only, and rsbuilder would change it"
        );
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn removals_delete_files_and_are_undone_with_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("old.rs"), [0xff, 0xfe, 0x00]).unwrap();
        fs::write(dir.path().join("z"), "in the way").unwrap();
        let before = snapshot(dir.path());
        let plan = || Plan {
            files: vec![file("z/late.txt", "2", Policy::Owned)],
            insertions: Vec::new(),
            removals: vec!["old.rs".into(), "never-there.rs".into()],
        };
        apply(dir.path(), plan(), Options::default()).unwrap_err();
        assert_eq!(snapshot(dir.path()), before, "the removal was undone");

        fs::remove_file(dir.path().join("z")).unwrap();
        apply(dir.path(), plan(), Options::default()).unwrap();
        assert!(!dir.path().join("old.rs").exists());
        assert!(dir.path().join("z/late.txt").exists());
    }

    #[test]
    fn a_dry_run_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            files: vec![file("a.txt", "new", Policy::Owned)],
            insertions: Vec::new(),
            removals: Vec::new(),
        };
        apply(
            dir.path(),
            plan,
            Options {
                force: false,
                dry_run: true,
            },
        )
        .unwrap();
        assert!(!dir.path().join("a.txt").exists());
    }
}
