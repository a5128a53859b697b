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
