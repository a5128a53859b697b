//! `alpha generate --force`'s swap: every entry of the project but `.git` replaced by those of a
//! tree scaffolded again, as one journaled step.
//!
//! The new tree is built in a scratch folder, then copied into [`STAGING`] inside the project,
//! on the project's own file system (a project folder that is a mount point, as in a
//! devcontainer, has no other place where a rename reaches it). The swap is renames only: each
//! old entry into `STAGING/old`, then each new one out of `STAGING/new`, each written to
//! `STAGING/journal` (and flushed) before it is made. Ctrl-C and SIGTERM stop it between two
//! renames and put the old entries back. A process killed half way leaves the journal, and the
//! next command's lock ([`recover`]) puts the old entries back, or, once the journal says
//! `done`, removes what is left of them.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;

use super::{self as apply, Scratch};
use crate::ui::{self, UserError};

/// The folder of the project that holds the swap while it is made.
pub const STAGING: &str = ".rsbuilder-generate";
/// The journal of the swap, in [`STAGING`].
const JOURNAL: &str = "journal";
/// The new tree, in [`STAGING`].
const NEW: &str = "new";
/// The old entries, in [`STAGING`], once moved aside.
const OLD: &str = "old";

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The new tree is whole in `STAGING/new`.
    Staged,
    /// The entry of the project named so is moved to `STAGING/old`.
    Aside(String),
    /// The entry of `STAGING/new` named so is moved into the project.
    In(String),
    /// Every entry is in place; what is left in `STAGING` is to be removed.
    Done,
    /// Every entry is back as it was; what is left in `STAGING` is to be removed.
    Undone,
}

impl Step {
    fn line(&self) -> String {
        match self {
            Step::Staged => "staged\n".to_owned(),
            Step::Aside(name) => format!("aside {name}\n"),
            Step::In(name) => format!("in {name}\n"),
            Step::Done => "done\n".to_owned(),
            Step::Undone => "undone\n".to_owned(),
        }
    }

    fn parse(line: &str) -> Option<Step> {
        match line.split_once(' ') {
            None if line == "staged" => Some(Step::Staged),
            None if line == "done" => Some(Step::Done),
            None if line == "undone" => Some(Step::Undone),
            Some(("aside", name)) => Some(Step::Aside(name.to_owned())),
            Some(("in", name)) => Some(Step::In(name.to_owned())),
            _ => None,
        }
    }
}

/// Replaces every entry of `root` but `.git` with those of a tree `build` makes in a scratch
/// folder named `name`. Call it under the project's lock.
pub fn replace_tree(
    root: &Path,
    name: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let scratch = Scratch::new("generate")?;
    let fresh = scratch.path().join(name);
    apply::fill_new_dir(&fresh, build)?;
    let old_names = names(root)?;
    let new_names = names(&fresh)?;
    apply::guarded(|interrupted| {
        let staging = root.join(STAGING);
        let mut journal = begin(&staging)?;
        let staged = copy_tree(&fresh, &staging.join(NEW), interrupted)
            .and_then(|()| journal.record(&Step::Staged))
            .and_then(|()| {
                fs::create_dir(staging.join(OLD))
                    .with_context(|| format!("failed to create `{STAGING}/{OLD}`"))
            });
        if let Err(error) = staged {
            let _ = fs::remove_dir_all(&staging);
            return Err(error.context("nothing was changed"));
        }
        if let Err(error) = swap(root, &old_names, &new_names, &mut journal, interrupted) {
            return Err(match undo(root) {
                Ok(()) => error.context(
                    "failed to put the new tree in place; the project's files are as they were",
                ),
                Err(undo) => error.context(format!(
                    "failed to put the new tree in place, and to put the old one back: {undo:#}"
                )),
            });
        }
        // Every new entry is in place, and flushed with the folders that name them, before
        // the journal says so.
        let done = sync_folders(root).and_then(|()| journal.record(&Step::Done));
        if let Err(error) = done {
            // `done` written but not flushed reads back as written: the swap is whole, and the
            // next command's lock finishes it.
            if read_journal(&staging).is_ok_and(|steps| steps.contains(&Step::Done)) {
                return Err(error.context(
                    "the new tree is in place; the next rsbuilder command removes what is left of the old one",
                ));
            }
            return Err(match undo(root) {
                Ok(()) => error.context("the project's files are as they were"),
                Err(undo) => {
                    error.context(format!("and the old tree could not be put back: {undo:#}"))
                }
            });
        }
        finish(&staging)
    })
}

