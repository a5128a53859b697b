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
    /// Every entry below `dir` that is not a folder (files, links), in path order, but those in
    /// folders `prune` says to leave out (never entered: `runtime/target`).
    fn files_below(
        &self,
        dir: &Path,
        prune: &dyn Fn(&Path) -> bool,
    ) -> anyhow::Result<Vec<PathBuf>>;

    /// The bytes of `relative`, or `None` when it does not exist.
    fn read_bytes(&self, relative: &Path) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self.read(relative)?.map(String::into_bytes))
    }

    /// The files below `dir` whose names end in `.extension`, in path order.
    fn files_under(&self, dir: &Path, extension: &str) -> anyhow::Result<Vec<PathBuf>> {
        let mut files = self.files_below(dir, &|_| false)?;
        files.retain(|path| path.extension().is_some_and(|e| e == extension));
        Ok(files)
    }
}

/// The project at a root on disk.
#[derive(Debug, Clone, Copy)]
pub struct OnDisk<'a>(pub &'a Path);

impl Tree for OnDisk<'_> {
    fn read(&self, relative: &Path) -> anyhow::Result<Option<String>> {
        let Some(bytes) = self.read_bytes(relative)? else {
            return Ok(None);
        };
        String::from_utf8(bytes).map(Some).map_err(|_| {
            UserError::new(format!(
                "`{}` exists and is not UTF-8 text",
                relative.display()
            ))
            .into()
        })
    }

    fn is_file(&self, relative: &Path) -> bool {
        fs::symlink_metadata(self.0.join(relative)).is_ok_and(|meta| !meta.is_dir())
    }

    fn is_read_only(&self, relative: &Path) -> bool {
        fs::metadata(self.0.join(relative)).is_ok_and(|meta| meta.permissions().readonly())
    }

    fn read_bytes(&self, relative: &Path) -> anyhow::Result<Option<Vec<u8>>> {
        let path = self.0.join(relative);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
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
                "`{}` is a directory, where rsbuilder expects a file",
                relative.display()
            ))
            .help("move the directory away, then run the command again")
            .into()),
            Err(error) => {
                Err(error).with_context(|| format!("failed to read `{}`", relative.display()))
            }
        }
    }

    fn files_below(
        &self,
        dir: &Path,
        prune: &dyn Fn(&Path) -> bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        let start = self.0.join(dir);
        if !start.is_dir() {
            return Ok(Vec::new());
        }
        let root = self.0;
        let relative = move |path: &Path| path.strip_prefix(root).unwrap_or(path).to_path_buf();
        let mut files = Vec::new();
        let walk = walkdir::WalkDir::new(&start)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|entry| !(entry.file_type().is_dir() && prune(&relative(entry.path()))));
        for entry in walk {
            let entry = entry.with_context(|| format!("failed to read `{}`", dir.display()))?;
            // A link is listed, not followed: reading it reads what it points to.
            if !entry.file_type().is_dir() {
                files.push(relative(entry.path()));
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

    fn files_below(
        &self,
        dir: &Path,
        prune: &dyn Fn(&Path) -> bool,
    ) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self
            .files
            .keys()
            .filter(|path| path.starts_with(dir))
            .filter(|path| {
                !path
                    .ancestors()
                    .skip(1)
                    .take_while(|folder| folder.starts_with(dir) && *folder != dir)
                    .any(prune)
            })
            .cloned()
            .collect())
    }
}

/// Whether `a` and `b` name the same folder, links resolved.
pub fn same_folder(a: &Path, b: &Path) -> bool {
    fs::canonicalize(a).ok() == fs::canonicalize(b).ok()
}

/// Whether `dir` holds nothing: it is missing, not a folder, or an empty one.
pub fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The disk and memory list the same files below a folder, and neither enters a folder
    /// `prune` names (`runtime/target` is never walked).
    #[test]
    fn files_below_a_folder_are_listed_alike_on_disk_and_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            "runtime/Cargo.toml",
            "runtime/src/lib.rs",
            "runtime/src/webhook/mod.rs",
            "runtime/target/debug/build.rs",
            "runtime-notes.txt",
            "api/src/lib.rs",
        ];
        let mut memory = Memory::default();
        for file in files {
            let path = dir.path().join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, file).unwrap();
            memory.files.insert(PathBuf::from(file), file.to_owned());
        }
        let target = Path::new("runtime/target");
        let prune = |folder: &Path| folder == target;
        let want: Vec<PathBuf> = [
            "runtime/Cargo.toml",
            "runtime/src/lib.rs",
            "runtime/src/webhook/mod.rs",
        ]
        .map(PathBuf::from)
        .to_vec();
        let runtime = Path::new("runtime");
        assert_eq!(
            OnDisk(dir.path()).files_below(runtime, &prune).unwrap(),
            want
        );
        assert_eq!(memory.files_below(runtime, &prune).unwrap(), want);
        assert_eq!(
            OnDisk(dir.path()).files_under(runtime, "rs").unwrap(),
            memory.files_under(runtime, "rs").unwrap()
        );
        assert_eq!(
            OnDisk(dir.path())
                .read_bytes(Path::new("api/src/lib.rs"))
                .unwrap(),
            Some(b"api/src/lib.rs".to_vec())
        );
        assert!(
            OnDisk(dir.path())
                .files_below(Path::new("missing"), &prune)
                .unwrap()
                .is_empty()
        );
        assert!(is_empty_dir(&dir.path().join("missing")));
        assert!(!is_empty_dir(dir.path()));
    }
}
