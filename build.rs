//! Writes the runtime crate as projects vendor it into `OUT_DIR/runtime`, where `runtime.rs`
//! embeds it from, with its `CHECKSUMS` file: hashing the runtime's sources at run time was a
//! quarter of the instructions of `rsbuilder init`.
//!
//! A project gets the library and nothing of its tests: no `tests.rs` or `testing.rs` module
//! (the runtime keeps its unit tests in those files, declared under `#[cfg(test)]`), no
//! declaration of them, and no `[dev-dependencies]`. The tests stay in this repository.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    println!("cargo:rerun-if-changed=templates");
    // The runtime's sources, by the name under which this package carries them (a link to
    // `runtime/`, which is a package of its own and so is left out of this one's `.crate`).
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed=vendor/runtime");
    // In this repository, the files the links point at (a `.crate` has the files themselves).
    for watched in ["runtime/Cargo.toml", "runtime/src"] {
        if root.join(watched).exists() {
            println!("cargo:rerun-if-changed={watched}");
        }
    }
    let sources = root.join("vendor/runtime");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("runtime");
    if out.exists() {
        std::fs::remove_dir_all(&out).expect("OUT_DIR is writable");
    }
    let mut files = vec![(
        PathBuf::from("Cargo.toml"),
        without_dev_dependencies(&read(&sources.join("Cargo.toml.in"))),
    )];
    collect(&sources, Path::new("src"), &mut files);
    files.sort();
    let mut checksums = String::new();
    for (path, text) in &files {
        let target = out.join(path);
        std::fs::create_dir_all(target.parent().expect("a file has a folder"))
            .expect("OUT_DIR is writable");
        std::fs::write(&target, text).expect("OUT_DIR is writable");
        let hex = Sha256::digest(text.as_bytes())
            .iter()
            .fold(String::new(), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            });
        let shown = path.to_string_lossy().replace('\\', "/");
        let _ = writeln!(checksums, "{hex}  {shown}");
    }
    std::fs::write(out.join("CHECKSUMS"), checksums).expect("OUT_DIR is writable");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("the runtime's `{}` reads: {error}", path.display()))
}

/// Whether `name` is a test module's file: the runtime declares these under `#[cfg(test)]`.
fn is_test_module(name: &str) -> bool {
    name == "tests.rs" || name == "testing.rs"
}

/// Every `.rs` file of the library under `sources/<dir>`, with its path relative to `sources`,
/// without the runtime's tests.
fn collect(sources: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let entries = std::fs::read_dir(sources.join(dir)).expect("the runtime's src/ reads");
    for entry in entries {
        let entry = entry.expect("the runtime's src/ reads");
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = dir.join(&name);
        if entry.path().is_dir() {
            collect(sources, &path, out);
        } else if name.ends_with(".rs") && !is_test_module(&name) {
            out.push((
                path.clone(),
                without_test_modules(&read(&sources.join(&path))),
            ));
        }
    }
}

/// `text` without its declarations of test modules: `#[cfg(test)]` and the `mod tests;` or
/// `mod testing;` line under it.
fn without_test_modules(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = String::with_capacity(text.len());
    let mut index = 0;
    while index < lines.len() {
        let declared = lines.get(index + 1).is_some_and(|next| {
            let item = next.trim_start_matches("pub(crate) ");
            item == "mod tests;" || item == "mod testing;"
        });
        if lines[index] == "#[cfg(test)]" && declared {
            index += 2;
            continue;
        }
        kept.push_str(lines[index]);
        kept.push('\n');
        index += 1;
    }
    // A declaration at the end leaves the blank line that stood before it.
    while kept.ends_with("\n\n") {
        kept.pop();
    }
    kept
}

/// The manifest without its `[dev-dependencies]` table: only the runtime's tests use them.
fn without_dev_dependencies(manifest: &str) -> String {
    let mut kept = String::with_capacity(manifest.len());
    let mut skipping = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            skipping = line.trim() == "[dev-dependencies]";
        }
        if !skipping {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}