/// The names of the entries of `dir` but `.git` and [`STAGING`], sorted; a name the journal
/// cannot hold on one line is refused.
fn names(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("failed to read `{}`", dir.display()))? {
        let name = entry?.file_name();
        // target/ is cargo's, and the new tree has none: it stays, built.
        if name == ".git" || name == STAGING || name == "target" {
            continue;
        }
        match name.to_str() {
            Some(text) if !text.contains(['\n', '\r']) => names.push(text.to_owned()),
            _ => {
                return Err(UserError::new(format!(
                    "{:?} in `{}` is a name alpha generate cannot journal (not UTF-8, or a line break or carriage return)",
                    name,
                    dir.display()
                ))
                .help("rename or remove it, then run the command again")
                .into());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The journal, open for appending.
struct Journal(fs::File);

impl Journal {
    /// Writes `step` and flushes it to the disk, before the step is taken.
    fn record(&mut self, step: &Step) -> anyhow::Result<()> {
        self.0
            .write_all(step.line().as_bytes())
            .and_then(|()| self.0.sync_data())
            .with_context(|| format!("failed to write `{STAGING}/{JOURNAL}`"))
    }
}

/// Makes [`STAGING`] and its journal, first of all, so that a kill at any later point leaves a
/// journal to read.
fn begin(staging: &Path) -> anyhow::Result<Journal> {
    fs::create_dir(staging).with_context(|| format!("failed to create `{STAGING}`"))?;
    let file = fs::OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(staging.join(JOURNAL))
        .with_context(|| format!("failed to create `{STAGING}/{JOURNAL}`"));
    match file {
        Ok(file) => Ok(Journal(file)),
        Err(error) => {
            let _ = fs::remove_dir_all(staging);
            Err(error)
        }
    }
}

/// Copies the tree `from` into `to` (new), files with their permissions; stops when
/// `interrupted`.
fn copy_tree(from: &Path, to: &Path, interrupted: &AtomicBool) -> anyhow::Result<()> {
    for entry in walkdir::WalkDir::new(from).sort_by_file_name() {
        if interrupted.load(Ordering::SeqCst) {
            return Err(UserError::new("interrupted").into());
        }
        let entry = entry?;
        let relative = entry.path().strip_prefix(from)?;
        let target = to.join(relative);
        if entry.file_type().is_dir() {
            fs::create_dir(&target)
                .with_context(|| format!("failed to create `{}`", target.display()))?;
        } else {
            fs::copy(entry.path(), &target)
                .and_then(|_| fs::File::open(&target)?.sync_all())
                .with_context(|| format!("failed to copy the new `{}`", relative.display()))?;
        }
    }
    Ok(())
}

/// Flushes the project's folder and the staging folders, whose entries the renames changed.
fn sync_folders(root: &Path) -> anyhow::Result<()> {
    let staging = root.join(STAGING);
    for dir in [root.to_path_buf(), staging.join(OLD), staging.join(NEW)] {
        fs::File::open(&dir)
            .and_then(|dir| dir.sync_all())
            .with_context(|| format!("failed to flush `{}`", dir.display()))?;
    }
    Ok(())
}

/// Moves the old entries aside, then the new ones in, each journaled first.
fn swap(
    root: &Path,
    old_names: &[String],
    new_names: &[String],
    journal: &mut Journal,
    interrupted: &AtomicBool,
) -> anyhow::Result<()> {
    let staging = root.join(STAGING);
    let moves = old_names
        .iter()
        .map(|name| {
            (
                Step::Aside(name.clone()),
                root.join(name),
                staging.join(OLD).join(name),
            )
        })
        .chain(new_names.iter().map(|name| {
            (
                Step::In(name.clone()),
                staging.join(NEW).join(name),
                root.join(name),
            )
        }));
    for (step, from, to) in moves {
        if interrupted.load(Ordering::SeqCst) {
            return Err(UserError::new("interrupted").into());
        }
        journal.record(&step)?;
        if let Err(error) = fs::rename(&from, &to) {
            let name = match &step {
                Step::Aside(name) | Step::In(name) => name.as_str(),
                _ => "",
            };
            if matches!(
                error.kind(),
                io::ErrorKind::CrossesDevices | io::ErrorKind::ResourceBusy
            ) {
                return Err(UserError::new(format!(
                    "`{name}` is on another file system than the project (a mount point): it cannot be moved aside"
                ))
                .help("unmount it, or scaffold into a new folder with --output-dir")
                .into());
            }
            return Err(error).with_context(|| format!("failed to move `{name}`"));
        }
    }
    Ok(())
}

/// Puts the project back as the journal of an unfinished swap found it: the entries moved in
/// go back to `STAGING/new`, the ones moved aside come back, then [`STAGING`] is removed.
fn undo(root: &Path) -> anyhow::Result<()> {
    let staging = root.join(STAGING);
    let steps = read_journal(&staging)?;
    for step in steps.iter().rev() {
        let (from, to) = match step {
            Step::In(name) => (root.join(name), staging.join(NEW).join(name)),
            Step::Aside(name) => (staging.join(OLD).join(name), root.join(name)),
            Step::Staged | Step::Done | Step::Undone => continue,
        };
        // Journaled before it was made: the move may not have happened.
        if exists(&from) && !exists(&to) {
            fs::rename(&from, &to).with_context(|| {
                format!(
                    "failed to move `{}` back",
                    from.strip_prefix(root).unwrap_or(&from).display()
                )
            })?;
        }
    }
    // An old entry whose place was taken meanwhile (an editor, a build) is never deleted.
    let mut left: Vec<String> = fs::read_dir(staging.join(OLD))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if !left.is_empty() {
        left.sort();
        return Err(UserError::new(format!(
            "`{}` came back while alpha generate --force was swapping: the old one is in `{STAGING}/{OLD}`",
            left.join("`, `")
        ))
        .help(format!(
            "keep the one you want in the project, remove the other, then remove `{STAGING}`"
        ))
        .into());
    }
    // Every entry is back: from here on only the removal of what is left remains, which a
    // later recovery finishes without moving anything.
    let mut journal = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(staging.join(JOURNAL))
        .map(Journal)
        .with_context(|| format!("failed to open `{STAGING}/{JOURNAL}`"))?;
    journal.record(&Step::Undone)?;
    finish(&staging)
}

/// Whether anything is at `path`, a broken link included.
fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

fn read_journal(staging: &Path) -> anyhow::Result<Vec<Step>> {
    match fs::read_to_string(staging.join(JOURNAL)) {
        Ok(text) => Ok(text.lines().filter_map(Step::parse).collect()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error).with_context(|| format!("failed to read `{STAGING}/{JOURNAL}`")),
    }
}

/// Removes [`STAGING`]: the old entries, the new tree, then the journal last, so that a
/// journal, while there is one, still says what the folder holds.
fn finish(staging: &Path) -> anyhow::Result<()> {
    for part in [OLD, NEW] {
        let path = staging.join(part);
        if exists(&path) {
            fs::remove_dir_all(&path)
                .with_context(|| format!("failed to remove `{STAGING}/{part}`"))?;
        }
    }
    match fs::remove_file(staging.join(JOURNAL)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            return Err(error).with_context(|| format!("failed to remove `{STAGING}/{JOURNAL}`"));
        }
        _ => {}
    }
    fs::remove_dir(staging).with_context(|| format!("failed to remove `{STAGING}`"))
}

/// Finishes the swap of an `alpha generate --force` that was interrupted (killed, or the
/// machine stopped): the project's files come back as they were, or, when every new entry was
/// in place, what is left of the old ones is removed. Called by the project's lock.
pub fn recover(root: &Path) -> anyhow::Result<()> {
    let staging = root.join(STAGING);
    if !exists(&staging) {
        return Ok(());
    }
    let steps = read_journal(&staging);
    let done = steps
        .as_ref()
        .is_ok_and(|steps| steps.contains(&Step::Done));
    let undone = steps
        .as_ref()
        .is_ok_and(|steps| steps.contains(&Step::Undone));
    let result = steps.and_then(|_| {
        if done || undone {
            finish(&staging)
        } else {
            undo(root)
        }
    });
    result.map_err(|error| {
        anyhow::Error::from(
            UserError::new(format!(
                "an earlier `alpha generate --force` was interrupted, and its swap could not be {}: {error:#}",
                if done { "finished" } else { "undone" }
            ))
            .help(format!(
                "the old files are in `{STAGING}/{OLD}` and the new ones in `{STAGING}/{NEW}`; move what you need back, then remove `{STAGING}`"
            )),
        )
    })?;
    ui::note(if done {
        "an earlier `alpha generate --force` was interrupted after its new tree was in place: what was left of the old one is removed"
    } else {
        "an earlier `alpha generate --force` was interrupted: the project's files are back as they were"
    });
    Ok(())
}

/// The root of a project around `dir` whose swap was interrupted: the nearest folder that
/// holds [`STAGING`], or the one that holds the [`STAGING`] `dir` is in (a folder moved aside);
/// and whether `dir` is in [`STAGING`].
pub fn interrupted_root(dir: &Path) -> Option<(PathBuf, bool)> {
    dir.ancestors().find_map(|d| {
        if d.file_name().is_some_and(|name| name == STAGING) {
            return d.parent().map(|root| (root.to_path_buf(), true));
        }
        d.join(STAGING).is_dir().then(|| (d.to_path_buf(), false))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree with `.git`, a file and a folder, as a project is.
    fn project_dir(parent: &Path) -> PathBuf {
        let root = parent.join("shop");
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join(".git/HEAD"), "ref").unwrap();
        fs::write(root.join("src/lib.rs"), "old").unwrap();
        fs::write(root.join("PROJECT"), "old").unwrap();
        root
    }

    /// The staging folder of `root` with its journal begun, the new tree holding the folders
    /// `new` and the folder for the old entries made.
    fn staged(root: &Path, new: &[&str]) -> (PathBuf, Journal) {
        let staging = root.join(STAGING);
        let journal = begin(&staging).unwrap();
        fs::create_dir_all(staging.join(NEW)).unwrap();
        for folder in new {
            fs::create_dir_all(staging.join(NEW).join(folder)).unwrap();
        }
        fs::create_dir(staging.join(OLD)).unwrap();
        (staging, journal)
    }

    /// A project in a temporary folder, and its entries.
    fn project() -> (tempfile::TempDir, PathBuf, Vec<(String, String)>) {
        let parent = tempfile::tempdir().unwrap();
        let root = project_dir(parent.path());
        let before = entries(&root);
        (parent, root, before)
    }

    fn entries(root: &Path) -> Vec<(String, String)> {
        let mut all: Vec<(String, String)> = walkdir::WalkDir::new(root)
            .min_depth(1)
            .into_iter()
            .map(|e| e.unwrap())
            .map(|e| {
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                (
                    e.path().strip_prefix(root).unwrap().display().to_string(),
                    text,
                )
            })
            .collect();
        all.sort();
        all
    }

    fn new_tree(dir: &Path) -> anyhow::Result<()> {
        fs::write(dir.join("PROJECT"), "new")?;
        fs::create_dir(dir.join(".git"))?;
        fs::create_dir(dir.join("src"))?;
        fs::write(dir.join("src/main.rs"), "new")?;
        Ok(fs::write(dir.join("Makefile"), "new")?)
    }

    const NEW_TREE: [(&str, &str); 6] = [
        (".git", ""),
        (".git/HEAD", "ref"),
        ("Makefile", "new"),
        ("PROJECT", "new"),
        ("src", ""),
        ("src/main.rs", "new"),
    ];

    #[test]
    fn a_tree_replaced_keeps_git_and_a_failed_build_keeps_the_old_one() {
        let (parent, root, before) = project();

        // A build that fails leaves the project and its parent as they were.
        let error = replace_tree(&root, "shop", |dir| {
            fs::write(dir.join("PROJECT"), "new")?;
            anyhow::bail!("no")
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "no");
        assert_eq!(entries(&root), before);
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 1);

        // A build that succeeds replaces everything but .git, and leaves nothing beside.
        replace_tree(&root, "shop", new_tree).unwrap();
        assert_eq!(
            entries(&root),
            NEW_TREE.map(|(p, t)| (p.to_owned(), t.to_owned()))
        );
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 1);
    }

    /// A swap that fails half way (a new entry cannot be moved in) puts the old entries back,
    /// and the staging folder is gone.
    #[test]
    fn a_swap_that_fails_half_way_puts_the_old_entries_back() {
        let (_parent, root, before) = project();
        let (staging, mut journal) = staged(&root, &["Makefile"]);
        journal.record(&Step::Staged).unwrap();
        let old_names = names(&root).unwrap();
        assert_eq!(old_names, ["PROJECT", "src"]);
        let error = swap(
            &root,
            &old_names,
            &["Makefile".to_owned(), "missing".to_owned()],
            &mut journal,
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert!(
            format!("{error:#}").starts_with("failed to move `missing`"),
            "{error:#}"
        );
        assert!(
            root.join("Makefile").is_dir(),
            "the first new entry was moved in"
        );
        undo(&root).unwrap();
        assert_eq!(entries(&root), before);

        // An interrupted swap stops before its first move.
        let mut journal = begin(&staging).unwrap();
        fs::create_dir_all(staging.join(OLD)).unwrap();
        let error = swap(&root, &old_names, &[], &mut journal, &AtomicBool::new(true)).unwrap_err();
        assert_eq!(error.to_string(), "interrupted");
        assert_eq!(read_journal(&staging).unwrap(), []);
        finish(&staging).unwrap();
        assert_eq!(entries(&root), before);
    }

    /// The journal of a swap killed at each of its steps in turn: the lock's recovery puts the
    /// old tree back, or, after `done`, leaves the new one whole; a step journaled but not yet
    /// made is found not made.
    #[test]
    fn a_swap_killed_at_any_step_is_undone_or_finished() {
        let parent = tempfile::tempdir().unwrap();
        let reference = project_dir(&parent.path().join("reference"));
        let before = entries(&reference);
        let staging_of = |root: &Path| root.join(STAGING);
        // The steps of the whole swap, as it journals them.
        let old_names = names(&reference).unwrap();
        let new_names = ["Makefile", "PROJECT", "src"].map(str::to_owned);
        let steps: Vec<Step> = std::iter::once(Step::Staged)
            .chain(old_names.iter().cloned().map(Step::Aside))
            .chain(new_names.iter().cloned().map(Step::In))
            .chain([Step::Done])
            .collect();
        for kill in 0..=steps.len() {
            for made in [false, true] {
                let root = project_dir(&parent.path().join(format!("{kill}-{made}")));
                let staging = staging_of(&root);
                let mut journal = begin(&staging).unwrap();
                let scratch = parent.path().join(format!("new-{kill}-{made}"));
                fs::create_dir(&scratch).unwrap();
                new_tree(&scratch).unwrap();
                fs::remove_dir_all(scratch.join(".git")).unwrap();
                copy_tree(&scratch, &staging.join(NEW), &AtomicBool::new(false)).unwrap();
                fs::create_dir(staging.join(OLD)).unwrap();
                for (index, step) in steps.iter().take(kill).enumerate() {
                    journal.record(step).unwrap();
                    let last = index + 1 == kill;
                    if last && !made {
                        break;
                    }
                    match step {
                        Step::Aside(name) => {
                            fs::rename(root.join(name), staging.join(OLD).join(name)).unwrap()
                        }
                        Step::In(name) => {
                            fs::rename(staging.join(NEW).join(name), root.join(name)).unwrap()
                        }
                        Step::Staged | Step::Done | Step::Undone => {}
                    }
                }
                recover(&root).unwrap();
                assert!(!staging.exists(), "kill {kill}, made {made}");
                let expected = if kill == steps.len() {
                    NEW_TREE.map(|(p, t)| (p.to_owned(), t.to_owned())).to_vec()
                } else {
                    before.clone()
                };
                assert_eq!(entries(&root), expected, "kill {kill}, made {made}");
            }
        }
    }

    #[test]
    fn journal_lines_read_back_as_written() {
        for step in [
            Step::Staged,
            Step::Aside("a b".to_owned()),
            Step::In(".env".to_owned()),
            Step::Done,
        ] {
            assert_eq!(Step::parse(step.line().trim_end()), Some(step));
        }
        assert_eq!(Step::parse("moved x"), None);
        assert_eq!(Step::parse("staged x"), None);
        assert_eq!(Step::parse("finished"), None);
        assert_eq!(Step::parse("undone"), Some(Step::Undone));
    }

    /// A finish killed after it removed the journal, with the staging folder left, is finished
    /// by the next lock: the folder goes, the project's entries stay.
    #[test]
    fn a_finish_interrupted_after_its_journal_went_is_finished() {
        let (_parent, root, before) = project();
        fs::create_dir_all(root.join(STAGING).join(OLD)).unwrap();
        finish(&root.join(STAGING)).unwrap();
        assert!(!root.join(STAGING).exists());
        fs::create_dir_all(root.join(STAGING)).unwrap();
        recover(&root).unwrap();
        assert!(!root.join(STAGING).exists());
        assert_eq!(entries(&root), before);
    }

    /// An undo killed while it removed what was left finishes that removal the next time, and
    /// moves nothing: the project's entries, back in place, stay.
    #[test]
    fn an_undo_interrupted_in_its_removal_moves_nothing_again() {
        let (_parent, root, before) = project();
        let (staging, mut journal) = staged(&root, &[]);
        for step in [
            Step::Staged,
            Step::Aside("PROJECT".to_owned()),
            Step::In("PROJECT".to_owned()),
            Step::Undone,
        ] {
            journal.record(&step).unwrap();
        }
        // The new tree was removed already; PROJECT is the user's again.
        recover(&root).unwrap();
        assert_eq!(entries(&root), before);
        assert!(!staging.exists());
    }

    /// An old entry whose place was taken during the swap is kept aside and named, never
    /// deleted.
    #[test]
    fn an_entry_that_came_back_is_named_and_kept() {
        let parent = tempfile::tempdir().unwrap();
        let root = project_dir(parent.path());
        let (staging, mut journal) = staged(&root, &[]);
        journal.record(&Step::Staged).unwrap();
        journal.record(&Step::Aside("PROJECT".to_owned())).unwrap();
        fs::rename(root.join("PROJECT"), staging.join(OLD).join("PROJECT")).unwrap();
        fs::write(root.join("PROJECT"), "an editor's").unwrap();
        let error = format!("{:#}", recover(&root).unwrap_err());
        assert!(
            error.contains("`PROJECT` came back while alpha generate --force was swapping"),
            "{error}"
        );
        assert_eq!(
            fs::read_to_string(staging.join(OLD).join("PROJECT")).unwrap(),
            "old"
        );
        assert_eq!(
            fs::read_to_string(root.join("PROJECT")).unwrap(),
            "an editor's"
        );
    }

    /// The folders the renames changed are flushed: each must be there.
    #[test]
    fn the_folders_are_flushed_before_the_journal_says_done() {
        let parent = tempfile::tempdir().unwrap();
        let root = project_dir(parent.path());
        let error = format!("{:#}", sync_folders(&root).unwrap_err());
        assert!(
            error.starts_with("failed to flush `") && error.contains("old`"),
            "{error}"
        );
        fs::create_dir_all(root.join(STAGING).join(OLD)).unwrap();
        fs::create_dir_all(root.join(STAGING).join(NEW)).unwrap();
        sync_folders(&root).unwrap();
    }

    /// A name the journal cannot hold on one line is refused before anything moves.
    #[test]
    fn a_name_with_a_line_break_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let root = project_dir(parent.path());
        assert_eq!(names(&root).unwrap(), ["PROJECT", "src"]);
        fs::write(root.join("a\nb"), "").unwrap();
        let error = names(&root).unwrap_err().to_string();
        assert!(error.starts_with("\"a\\nb\" in `"), "{error}");
        fs::remove_file(root.join("a\nb")).unwrap();
        fs::write(root.join("Icon\r"), "").unwrap();
        assert!(names(&root).is_err());
        // target/ is cargo's: it stays where it is.
        fs::remove_file(root.join("Icon\r")).unwrap();
        fs::create_dir(root.join("target")).unwrap();
        assert_eq!(names(&root).unwrap(), ["PROJECT", "src"]);
    }

    /// A staging folder without a journal (killed as it was made, or as it was removed) holds
    /// nothing of the project's: it is removed. A journal that cannot be read is an error that
    /// names it, and the folder stays.
    #[test]
    fn a_staging_folder_without_a_readable_journal() {
        let (_parent, root, before) = project();
        fs::create_dir_all(root.join(STAGING).join(NEW)).unwrap();
        recover(&root).unwrap();
        assert_eq!(entries(&root), before);

        fs::create_dir_all(root.join(STAGING).join(JOURNAL).join("x")).unwrap();
        let error = format!("{:#}", recover(&root).unwrap_err());
        assert!(
            error.contains(
                "its swap could not be undone: failed to read `.rsbuilder-generate/journal`"
            ),
            "{error}"
        );
        let error = format!("{:#}", finish(&root.join(STAGING)).unwrap_err());
        assert!(
            error.starts_with("failed to remove `.rsbuilder-generate/journal`"),
            "{error}"
        );
        assert!(root.join(STAGING).exists());
    }

    /// The root is the folder that holds the staging folder, while PROJECT is aside.
    #[test]
    fn the_root_of_an_interrupted_swap_is_found_from_below() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("shop");
        fs::create_dir_all(root.join(STAGING)).unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        assert_eq!(
            interrupted_root(&root.join("src/deep")),
            Some((root.clone(), false))
        );
        assert_eq!(
            interrupted_root(&root.join(STAGING).join("old/operator")),
            Some((root.clone(), true))
        );
        assert_eq!(interrupted_root(parent.path()), None);
    }
}
