//! The files a command reads: the project on disk, or a project in memory for tests. A plan is
//! resolved against a `Tree` (`apply::resolve`), and the files derived from other files (the
//! RBAC role, the webhook configurations) are computed from the tree as the plan leaves it, so
//! that they see the planned files, the insertions and the files kept as the user has them.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::ui::UserError;

/// Read access to a project's files, by paths relative to its root.
pub trait Tree {
    /// The text of `relative`, or `None` when it does not exist; a folder in its place or bytes
    /// that are not UTF-8 are errors that name it.
    fn read(&self, relative: &Path) -> anyhow::Result<Option<String>>;
    /// Whether something other than a folder is at `relative`.
    fn is_file(&self, relative: &Path) -> bool;
    /// Whether the file at `relative` exists and is read-only.
    fn is_read_only(&self, relative: &Path) -> bool;
    /// The files below `dir` whose names end in `.extension`, in path order.
    fn files_under(&self, dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>>;
}

/// The project at a root on disk.
#[derive(Debug, Clone, Copy)]
pub struct OnDisk<'a>(pub &'a Path);

impl Tree for OnDisk<'_> {
    fn read(&self, relative: &Path) -> anyhow::Result<Option<String>> {
        let path = self.0.join(relative);
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

    fn is_file(&self, relative: &Path) -> bool {
        fs::symlink_metadata(self.0.join(relative)).is_ok_and(|meta| !meta.is_dir())
    }

    fn is_read_only(&self, relative: &Path) -> bool {
        fs::metadata(self.0.join(relative)).is_ok_and(|meta| meta.permissions().readonly())
    }

    fn files_under(&self, dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>> {
        let start = self.0.join(dir);
        if !start.exists() {
            return Ok(Vec::new());
        }
        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(&start).sort_by_file_name() {
            let entry = entry.with_context(|| format!("failed to read `{}`", dir.display()))?;
            if entry.file_type().is_file()
                && entry.path().extension().is_some_and(|e| e == extension)
            {
                let relative = entry.path().strip_prefix(self.0).unwrap_or(entry.path());
                files.push(relative.to_path_buf());
            }
        }
        files.sort();
        Ok(files)
    }
}

/// A project in memory: its files by path. Tests plan and apply commands on it as on a disk.
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// Every file, by its path relative to the root.
    pub files: BTreeMap<PathBuf, String>,
}

#[cfg(test)]
impl Tree for Memory {
    fn read(&self, relative: &Path) -> anyhow::Result<Option<String>> {
        Ok(self.files.get(relative).cloned())
    }

    fn is_file(&self, relative: &Path) -> bool {
        self.files.contains_key(relative)
    }

    fn is_read_only(&self, _: &Path) -> bool {
        false
    }

    fn files_under(&self, dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .files
            .keys()
            .filter(|path| {
                path.starts_with(dir) && path.extension().is_some_and(|e| e == extension)
            })
            .cloned()
            .collect())
    }
}

/// Every file below the folders `dirs` whose name ends in `.extension`, with its text, in path
/// order.
pub fn read_all(
    tree: &dyn Tree,
    dirs: &[&str],
    extension: &str,
) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let mut out = BTreeMap::new();
    for dir in dirs {
        for path in tree.files_under(Path::new(dir), extension)? {
            if let Some(text) = tree.read(&path)? {
                out.insert(path, text);
            }
        }
    }
    Ok(out)
}
