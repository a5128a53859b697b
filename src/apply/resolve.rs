//! A plan resolved against a tree: every file's fate decided, with no writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::scaffold::{Insertion, Plan, PlannedFile, Policy, markers};
use crate::tree::{OnDisk, Tree};
use crate::ui::UserError;

use super::{Action, Change, Options};

/// Decides what happens to every path, with no writes: the final contents of each file, or the
/// conflicts and missing markers that stop the whole plan. The steps, in order: the planned
/// files under their policies, the insertions into them or into the files of `tree`, the
/// removals, then the files derived from the tree as all of that leaves it.
pub(super) fn resolve(
    tree: &dyn Tree,
    plan: Plan,
    options: Options,
) -> anyhow::Result<Vec<Change>> {
    let mut changes = resolve_files(tree, plan.files, options)?;
    resolve_insertions(tree, plan.insertions, &mut changes)?;
    for path in plan.removals {
        // Any file goes, text or not; a folder or a missing path is left alone.
        if changes.contains_key(&path) || !tree.is_file(&path) {
            continue;
        }
        changes.insert(
            path.clone(),
            Change {
                path,
                action: Action::Remove,
                contents: String::new(),
                before: None,
            },
        );
    }
    for derived in plan.derived {
        let view = View {
            tree,
            changes: &changes,
        };
        // A bad marker the user wrote is named by its line in the file as the user has it,
        // before insertions move it; an error only the plan brings is named in the view.
        let contents = match (derived.derive)(&view) {
            Ok(contents) => contents,
            Err(error) => return Err((derived.derive)(tree).err().unwrap_or(error)),
        };
        let existing = tree.read(&derived.path)?;
        let action = match &existing {
            None => Action::Create,
            Some(old) if *old == contents => Action::Unchanged,
            Some(_) => Action::Update,
        };
        changes.insert(
            derived.path.clone(),
            Change {
                path: derived.path,
                action,
                contents,
                before: existing,
            },
        );
    }
    refuse_read_only(tree, &changes)?;
    let mut changes: Vec<Change> = changes.into_values().collect();
    changes.sort_by_key(|change| {
        (
            change.path == Path::new(crate::project::FILE),
            change.path.clone(),
        )
    });
    Ok(changes)
}

/// The planned files under their policies; every file that would overwrite one of another
/// content, without `--force`, is named in one refusal.
pub(super) fn resolve_files(
    tree: &dyn Tree,
    files: Vec<PlannedFile>,
    options: Options,
) -> anyhow::Result<BTreeMap<PathBuf, Change>> {
    let mut changes = BTreeMap::new();
    let mut conflicts = Vec::new();
    for file in files {
        let existing = tree.read(&file.path)?;
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
        let (contents, before) = match action {
            Action::Keep | Action::Unchanged => (existing.unwrap_or_default(), None),
            _ => (file.contents, existing),
        };
        changes.insert(
            file.path.clone(),
            Change {
                path: file.path,
                action,
                contents,
                before,
            },
        );
    }
    if conflicts.is_empty() {
        return Ok(changes);
    }
    let list: Vec<String> = conflicts
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect();
    Err(UserError::new(format!(
        "{} already exist{} and would be overwritten",
        list.join(", "),
        if list.len() == 1 { "s" } else { "" }
    ))
    .help(if list.len() == 1 {
        "pass --force to overwrite it"
    } else {
        "pass --force to overwrite them"
    })
    .into())
}

/// Each insertion into the file as the plan leaves it, or as `tree` holds it. A file rendered
/// anew (`--force`) whose insertions give back what it holds is unchanged.
pub(super) fn resolve_insertions(
    tree: &dyn Tree,
    insertions: Vec<Insertion>,
    changes: &mut BTreeMap<PathBuf, Change>,
) -> anyhow::Result<()> {
    for insertion in insertions {
        let change = match changes.get_mut(&insertion.path) {
            Some(change) => change,
            None => {
                let contents = tree.read(&insertion.path)?.ok_or_else(|| {
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
                    before: None,
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
            if matches!(change.action, Action::Unchanged | Action::Keep) {
                change.action = Action::Update;
                change.before.get_or_insert_with(|| change.contents.clone());
            }
            change.contents = updated;
        }
    }
    for change in changes.values_mut() {
        if matches!(change.action, Action::Update | Action::Overwrite)
            && change.before.as_ref() == Some(&change.contents)
        {
            change.action = Action::Unchanged;
        }
    }
    Ok(())
}

/// Refuses a plan that changes or removes a read-only file, naming every such file.
pub(super) fn refuse_read_only(
    tree: &dyn Tree,
    changes: &BTreeMap<PathBuf, Change>,
) -> anyhow::Result<()> {
    let read_only: Vec<String> = changes
        .values()
        .filter(|change| {
            matches!(
                change.action,
                Action::Update | Action::Overwrite | Action::Remove
            )
        })
        .filter(|change| tree.is_read_only(&change.path))
        .map(|change| format!("`{}`", change.path.display()))
        .collect();
    if read_only.is_empty() {
        return Ok(());
    }
    Err(UserError::new(format!(
        "{} {} read-only, and rsbuilder would change {}",
        read_only.join(", "),
        if read_only.len() == 1 { "is" } else { "are" },
        if read_only.len() == 1 { "it" } else { "them" },
    ))
    .help("make it writable (`chmod u+w <file>`), then run the command again")
    .into())
}

/// The tree as a plan leaves it, before the derived files: the files it writes, inserts into
/// and removes laid over the tree it was resolved against.
pub(super) struct View<'a> {
    pub(super) tree: &'a dyn Tree,
    pub(super) changes: &'a BTreeMap<PathBuf, Change>,
}

impl Tree for View<'_> {
    fn read(&self, relative: &Path) -> anyhow::Result<Option<String>> {
        match self.changes.get(relative) {
            Some(change) if change.action == Action::Remove => Ok(None),
            Some(change) => Ok(Some(change.contents.clone())),
            None => self.tree.read(relative),
        }
    }

    fn is_file(&self, relative: &Path) -> bool {
        match self.changes.get(relative) {
            Some(change) => change.action != Action::Remove,
            None => self.tree.is_file(relative),
        }
    }

    fn is_read_only(&self, relative: &Path) -> bool {
        self.tree.is_read_only(relative)
    }

    fn files_below(
        &self,
        dir: &Path,
        prune: &dyn Fn(&Path) -> bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let mut files: std::collections::BTreeSet<PathBuf> =
            self.tree.files_below(dir, prune)?.into_iter().collect();
        for (path, change) in self.changes {
            let pruned = path
                .ancestors()
                .skip(1)
                .take_while(|folder| folder.starts_with(dir) && *folder != dir)
                .any(prune);
            if !path.starts_with(dir) || pruned {
                continue;
            }
            if change.action == Action::Remove {
                files.remove(path);
            } else {
                files.insert(path.clone());
            }
        }
        Ok(files.into_iter().collect())
    }
}

/// The text of `relative` under `root`, or `None` when it does not exist; a folder in its
/// place or bytes that are not UTF-8 are errors that name it.
pub fn read_existing(root: &Path, relative: &Path) -> anyhow::Result<Option<String>> {
    OnDisk(root).read(relative)
}
