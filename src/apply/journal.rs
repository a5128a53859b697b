//! The journal a write keeps before each step, and the undoing of an interrupted one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::ui::{self, UserError};

/// The journal of the command that is writing the project: what it created, replaced and
/// removed, in order, so that an interrupted command can be undone. It lives in the project's
/// root while the command writes, and is removed when the command ends.
pub const JOURNAL: &str = ".rsbuilder-journal";
/// Where the journal keeps the files it replaced or removed, as they were.
pub const UNDO_DIR: &str = ".rsbuilder-undo";

/// Undoes the changes of a command that was interrupted while it wrote (killed, or the machine
/// stopped): the tree goes back to what it was before that command.
pub(super) fn recover(root: &Path) -> anyhow::Result<()> {
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
pub(super) enum Entry {
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
    pub(super) fn line(&self) -> String {
        let (word, path) = match self {
            Self::Dir(path) => ("dir", path),
            Self::Create(path) => ("create", path),
            Self::Replace(path) => ("replace", path),
            Self::Remove(path) => ("remove", path),
        };
        format!("{word}\t{}\n", path.display())
    }

    pub(super) fn parse(line: &str) -> Option<Self> {
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
pub(super) fn temporary(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.rsbuilder-new"))
}

/// Writes `bytes` to `path` whole or not at all: to a temporary file beside it, renamed over it.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
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
pub(super) struct Journal {
    root: PathBuf,
    file: fs::File,
    pub(super) entries: Vec<Entry>,
}

impl Journal {
    pub(super) fn begin(root: &Path) -> anyhow::Result<Self> {
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
    pub(super) fn record(&mut self, entry: Entry) -> anyhow::Result<()> {
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
pub(super) fn undo(root: &Path, entries: &[Entry]) -> Vec<String> {
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
pub(super) fn never_made(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Removes the journal, then the copies it kept. Removing the journal is what commits the
/// command's writes (or their undoing): copies left behind by an interruption after it are
/// removed by the next command.
pub(super) fn finish(root: &Path) -> anyhow::Result<()> {
    fs::remove_file(root.join(JOURNAL)).with_context(|| format!("failed to remove `{JOURNAL}`"))?;
    remove_copies(root)
}

pub(super) fn remove_copies(root: &Path) -> anyhow::Result<()> {
    match fs::remove_dir_all(root.join(UNDO_DIR)) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => {
            Err(error).with_context(|| format!("failed to remove `{UNDO_DIR}`"))
        }
        _ => Ok(()),
    }
}
