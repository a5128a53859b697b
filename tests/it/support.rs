//! A small builder over assert_cmd and tempfile: a temporary project directory, the binary run
//! inside it, and snapshots of the tree to prove that a failed command changed nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use assert_cmd::assert::Assert;
use tempfile::TempDir;

/// A temporary directory named like a project, where `rsbuilder` runs.
pub struct Workspace {
    _temp: TempDir,
    root: PathBuf,
}

impl Workspace {
    /// An empty directory called `name`.
    pub fn new(name: &str) -> Self {
        let temp = tempfile::tempdir().expect("a temporary directory");
        let root = temp.path().join(name);
        std::fs::create_dir(&root).expect("the project directory");
        Self { _temp: temp, root }
    }

    /// The project directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `rsbuilder args...` in the project directory, with no terminal on stdin.
    pub fn run(&self, args: &[&str]) -> Assert {
        rsbuilder(&self.root, args)
    }

    /// Runs `rsbuilder args...` in the project directory with `CARGO_TARGET_DIR` set, so that
    /// the cargo builds `generate` starts share their output across tests.
    pub fn run_with_target(&self, target: &Path, args: &[&str]) -> Assert {
        Command::cargo_bin("rsbuilder")
            .expect("the rsbuilder binary")
            .current_dir(&self.root)
            .env("CARGO_TARGET_DIR", target)
            .args(args)
            .write_stdin("")
            .assert()
    }

    /// Writes a file, creating its folders.
    pub fn write(&self, path: &str, contents: &str) {
        let path = self.root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    /// Reads a file.
    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path)).unwrap()
    }

    /// Every file and folder with its bytes.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        snapshot(&self.root)
    }
}

/// Runs `rsbuilder args...` in `dir`.
pub fn rsbuilder(dir: &Path, args: &[&str]) -> Assert {
    Command::cargo_bin("rsbuilder")
        .expect("the rsbuilder binary")
        .current_dir(dir)
        .args(args)
        .write_stdin("")
        .assert()
}

/// Every file (with its bytes) and folder (with none) under `root`, by relative path.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .map(|entry| entry.expect("a readable tree"))
        .map(|entry| {
            let bytes = if entry.file_type().is_file() {
                std::fs::read(entry.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                entry.path().strip_prefix(root).unwrap().to_path_buf(),
                bytes,
            )
        })
        .collect()
}

/// Fails, naming the paths that differ, when two snapshots of a tree are not the same.
#[track_caller]
pub fn assert_same_tree(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
    what: &str,
) {
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|path| before.get(*path) != after.get(*path))
        .map(|path| path.display().to_string())
        .collect();
    assert!(changed.is_empty(), "{what} changed {changed:?}");
}

/// The text of a command's stdout: its data (`--dry-run` listings and diffs among them).
pub fn stdout(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

/// The text of a command's stderr.
pub fn stderr(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

/// Runs `rsbuilder args...`, which must fail with exit code 1, a line starting with `error:
/// <error>` and one starting with `help: <help>` (a trailing newline asks for the whole line),
/// and leave the tree as it was.
#[track_caller]
pub fn assert_refused(ws: &Workspace, args: &[&str], error: &str, help: &str) {
    let before = ws.snapshot();
    let err = stderr(&ws.run(args).code(1));
    let command = args.join(" ");
    // A line that starts with the text; with a trailing newline, a line that is the text.
    let starts = |prefix: String| {
        err.lines().any(|line| match prefix.strip_suffix('\n') {
            Some(whole) => line == whole,
            None => line.starts_with(&prefix),
        })
    };
    assert!(
        starts(format!("error: {error}")),
        "`{command}`: want a line starting `error: {error}` in:\n{err}"
    );
    assert!(
        starts(format!("help: {help}")),
        "`{command}`: want a line starting `help: {help}` in:\n{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), &format!("`{command}`"));
}

/// Writes an executable script at `path`.
///
/// The file is written by a `sh` child, never through a descriptor of this process: the tests
/// run on many threads, and a descriptor open for writing here would be inherited by a child
/// another thread forks at that moment, so executing the script could fail with "Text file
/// busy" until that child execs.
pub fn write_executable(path: &Path, text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "could not write {}", path.display());
}

/// `init` of the projects the tests scaffold.
pub const INIT: &[&str] = &["init", "--domain", "example.com"];

/// `create api` of their one kind, `apps/v1` `Cache`.
pub const APP: &[&str] = &[
    "create",
    "api",
    "--group",
    "apps",
    "--version",
    "v1",
    "--kind",
    "Cache",
];
