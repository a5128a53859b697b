//! The tests of `apply`, by the module they hold to.

mod lock;
mod resolve;
mod write;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::journal::*;
use super::lock::*;
use super::resolve::*;
use super::scratch::*;
use super::write::*;
use super::*;
use crate::scaffold::Policy;
use crate::scaffold::{Derived, Insertion, PlannedFile};
use crate::tree::Memory;
use crate::tree::Tree;
use crate::ui::UserError;

fn file(path: &str, contents: &str, policy: Policy) -> PlannedFile {
    PlannedFile {
        path: path.into(),
        contents: contents.into(),
        policy,
    }
}

/// The text of the file at `path`.
fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path).unwrap()
}

/// A plan of `(path, contents)` files, each regenerated.
fn regenerated(files: &[(&str, &str)]) -> Plan {
    Plan {
        files: files
            .iter()
            .map(|(path, contents)| file(path, contents, Policy::Regenerated))
            .collect(),
        ..Plan::default()
    }
}

/// A temporary folder holding `(path, contents)` files.
fn with_files(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, contents) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }
    dir
}

/// The error of applying `plan` to `root`, which it leaves as it was.
fn refused(root: &Path, plan: Plan) -> anyhow::Error {
    let before = snapshot(root);
    let error = apply(root, plan, Options::default()).unwrap_err();
    assert_eq!(snapshot(root), before);
    error
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
