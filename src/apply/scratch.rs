//! Folders of their own for files that are not the project's.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::tree::Tree;

/// Copies the file `relative` of `tree` to the same path under `dir` (a new tree, not the
/// project), making its folders; `false` when `tree` has no such file. The file is read whole
/// before its copy is opened: a `dir` that is the tree's own folder gets it back as it was,
/// never truncated first (as `fs::copy` does).
pub fn carry(tree: &dyn Tree, relative: &Path, dir: &Path) -> anyhow::Result<bool> {
    // A folder in its place is not the file: nothing to carry.
    if !tree.is_file(relative) {
        return Ok(false);
    }
    let Some(bytes) = tree.read_bytes(relative)? else {
        return Ok(false);
    };
    let to = dir.join(relative);
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)
            .with_context(|| format!("failed to create {}", parent.display()))?;
    }
    fs::write(&to, bytes).with_context(|| format!("failed to write {}", to.display()))?;
    Ok(true)
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
