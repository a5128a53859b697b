//! Applying a plan: check every collision first, then write, one status line per file.
//!
//! Nothing is written unless the whole plan can be: conflicts and missing markers are found
//! before the first write, and a write that still fails (a path component that is a file, a
//! full disk) undoes every change made before it, so the tree is left as it was.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;

use crate::scaffold::{Insertion, Plan, PlannedFile, Policy, markers};
use crate::tree::{OnDisk, Tree};
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

/// Decides what happens to every path, with no writes: the final contents of each file, or the
/// conflicts and missing markers that stop the whole plan. The steps, in order: the planned
/// files under their policies, the insertions into them or into the files of `tree`, the
/// removals, then the files derived from the tree as all of that leaves it.
fn resolve(tree: &dyn Tree, plan: Plan, options: Options) -> anyhow::Result<Vec<Change>> {
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
fn resolve_files(
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
fn resolve_insertions(
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
fn refuse_read_only(tree: &dyn Tree, changes: &BTreeMap<PathBuf, Change>) -> anyhow::Result<()> {
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
struct View<'a> {
    tree: &'a dyn Tree,
    changes: &'a BTreeMap<PathBuf, Change>,
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

    fn files_under(&self, dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>> {
        let mut files: std::collections::BTreeSet<PathBuf> =
            self.tree.files_under(dir, extension)?.into_iter().collect();
        for (path, change) in self.changes {
            if !path.starts_with(dir) || path.extension().is_none_or(|e| e != extension) {
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

/// The journal of the command that is writing the project: what it created, replaced and
/// removed, in order, so that an interrupted command can be undone. It lives in the project's
/// root while the command writes, and is removed when the command ends.
pub const JOURNAL: &str = ".rsbuilder-journal";
/// Where the journal keeps the files it replaced or removed, as they were.
pub const UNDO_DIR: &str = ".rsbuilder-undo";

/// The exclusive lock of one project: one rsbuilder command at a time plans and writes it.
/// Released when dropped, or when the process ends however it ends.
#[derive(Debug)]
pub struct ProjectLock {
    _dir: fs::File,
}

/// Takes the lock of the project in `root`, waiting while another rsbuilder command holds it,
/// then undoes what an interrupted command left half written (its journal). Take it before
/// reading anything the plan depends on, and hold it to the end of the command.
pub fn lock(root: &Path) -> anyhow::Result<ProjectLock> {
    let dir = fs::File::open(root)
        .with_context(|| format!("failed to open `{}` to lock it", root.display()))?;
    match dir.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            ui::note(&waiting_message(root));
            dir.lock()
                .with_context(|| format!("failed to lock `{}`", root.display()))?;
        }
        Err(fs::TryLockError::Error(error)) => {
            return Err(error).with_context(|| format!("failed to lock `{}`", root.display()));
        }
    }
    recover(root)?;
    crate::swap::recover(root)?;
    Ok(ProjectLock { _dir: dir })
}

/// What a command says while it waits for the lock: which process holds it, when
/// `/proc/locks` tells, and that the holder may be waiting at a prompt.
fn waiting_message(root: &Path) -> String {
    let holder = lock_holder(root)
        .map(|(pid, command)| format!(": process {pid} (`{command}`) holds its lock"))
        .unwrap_or_default();
    format!(
        "waiting for another rsbuilder command in this project to finish{holder}; if it asks a question, answer it in its terminal"
    )
}

/// The process holding the lock of the folder `root`, and its command line.
fn lock_holder(root: &Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let folder = fs::metadata(root).ok()?;
    let pid = lock_owner(
        &fs::read_to_string("/proc/locks").ok()?,
        folder.dev(),
        folder.ino(),
    )?;
    let command = command_line(&fs::read(format!("/proc/{pid}/cmdline")).ok()?)?;
    Some((pid, command))
}

/// A process's command line as `/proc/<pid>/cmdline` holds it (arguments ended by NUL
/// bytes), for a person: the program's file name and its arguments, separated by spaces.
fn command_line(cmdline: &[u8]) -> Option<String> {
    let mut args = cmdline
        .split(|byte| *byte == 0)
        .filter(|arg| !arg.is_empty())
        .map(String::from_utf8_lossy);
    let program = args.next()?;
    let program = program.rsplit('/').next().unwrap_or_default().to_owned();
    Some(
        std::iter::once(program)
            .chain(args.map(|arg| arg.into_owned()))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// The pid that holds a `flock` on the file `dev`/`ino` in the text of `/proc/locks`, whose
/// lines read `1: FLOCK  ADVISORY  WRITE 4321 fd:01:1234 0 EOF` (a waiter's line has `->`
/// after the number, and is not a holder).
fn lock_owner(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    // The kernel's 12-bit major and 20-bit minor in the 32 bits it gives `st_dev`: the minor's
    // low byte, the major, then the rest of the minor.
    let major = (dev >> 8) & 0xfff;
    let minor = (dev & 0xff) + ((dev >> 12) & !0xff);
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == file => pid.parse().ok(),
            _ => None,
        }
    })
}

/// Undoes the changes of a command that was interrupted while it wrote (killed, or the machine
/// stopped): the tree goes back to what it was before that command.
fn recover(root: &Path) -> anyhow::Result<()> {
    let journal = root.join(JOURNAL);
    let text = match fs::read_to_string(&journal) {
        Ok(text) => text,
        // No command was interrupted while it wrote; copies may remain of one interrupted
        // just after it finished.
        Err(error) if error.kind() == io::ErrorKind::NotFound => return remove_copies(root),
        Err(error) => {
            return Err(error).with_context(|| format!("failed to read `{JOURNAL}`"));
        }
    };
    let entries: Vec<Entry> = text.lines().filter_map(Entry::parse).collect();
    let failures = undo(root, &entries);
    if !failures.is_empty() {
        return Err(UserError::new(format!(
            "an earlier rsbuilder command was interrupted, and its changes could not all be undone: {}",
            failures.join("; ")
        ))
        .help(format!(
            "restore those files from version control (the originals are in `{UNDO_DIR}`), then delete `{JOURNAL}`"
        ))
        .into());
    }
    finish(root)?;
    ui::note("an earlier rsbuilder command was interrupted: its changes were undone");
    Ok(())
}

/// One step of a command's writes, as the journal records it before the step is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A folder that did not exist.
    Dir(PathBuf),
    /// A file that did not exist.
    Create(PathBuf),
    /// A file replaced; its old bytes are under [`UNDO_DIR`].
    Replace(PathBuf),
    /// A file removed; its old bytes are under [`UNDO_DIR`].
    Remove(PathBuf),
}

impl Entry {
    fn line(&self) -> String {
        let (word, path) = match self {
            Self::Dir(path) => ("dir", path),
            Self::Create(path) => ("create", path),
            Self::Replace(path) => ("replace", path),
            Self::Remove(path) => ("remove", path),
        };
        format!("{word}\t{}\n", path.display())
    }

    fn parse(line: &str) -> Option<Self> {
        let (word, path) = line.split_once('\t')?;
        let path = PathBuf::from(path);
        match word {
            "dir" => Some(Self::Dir(path)),
            "create" => Some(Self::Create(path)),
            "replace" => Some(Self::Replace(path)),
            "remove" => Some(Self::Remove(path)),
            _ => None,
        }
    }
}

/// The temporary file a new version of `path` is written to before it is renamed into place.
fn temporary(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.rsbuilder-new"))
}

/// Writes `bytes` to `path` whole or not at all: to a temporary file beside it, renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temporary = temporary(path);
    let written = fs::write(&temporary, bytes).and_then(|()| {
        if let Ok(metadata) = fs::metadata(path) {
            // A replaced file keeps its permissions (an executable script stays one).
            fs::set_permissions(&temporary, metadata.permissions())?;
        }
        fs::rename(&temporary, path)
    });
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// The journal of a command that writes, open for appending.
struct Journal {
    root: PathBuf,
    file: fs::File,
    entries: Vec<Entry>,
}

impl Journal {
    fn begin(root: &Path) -> anyhow::Result<Self> {
        let file = fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(root.join(JOURNAL))
            .map_err(|error| {
                UserError::new(format!(
                    "cannot write in `{}` (failed to create `{JOURNAL}`: {error}); nothing was changed",
                    root.display()
                ))
                .help("make the project's folder writable for you, then run the command again")
            })?;
        Ok(Self {
            root: root.to_path_buf(),
            file,
            entries: Vec::new(),
        })
    }

    /// Records `entry`, keeping the old bytes of a file it replaces or removes first: from
    /// here on, an interruption is undone.
    fn record(&mut self, entry: Entry) -> anyhow::Result<()> {
        use std::io::Write as _;
        // A file this write changed already: its first entry undoes both changes (its copy
        // holds the bytes from before the first).
        if let Entry::Create(path) | Entry::Replace(path) | Entry::Remove(path) = &entry
            && self.entries.iter().any(|done| {
                matches!(done, Entry::Create(p) | Entry::Replace(p) | Entry::Remove(p) if p == path)
            })
        {
            return Ok(());
        }
        if let Entry::Replace(path) | Entry::Remove(path) = &entry {
            let kept = self.root.join(UNDO_DIR).join(path);
            if let Some(parent) = kept.parent() {
                fs::create_dir_all(parent)
                    .with_context(|| format!("failed to create `{}`", parent.display()))?;
            }
            fs::copy(self.root.join(path), &kept)
                .with_context(|| format!("failed to keep a copy of `{}`", path.display()))?;
        }
        self.file
            .write_all(entry.line().as_bytes())
            .with_context(|| format!("failed to write `{JOURNAL}`"))?;
        self.entries.push(entry);
        Ok(())
    }
}

/// Undoes `entries`, last first, going on past failures; the failures, each naming its file.
fn undo(root: &Path, entries: &[Entry]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |path: &Path, what: &str, error: io::Error| {
        failures.push(format!("failed to {what} `{}`: {error}", path.display()));
    };
    for entry in entries.iter().rev() {
        match entry {
            Entry::Dir(path) => match fs::remove_dir(root.join(path)) {
                Err(error) if !never_made(&error) => fail(path, "remove", error),
                _ => {}
            },
            Entry::Create(path) => {
                let _ = fs::remove_file(temporary(&root.join(path)));
                match fs::remove_file(root.join(path)) {
                    Err(error) if !never_made(&error) => fail(path, "remove", error),
                    _ => {}
                }
            }
            Entry::Replace(path) | Entry::Remove(path) => {
                let target = root.join(path);
                let _ = fs::remove_file(temporary(&target));
                match fs::read(root.join(UNDO_DIR).join(path)) {
                    // The write failed before it changed the file (a full disk, an immutable
                    // file): there is nothing to restore, and nothing to fail at.
                    Ok(old) if fs::read(&target).is_ok_and(|now| now == old) => {}
                    Ok(old) => {
                        if let Err(error) = write_atomically(&target, &old) {
                            fail(path, "restore", error);
                        }
                    }
                    // The copy was not made: the file was not touched yet.
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => fail(path, "restore", error),
                }
            }
        }
    }
    failures
}

/// Whether `error`, on removing a path, says that the path was never made: it is missing, or
/// a file stands where one of its folders would be.
fn never_made(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Removes the journal, then the copies it kept. Removing the journal is what commits the
/// command's writes (or their undoing): copies left behind by an interruption after it are
/// removed by the next command.
fn finish(root: &Path) -> anyhow::Result<()> {
    fs::remove_file(root.join(JOURNAL)).with_context(|| format!("failed to remove `{JOURNAL}`"))?;
    remove_copies(root)
}

fn remove_copies(root: &Path) -> anyhow::Result<()> {
    match fs::remove_dir_all(root.join(UNDO_DIR)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("failed to remove `{UNDO_DIR}`"))
        }
        _ => Ok(()),
    }
}

/// Refuses to write through a symbolic link: a file of the plan, or a folder on its way, that
/// is a link would send the write outside the project.
fn refuse_links(root: &Path, changes: &[Change]) -> anyhow::Result<()> {
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

fn write_all(root: &Path, changes: &[Change]) -> anyhow::Result<()> {
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
const TERMINATING: [std::ffi::c_int; 2] =
    [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM];

/// Whether the signals of [`TERMINATING`] take their default action (end the process).
///
/// Once a handler is installed for a signal, removing it does not give the signal its default
/// action back: signal-hook keeps its own handler, which then does nothing. So a handler that
/// runs the default action while this is true is installed once, before the first write.
fn signal_defaults() -> &'static AtomicBool {
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

fn write_journaled(
    root: &Path,
    changes: &[Change],
    interrupted: &AtomicBool,
) -> anyhow::Result<()> {
    write_phases(root, changes, None, interrupted).map(|_| ())
}

/// The second part of a write: the files it may write itself, and the changes planned from the
/// tree the first part leaves.
type Then<'a> = (
    &'a [&'a Path],
    &'a mut dyn FnMut(&Path) -> anyhow::Result<Vec<Change>>,
);

/// Writes `changes`, then those `then` plans, under one journal; on a failure, undoes them all.
/// The changes of the second part.
fn write_phases(
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

/// Writes each change in turn, journaled; the first failure, with the path it was writing.
fn write_each(
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
fn write_one(
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

/// A folder of its own under the system's temporary folder, for files that are not the
/// project's (the trees `alpha update` merges, the sides of one merge); removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder whose name starts with `rsbuilder-<what>-`.
    pub fn new(what: &str) -> anyhow::Result<Self> {
        let base = std::env::temp_dir();
        for attempt in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!(
                "rsbuilder-{what}-{}-{nanos}-{attempt}",
                std::process::id()
            ));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("failed to create `{}`", path.display()));
                }
            }
        }
        anyhow::bail!("failed to make a temporary folder in `{}`", base.display())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to the file `name` of the folder; its path.
    pub fn write(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let path = self.0.join(name);
        fs::write(&path, text).with_context(|| format!("failed to write `{}`", path.display()))?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scaffold::{Derived, Insertion, PlannedFile};
    use crate::tree::Memory;

    /// The handlers that give Ctrl-C its default action back after a write are installed once
    /// for the process, around one flag: installed again at each write, an earlier write's
    /// handler would end the process during a later one. (`tests/it/crash.rs` sends the
    /// signals.)
    #[test]
    fn one_flag_gives_the_signals_their_default_action_back() {
        assert!(std::ptr::eq(signal_defaults(), signal_defaults()));
    }

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

    fn memory(files: &[(&str, &str)]) -> Memory {
        Memory {
            files: files
                .iter()
                .map(|(path, text)| (PathBuf::from(path), (*text).to_owned()))
                .collect(),
        }
    }

    /// A derived file that lists every `.rs` file under `src` with its text.
    fn listing() -> Derived {
        Derived::new("listing.txt", |tree| {
            let files = crate::tree::read_all(tree, &["src"], "rs")?;
            Ok(files
                .iter()
                .map(|(path, text)| format!("{}={text:?}\n", path.display()))
                .collect())
        })
    }

    /// What `plan` does to each file of `tree`, in the order it is written.
    fn actions(tree: &Memory, plan: Plan, force: bool) -> anyhow::Result<Vec<(String, Action)>> {
        let options = Options {
            force,
            ..Options::default()
        };
        Ok(resolve(tree, plan, options)?
            .into_iter()
            .map(|change| (change.path.display().to_string(), change.action))
            .collect())
    }

    #[test]
    fn files_that_hold_their_planned_bytes_are_unchanged_and_project_is_written_last() {
        let tree = memory(&[
            ("PROJECT", "same"),
            ("src/owned.rs", "same"),
            ("src/regenerated.rs", "same"),
            (
                "listing.txt",
                "src/owned.rs=\"same\"\nsrc/regenerated.rs=\"same\"\n",
            ),
        ]);
        let plan = Plan {
            files: vec![
                file("PROJECT", "same", Policy::Regenerated),
                file("src/owned.rs", "same", Policy::Owned),
                file("src/regenerated.rs", "same", Policy::Regenerated),
                file("src/z.rs", "new", Policy::Owned),
            ],
            derived: vec![listing()],
            ..Plan::default()
        };
        assert_eq!(
            actions(&tree, plan, false).unwrap(),
            [
                ("listing.txt".to_owned(), Action::Update),
                ("src/owned.rs".to_owned(), Action::Unchanged),
                ("src/regenerated.rs".to_owned(), Action::Unchanged),
                ("src/z.rs".to_owned(), Action::Create),
                ("PROJECT".to_owned(), Action::Unchanged),
            ]
        );
        // The listing as it will be: unchanged.
        let tree = memory(&[(
            "listing.txt",
            "src/owned.rs=\"same\"\nsrc/regenerated.rs=\"same\"\n",
        )]);
        let plan = Plan {
            files: vec![
                file("src/owned.rs", "same", Policy::Owned),
                file("src/regenerated.rs", "same", Policy::Owned),
            ],
            derived: vec![listing()],
            ..Plan::default()
        };
        let listed = actions(&tree, plan, false).unwrap();
        assert_eq!(listed[0], ("listing.txt".to_owned(), Action::Unchanged));
    }

    #[test]
    fn conflicts_are_named_in_one_refusal_with_its_help() {
        let tree = memory(&[("a.rs", "mine"), ("b.rs", "mine")]);
        let refusal = |paths: &[&str]| {
            let plan = Plan {
                files: paths
                    .iter()
                    .map(|path| file(path, "rsbuilder's", Policy::Owned))
                    .collect(),
                ..Plan::default()
            };
            let error = actions(&tree, plan, false).unwrap_err();
            let error = error.downcast_ref::<UserError>().unwrap();
            format!("{error}\nhelp: {}", error.help_text().unwrap_or_default())
        };
        assert_eq!(
            refusal(&["a.rs"]),
            "`a.rs` already exists and would be overwritten\nhelp: pass --force to overwrite it"
        );
        assert_eq!(
            refusal(&["a.rs", "b.rs"]),
            "`a.rs`, `b.rs` already exist and would be overwritten\nhelp: pass --force to overwrite them"
        );
        let plan = Plan {
            files: vec![file("a.rs", "rsbuilder's", Policy::Owned)],
            ..Plan::default()
        };
        assert_eq!(
            actions(&tree, plan, true).unwrap(),
            [("a.rs".to_owned(), Action::Overwrite)]
        );
    }

    #[test]
    fn the_view_lays_the_plans_changes_over_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        for name in ["kept", "gone", "locked"] {
            fs::write(dir.path().join(format!("src/{name}.rs")), name).unwrap();
        }
        let locked = dir.path().join("src/locked.rs");
        let mut permissions = fs::metadata(&locked).unwrap().permissions();
        permissions.set_readonly(true);
        fs::set_permissions(&locked, permissions).unwrap();
        let tree = OnDisk(dir.path());
        let change = |path: &str, action, contents: &str| {
            (
                PathBuf::from(path),
                Change {
                    path: path.into(),
                    action,
                    contents: contents.into(),
                    before: None,
                },
            )
        };
        let changes: BTreeMap<PathBuf, Change> = [
            change("src/new.rs", Action::Create, "new"),
            change("src/gone.rs", Action::Remove, ""),
        ]
        .into_iter()
        .collect();
        let view = View {
            tree: &tree,
            changes: &changes,
        };
        for (path, text) in [
            ("src/new.rs", Some("new")),
            ("src/gone.rs", None),
            ("src/kept.rs", Some("kept")),
            ("src/missing.rs", None),
        ] {
            let path = Path::new(path);
            assert_eq!(view.read(path).unwrap().as_deref(), text, "{path:?}");
            assert_eq!(view.is_file(path), text.is_some(), "{path:?}");
        }
        assert!(view.is_read_only(Path::new("src/locked.rs")));
        assert!(!view.is_read_only(Path::new("src/kept.rs")));
        assert_eq!(
            view.files_under(Path::new("src"), "rs").unwrap(),
            [
                PathBuf::from("src/kept.rs"),
                PathBuf::from("src/locked.rs"),
                PathBuf::from("src/new.rs")
            ]
        );
        assert_eq!(
            read_existing(dir.path(), Path::new("src/kept.rs"))
                .unwrap()
                .as_deref(),
            Some("kept")
        );
        assert_eq!(
            read_existing(dir.path(), Path::new("src/none.rs")).unwrap(),
            None
        );
    }

    /// A file whose write failed before it changed is left as it is by the undo: restoring it
    /// would fail again where the write failed (an immutable file, a full disk), and report a
    /// failure to undo although nothing changed.
    #[test]
    fn undo_leaves_a_file_that_was_never_changed_as_it_is() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join(UNDO_DIR)).unwrap();
        fs::write(root.join(UNDO_DIR).join("same.txt"), "old").unwrap();
        fs::write(root.join("same.txt"), "old").unwrap();
        let inode = fs::metadata(root.join("same.txt")).unwrap().ino();
        let failures = undo(root, &[Entry::Replace("same.txt".into())]);
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(
            fs::metadata(root.join("same.txt")).unwrap().ino(),
            inode,
            "not written again"
        );
    }

    /// `apply_then`: the second part sees the tree the first leaves; both are written, or,
    /// when the second fails, neither: a file both parts write gets its first bytes back, a
    /// file the first made is gone, and the journal is removed.
    #[test]
    fn a_write_in_two_parts_is_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("merged.txt"), "old").unwrap();
        fs::write(root.join("role.yaml"), "old role").unwrap();
        let before = snapshot(root);
        let first = || Plan {
            files: vec![
                file("merged.txt", "merged", Policy::Regenerated),
                file("role.yaml", "merged role", Policy::Regenerated),
                file("new/made.txt", "made", Policy::Regenerated),
            ],
            ..Plan::default()
        };
        let error = apply_then(root, first(), &[], |root| {
            assert_eq!(
                fs::read_to_string(root.join("merged.txt")).unwrap(),
                "merged"
            );
            // A file the first part wrote, written again: the undo's copy keeps the first bytes.
            fs::write(root.join("role.yaml"), "half").unwrap();
            anyhow::bail!("generate failed")
        })
        .unwrap_err();
        assert_eq!(format!("{error:#}"), "generate failed");
        assert_eq!(snapshot(root), before);

        let error = apply_then(root, first(), &[], |_| {
            Ok(Plan {
                files: vec![
                    file("role.yaml", "generated role", Policy::Regenerated),
                    file("new", "a file where a folder is", Policy::Regenerated),
                ],
                ..Plan::default()
            })
        })
        .unwrap_err();
        assert!(
            format!("{error:#}")
                .starts_with("`new` is a directory, where rsbuilder would write a file"),
            "{error:#}"
        );
        assert_eq!(snapshot(root), before);

        let statuses = apply_then(root, first(), &[], |_| {
            Ok(Plan {
                files: vec![
                    file("role.yaml", "generated role", Policy::Regenerated),
                    file("merged.txt", "merged", Policy::Regenerated),
                ],
                ..Plan::default()
            })
        })
        .unwrap();
        let statuses: Vec<(&str, &str)> = statuses
            .iter()
            .map(|(verb, path)| (*verb, path.to_str().unwrap()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("updated", "merged.txt"),
                ("created", "new/made.txt"),
                ("updated", "role.yaml"),
            ]
        );
        assert_eq!(
            fs::read_to_string(root.join("merged.txt")).unwrap(),
            "merged"
        );
        assert_eq!(
            fs::read_to_string(root.join("role.yaml")).unwrap(),
            "generated role"
        );
        assert_eq!(
            fs::read_to_string(root.join("new/made.txt")).unwrap(),
            "made"
        );
        assert!(!root.join(JOURNAL).exists() && !root.join(UNDO_DIR).exists());
    }

    /// Ctrl-C while the second part is planned stops the write, even when that part changes
    /// nothing: the first part is undone.
    #[test]
    fn an_interruption_while_the_second_part_is_planned_undoes_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "old").unwrap();
        let before = snapshot(root);
        let changes = resolve(
            &OnDisk(root),
            Plan {
                files: vec![file("a.txt", "new", Policy::Regenerated)],
                ..Plan::default()
            },
            Options {
                force: true,
                dry_run: false,
            },
        )
        .unwrap();
        let interrupted = AtomicBool::new(false);
        let mut next = |_: &Path| -> anyhow::Result<Vec<Change>> {
            interrupted.store(true, Ordering::SeqCst);
            Ok(Vec::new())
        };
        let Err(error) = write_phases(root, &changes, Some((&[], &mut next)), &interrupted) else {
            panic!("the write went on after Ctrl-C");
        };
        assert_eq!(error.to_string(), "interrupted");
        assert_eq!(snapshot(root), before);
    }

    /// A file the second part writes by itself (cargo's lock) is put back with the rest.
    #[test]
    fn a_file_the_second_part_writes_itself_is_undone_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("Cargo.lock"), "locked").unwrap();
        let before = snapshot(root);
        let plan = Plan {
            files: vec![file("Cargo.toml", "bumped", Policy::Regenerated)],
            ..Plan::default()
        };
        let error = apply_then(
            root,
            plan,
            &[Path::new("Cargo.lock"), Path::new("new.lock")],
            |root| {
                fs::write(root.join("Cargo.lock"), "resolved again")?;
                fs::write(root.join("new.lock"), "made")?;
                anyhow::bail!("crdgen failed")
            },
        )
        .unwrap_err();
        assert_eq!(error.to_string(), "crdgen failed");
        assert_eq!(snapshot(root), before);
    }

    /// A file a write changes twice is journaled once: the undo of both gives its first bytes.
    #[test]
    fn a_file_changed_twice_is_journaled_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "first").unwrap();
        let mut journal = Journal::begin(root).unwrap();
        journal.record(Entry::Replace("a.txt".into())).unwrap();
        fs::write(root.join("a.txt"), "second").unwrap();
        journal.record(Entry::Replace("a.txt".into())).unwrap();
        journal.record(Entry::Create("b.txt".into())).unwrap();
        journal.record(Entry::Remove("b.txt".into())).unwrap();
        assert_eq!(
            journal.entries,
            [
                Entry::Replace("a.txt".into()),
                Entry::Create("b.txt".into())
            ]
        );
        assert_eq!(
            fs::read_to_string(root.join(UNDO_DIR).join("a.txt")).unwrap(),
            "first"
        );
        assert_eq!(
            fs::read_to_string(root.join(JOURNAL)).unwrap(),
            "replace\ta.txt\ncreate\tb.txt\n"
        );
    }

    #[test]
    fn undo_restores_what_it_can_and_names_every_failure_but_what_was_never_made() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("full")).unwrap();
        fs::write(root.join("full/kept.txt"), "kept").unwrap();
        fs::create_dir_all(root.join("a-folder.txt")).unwrap();
        fs::write(root.join("replaced.txt"), "new").unwrap();
        // A file where a folder of the entry would be: that folder was never made.
        fs::write(root.join("file.txt"), "").unwrap();
        fs::create_dir_all(root.join(UNDO_DIR).join("unreadable.txt")).unwrap();
        fs::write(root.join(UNDO_DIR).join("replaced.txt"), "old").unwrap();
        let entries = [
            Entry::Dir("full".into()),
            Entry::Dir("never".into()),
            Entry::Dir("file.txt/below".into()),
            Entry::Create("a-folder.txt".into()),
            Entry::Create("never.txt".into()),
            Entry::Replace("replaced.txt".into()),
            Entry::Replace("untouched.txt".into()),
            Entry::Remove("unreadable.txt".into()),
        ];
        let failures = undo(root, &entries);
        let named: Vec<&str> = failures
            .iter()
            .map(|failure| failure.split(": ").next().unwrap())
            .collect();
        assert_eq!(
            named,
            [
                "failed to restore `unreadable.txt`",
                "failed to remove `a-folder.txt`",
                "failed to remove `full`",
            ],
            "{failures:#?}"
        );
        assert_eq!(
            fs::read_to_string(root.join("replaced.txt")).unwrap(),
            "old"
        );
        assert!(!root.join("untouched.txt").exists());
    }

    #[test]
    fn writes_make_only_the_missing_folders_and_journal_what_they_replace() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join("src/lib.rs"), "old").unwrap();
        let change = |path: &str, action| Change {
            path: path.into(),
            action,
            contents: format!("{path} new"),
            before: None,
        };
        let mut journal = Journal::begin(root).unwrap();
        let mut dirs = std::collections::HashSet::new();
        for change in [
            change("src/new/deep.rs", Action::Create),
            change("src/lib.rs", Action::Update),
            // Planned as a replacement, but gone by the time it is written: it is new.
            change("src/vanished.rs", Action::Overwrite),
        ] {
            write_one(root, &change, &mut journal, &mut dirs).unwrap();
        }
        let lines: Vec<String> = journal.entries.iter().map(Entry::line).collect();
        assert_eq!(
            lines.concat(),
            "dir\tsrc/new\ncreate\tsrc/new/deep.rs\nreplace\tsrc/lib.rs\ncreate\tsrc/vanished.rs\n"
        );
        assert_eq!(
            fs::read_to_string(root.join("src/lib.rs")).unwrap(),
            "src/lib.rs new"
        );
        assert_eq!(
            fs::read_to_string(root.join(UNDO_DIR).join("src/lib.rs")).unwrap(),
            "old"
        );
        assert_eq!(
            fs::read_to_string(root.join("src/vanished.rs")).unwrap(),
            "src/vanished.rs new"
        );
    }

    #[test]
    fn a_scratch_folder_is_new_and_gone_once_dropped() {
        let scratch = Scratch::new("test").unwrap();
        let other = Scratch::new("test").unwrap();
        assert_ne!(scratch.path(), other.path());
        let name = scratch.path().file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("rsbuilder-test-"), "{name}");
        let file = scratch.write("a.txt", "text").unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "text");
        let path = scratch.path().to_path_buf();
        drop(scratch);
        assert!(!path.exists());
        assert!(other.path().is_dir());
    }

    #[test]
    fn a_journal_that_cannot_be_read_is_an_error_not_an_absence() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(JOURNAL)).unwrap();
        let error = recover(dir.path()).unwrap_err();
        assert_eq!(error.to_string(), format!("failed to read `{JOURNAL}`"));
        fs::remove_dir(dir.path().join(JOURNAL)).unwrap();
        recover(dir.path()).unwrap();
        // Copies that cannot be removed are an error too; copies never made are not.
        fs::write(dir.path().join(UNDO_DIR), "a file").unwrap();
        let error = recover(dir.path()).unwrap_err();
        assert_eq!(error.to_string(), format!("failed to remove `{UNDO_DIR}`"));
    }

    #[test]
    fn derived_files_see_the_tree_the_plan_leaves() {
        let mut tree = memory(&[
            ("src/a.rs", "a\n// +rsbuilder:scaffold:m\n"),
            ("src/kept.rs", "the user's"),
            ("src/gone.rs", "old"),
            ("listing.txt", "stale"),
        ]);
        let plan = Plan {
            files: vec![
                file("src/kept.rs", "the template's", Policy::IfMissing),
                file("src/new.rs", "new", Policy::Owned),
                file("src/other.txt", "not a source", Policy::Owned),
            ],
            insertions: vec![Insertion {
                path: "src/a.rs".into(),
                marker: "m".into(),
                fragment: "inserted\n".into(),
                block: false,
            }],
            removals: vec!["src/gone.rs".into()],
            derived: vec![listing()],
        };
        apply_in_memory(&mut tree, plan, Options::default()).unwrap();
        assert_eq!(
            tree.files[Path::new("listing.txt")],
            "src/a.rs=\"a\\ninserted\\n// +rsbuilder:scaffold:m\\n\"\n\
             src/kept.rs=\"the user's\"\n\
             src/new.rs=\"new\"\n"
        );
        assert!(!tree.files.contains_key(Path::new("src/gone.rs")));
    }

    /// A derived file that refuses the first line holding `bad`, by its number.
    fn refusing() -> Derived {
        Derived::new("out.txt", |tree| {
            let text = tree.read(Path::new("src/a.rs"))?.unwrap_or_default();
            match text.lines().position(|line| line == "bad") {
                Some(at) => anyhow::bail!("bad at src/a.rs:{}", at + 1),
                None => Ok(text),
            }
        })
    }

    #[test]
    fn a_derived_file_names_the_users_mistake_where_the_user_sees_it() {
        let insertion = |fragment: &str| Insertion {
            path: "src/a.rs".into(),
            marker: "m".into(),
            fragment: fragment.into(),
            block: false,
        };
        let plan = |fragment: &str| Plan {
            insertions: vec![insertion(fragment)],
            derived: vec![refusing()],
            ..Plan::default()
        };
        // The user's line 3 is line 4 once the plan inserts above it: the error names line 3.
        let mut tree = memory(&[("src/a.rs", "a\n// +rsbuilder:scaffold:m\nbad\n")]);
        let error = apply_in_memory(&mut tree, plan("first\n"), Options::default()).unwrap_err();
        assert_eq!(error.to_string(), "bad at src/a.rs:3");
        // A mistake only the plan brings can only be named in the file the plan leaves.
        let mut tree = memory(&[("src/a.rs", "a\n// +rsbuilder:scaffold:m\n")]);
        let error = apply_in_memory(&mut tree, plan("bad\n"), Options::default()).unwrap_err();
        assert_eq!(error.to_string(), "bad at src/a.rs:2");
        assert_eq!(tree.files.len(), 1, "nothing is written");
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
            derived: Vec::new(),
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
            derived: Vec::new(),
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
            derived: Vec::new(),
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
            derived: Vec::new(),
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
            derived: Vec::new(),
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
            derived: Vec::new(),
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
            derived: Vec::new(),
        };
        apply(dir.path(), plan(), Options::default()).unwrap_err();
        assert_eq!(snapshot(dir.path()), before, "the removal was undone");

        fs::remove_file(dir.path().join("z")).unwrap();
        apply(dir.path(), plan(), Options::default()).unwrap();
        assert!(!dir.path().join("old.rs").exists());
        assert!(dir.path().join("z/late.txt").exists());
    }

    /// A command killed half way leaves its journal; the next command's lock undoes it.
    #[test]
    fn an_interrupted_command_is_undone_by_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("main.rs"), "old main").unwrap();
        fs::write(root.join("gone.rs"), "removed").unwrap();
        let before = snapshot(root);
        {
            let mut journal = Journal::begin(root).unwrap();
            journal.record(Entry::Replace("main.rs".into())).unwrap();
            write_atomically(&root.join("main.rs"), b"new main").unwrap();
            journal.record(Entry::Dir("config".into())).unwrap();
            fs::create_dir(root.join("config")).unwrap();
            journal
                .record(Entry::Create("config/a.yaml".into()))
                .unwrap();
            // Killed between the temporary file and its rename.
            fs::write(temporary(&root.join("config/a.yaml")), "half").unwrap();
            journal.record(Entry::Remove("gone.rs".into())).unwrap();
            fs::remove_file(root.join("gone.rs")).unwrap();
            journal.record(Entry::Create("never.rs".into())).unwrap();
        }
        assert_ne!(snapshot(root), before);
        let lock = lock(root).unwrap();
        assert_eq!(snapshot(root), before, "the interrupted command was undone");
        drop(lock);
        // Nothing to undo the next time.
        drop(super::lock(root).unwrap());
        assert_eq!(snapshot(root), before);
    }

    /// Undoing goes on past a file it cannot restore, and names every one.
    #[test]
    fn undo_goes_on_past_a_failure_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("sub")).unwrap();
        fs::write(root.join("sub/a.rs"), "old a").unwrap();
        fs::write(root.join("b.rs"), "old b").unwrap();
        let mut journal = Journal::begin(root).unwrap();
        journal.record(Entry::Replace("b.rs".into())).unwrap();
        fs::write(root.join("b.rs"), "new b").unwrap();
        journal.record(Entry::Replace("sub/a.rs".into())).unwrap();
        // `sub/a.rs` cannot be restored: its folder became a file.
        fs::remove_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("sub"), "in the way").unwrap();
        journal.record(Entry::Create("c.rs".into())).unwrap();
        fs::write(root.join("c.rs"), "new c").unwrap();
        let failures = undo(root, &journal.entries);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].starts_with("failed to restore `sub/a.rs`"),
            "{failures:?}"
        );
        assert_eq!(fs::read_to_string(root.join("b.rs")).unwrap(), "old b");
        assert!(!root.join("c.rs").exists());
    }

    #[test]
    fn writes_through_symbolic_links_are_refused_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path(), root.join("config")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("missing"), root.join("dangling.rs"))
            .unwrap();
        for planned in ["config/x.yaml", "dangling.rs"] {
            let before = snapshot(root);
            let plan = Plan {
                files: vec![
                    file("a.rs", "a", Policy::Owned),
                    file(planned, "x", Policy::Owned),
                ],
                ..Plan::default()
            };
            let error = apply(root, plan, Options::default()).unwrap_err();
            let link = planned.split('/').next().unwrap();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("`{link}` is a symbolic link")),
                "{error}"
            );
            assert_eq!(snapshot(root), before);
            assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        }
    }

    /// The holder of a lock is read from `/proc/locks`: the pid on the FLOCK line of the file,
    /// not a waiter's line, nor another file's or another device's.
    #[test]
    fn the_lock_holder_is_the_flock_line_of_the_folder() {
        // dev 0xfd01 (major 0xfd, minor 1); dev 0x801 (major 8, minor 1) is another device.
        let locks = "1: POSIX  ADVISORY  WRITE 11 fd:01:99 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 22 08:01:1234 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 33 fd:01:12345 0 EOF\n\
                     3: -> FLOCK  ADVISORY  WRITE 44 fd:01:1234 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 55 fd:01:1234 0 EOF\n";
        assert_eq!(lock_owner(locks, 0xfd01, 1234), Some(55));
        assert_eq!(lock_owner(locks, 0x801, 1234), Some(22));
        assert_eq!(lock_owner(locks, 0xfd01, 99), None);
        assert_eq!(lock_owner(locks, 0xfd01, 7), None);
        // A large device number: major 259, minor 300 (dev_t's split encoding).
        let dev = (300 & 0xff) | ((259 & 0xfff) << 8) | ((300 & !0xff) << 12);
        assert_eq!(
            lock_owner("1: FLOCK  ADVISORY  WRITE 66 103:12c:5 0 EOF\n", dev, 5),
            Some(66)
        );
    }

    #[test]
    fn a_command_line_reads_as_typed() {
        assert_eq!(
            command_line(b"/usr/local/bin/rsbuilder\0create\0api\0--kind\0Bar\0").as_deref(),
            Some("rsbuilder create api --kind Bar")
        );
        assert_eq!(
            command_line(b"rsbuilder\0\0edit\0").as_deref(),
            Some("rsbuilder edit")
        );
        assert_eq!(command_line(b""), None);
    }

    /// A command waiting for the lock names the process holding it.
    #[test]
    fn the_waiting_message_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let message = waiting_message(dir.path());
        drop(first);
        assert!(
            message.contains(&format!(": process {} (`", std::process::id())),
            "{message}"
        );
        assert!(message.ends_with("answer it in its terminal"), "{message}");
        // A folder nobody locked. (The one above may stay locked a moment after the drop: a
        // process another test forks holds a copy of the descriptor until it execs.)
        let unlocked = tempfile::tempdir().unwrap();
        assert_eq!(
            waiting_message(unlocked.path()),
            "waiting for another rsbuilder command in this project to finish; if it asks a question, answer it in its terminal"
        );
    }

    /// Pins the project lock: a second command waits for the first.
    #[test]
    fn a_second_command_waits_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let first = lock(&root).unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let waiting = std::thread::spawn(move || {
            let second = lock(&root).unwrap();
            sender.send(()).unwrap();
            drop(second);
        });
        assert!(
            receiver
                .recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "the second lock was taken while the first was held"
        );
        drop(first);
        receiver
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the second lock once the first was released");
        waiting.join().unwrap();
    }

    #[test]
    fn a_dry_run_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan {
            files: vec![file("a.txt", "new", Policy::Owned)],
            insertions: Vec::new(),
            removals: Vec::new(),
            derived: Vec::new(),
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
