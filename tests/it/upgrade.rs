//! `rsbuilder upgrade`: the project's runtime crate is replaced by this rsbuilder's, unless the
//! user changed it; pins are raised; failures and `--dry-run` leave the tree as it was.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::support::{Workspace, assert_same_tree, snapshot, stderr};

fn project(name: &str) -> Workspace {
    let ws = Workspace::new(name);
    ws.run(&["init", "--domain", "learn.com"]).success();
    ws
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The files of `runtime/`, by path.
fn runtime_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    snapshot(&root.join("runtime"))
}

/// Turns the project's runtime into the one an older rsbuilder would have written: other
/// sources, a file the new runtime no longer has, an older version and a lower tokio pin,
/// with `CHECKSUMS` and PROJECT agreeing, as that rsbuilder would have left them.
pub(crate) fn make_runtime_older(ws: &Workspace) {
    let lib = ws.read("runtime/src/lib.rs");
    ws.write("runtime/src/lib.rs", &format!("{lib}\npub mod obsolete;\n"));
    ws.write("runtime/src/obsolete.rs", "//! Gone from newer runtimes.\n");
    let manifest =
        ws.read("runtime/Cargo.toml")
            .replacen("version = \"0.1.0\"", "version = \"0.0.9\"", 1);
    ws.write("runtime/Cargo.toml", &manifest);
    let mut checksums = String::new();
    for (path, bytes) in runtime_files(ws.root()) {
        if path != Path::new("CHECKSUMS") && ws.root().join("runtime").join(&path).is_file() {
            let _ = writeln!(checksums, "{}  {}", sha256(&bytes), path.display());
        }
    }
    ws.write("runtime/CHECKSUMS", &checksums);
    let project = ws.read("PROJECT");
    let project: String = project
        .lines()
        .map(|line| {
            if line.starts_with("    runtimeChecksum: ") {
                format!(
                    "    runtimeChecksum: \"sha256:{}\"\n",
                    sha256(checksums.as_bytes())
                )
            } else if line.starts_with("    runtimeVersion: ") {
                "    runtimeVersion: 0.0.9\n".to_owned()
            } else {
                format!("{line}\n")
            }
        })
        .collect();
    ws.write("PROJECT", &project);
    let workspace = ws.read("Cargo.toml").replace(
        "tokio = { version = \"1.48.0\"",
        "tokio = { version = \"1.40.0\"",
    );
    assert!(
        workspace.contains("\"1.40.0\""),
        "the tokio pin is in Cargo.toml"
    );
    ws.write("Cargo.toml", &workspace);
}

#[test]
fn an_up_to_date_runtime_is_left_alone() {
    let ws = project("up-to-date");
    let before = ws.snapshot();
    let assert = ws.run(&["upgrade"]).success();
    assert_eq!(
        stderr(&assert),
        "the runtime is up to date (rsbuilder-runtime 0.1.0)\n"
    );
    assert_same_tree(&before, &ws.snapshot(), "upgrade of an up-to-date runtime");
}

#[test]
fn an_unchanged_older_runtime_is_replaced_and_its_pins_raised() {
    let fresh = project("fresh-operator");
    let ws = project("old-operator");
    make_runtime_older(&ws);
    let assert = ws.run(&["upgrade"]).success();
    let err = stderr(&assert);
    assert!(
        err.contains("raised tokio 1.40.0 → 1.48.0 in Cargo.toml (the runtime needs it)\n"),
        "{err}"
    );
    assert!(err.contains("updated runtime/src/lib.rs\n"), "{err}");
    assert!(err.contains("removed runtime/src/obsolete.rs\n"), "{err}");
    assert!(err.contains("updated runtime/Cargo.toml\n"), "{err}");
    assert!(
        err.ends_with("upgraded the runtime from rsbuilder-runtime 0.0.9 to 0.1.0; `cargo build` updates Cargo.lock\n"),
        "{err}"
    );
    assert_eq!(runtime_files(ws.root()), runtime_files(fresh.root()));
    assert_eq!(
        ws.read("Cargo.toml"),
        fresh
            .read("Cargo.toml")
            .replace("fresh-operator", "old-operator")
    );
    assert_eq!(
        ws.read("PROJECT"),
        fresh
            .read("PROJECT")
            .replace("fresh-operator", "old-operator")
    );
    // Once upgraded, it is up to date.
    let again = ws.run(&["upgrade"]).success();
    assert!(stderr(&again).starts_with("the runtime is up to date"));
}

#[test]
fn a_changed_runtime_is_refused_naming_the_files_and_forced_over() {
    let ws = project("changed-operator");
    let leader = ws.read("runtime/src/leader.rs");
    ws.write(
        "runtime/src/leader.rs",
        &leader.replace("15 s", "fifteen seconds"),
    );
    ws.write("runtime/src/mine.rs", "//! Added by the user.\n");
    make_runtime_older(&ws);
    // The edits above went into CHECKSUMS too; change two files after it was written.
    ws.write(
        "runtime/src/leader.rs",
        &leader.replace("15 s", "sixteen seconds"),
    );
    ws.write("runtime/src/health.rs", "//! Gutted.\n");
    let before = ws.snapshot();

    let assert = ws.run(&["upgrade"]).failure().code(1);
    assert_eq!(
        stderr(&assert),
        "error: the runtime was changed since rsbuilder wrote it: `runtime/src/health.rs`, `runtime/src/leader.rs` do not match PROJECT's checksum\n\
         help: move your changes out of runtime/ (into operator/), or pass --force to replace them and lose the changes\n"
    );
    assert_same_tree(&before, &ws.snapshot(), "a refused upgrade");

    let assert = ws.run(&["upgrade", "--force"]).success();
    let err = stderr(&assert);
    assert!(err.starts_with("warning: the runtime was changed"), "{err}");
    assert!(err.contains("removed runtime/src/mine.rs\n"), "{err}");
    let fresh = project("fresh");
    assert_eq!(runtime_files(ws.root()), runtime_files(fresh.root()));
}

#[test]
fn files_added_to_the_runtime_or_an_edited_checksum_file_are_changes() {
    let ws = project("added-operator");
    ws.write("runtime/src/mine.rs", "//! Added by the user.\n");
    let assert = ws.run(&["upgrade"]).failure();
    assert!(
        stderr(&assert).starts_with("error: the runtime was changed since rsbuilder wrote it: `runtime/src/mine.rs` does not match"),
        "{}",
        stderr(&assert)
    );

    let ws = project("checksums-operator");
    let checksums = ws.read("runtime/CHECKSUMS");
    ws.write("runtime/CHECKSUMS", &checksums.replacen('0', "1", 1));
    let assert = ws.run(&["upgrade"]).failure();
    assert!(
        stderr(&assert).contains("`runtime/CHECKSUMS` does not match PROJECT's checksum"),
        "{}",
        stderr(&assert)
    );
}

#[test]
fn a_dry_run_shows_the_diff_and_writes_nothing() {
    let ws = project("dry-operator");
    make_runtime_older(&ws);
    let before = ws.snapshot();
    let assert = ws.run(&["upgrade", "--dry-run"]).success();
    // The diff and the listing are data, on stdout: `> upgrade.diff` keeps them.
    let (out, err) = (crate::support::stdout(&assert), stderr(&assert));
    assert!(
        out.contains("--- a/runtime/src/lib.rs\n+++ b/runtime/src/lib.rs\n"),
        "{out}"
    );
    assert!(out.contains("-pub mod obsolete;\n"), "{out}");
    assert!(out.contains("-tokio = { version = \"1.40.0\""), "{out}");
    assert!(out.contains("+tokio = { version = \"1.48.0\""), "{out}");
    assert!(
        out.contains("--- a/runtime/src/obsolete.rs\n+++ /dev/null\n"),
        "{out}"
    );
    assert!(
        out.contains("would remove runtime/src/obsolete.rs\n"),
        "{out}"
    );
    assert!(out.contains("would update PROJECT\n"), "{out}");
    assert!(!err.contains("+++ "), "{err}");
    assert!(
        err.contains("would raise tokio 1.40.0 → 1.48.0 in Cargo.toml (the runtime needs it)\n"),
        "{err}"
    );
    assert!(!err.contains("upgraded the runtime"), "{err}");
    assert_same_tree(&before, &ws.snapshot(), "upgrade --dry-run");

    // `upgrade --dry-run > upgrade.diff; git apply upgrade.diff` is the upgrade, the removal
    // included.
    let applied = Workspace::new("dry-operator");
    for (path, bytes) in &before {
        let target = applied.root().join(path);
        if ws.root().join(path).is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::write(&target, bytes).unwrap();
        }
    }
    let patch = applied.root().parent().unwrap().join("upgrade.diff");
    std::fs::write(&patch, &out).unwrap();
    let git = std::process::Command::new("git")
        .args(["apply", "--unsafe-paths"])
        .arg(&patch)
        .current_dir(applied.root())
        .output()
        .expect("git runs");
    assert!(git.status.success(), "{git:?}");
    ws.run(&["upgrade"]).success();
    assert_same_tree(
        &ws.snapshot(),
        &applied.snapshot(),
        "git apply of the dry run",
    );
}

#[test]
fn a_project_without_a_runtime_record_or_outside_a_project_is_refused() {
    let ws = project("old-layout");
    let project = ws.read("PROJECT");
    let without: String = project
        .lines()
        .filter(|line| !line.starts_with("    runtime"))
        .map(|line| format!("{line}\n"))
        .collect();
    ws.write("PROJECT", &without);
    let before = ws.snapshot();
    let assert = ws.run(&["upgrade"]).failure().code(1);
    let err = stderr(&assert);
    assert!(
        err.starts_with("error: PROJECT records no runtime crate"),
        "{err}"
    );
    assert!(err.contains("\nhelp: scaffold a new project"), "{err}");
    assert_same_tree(&before, &ws.snapshot(), "a refused upgrade");

    let empty = Workspace::new("empty");
    let assert = empty.run(&["upgrade"]).failure().code(1);
    assert!(stderr(&assert).starts_with("error: no PROJECT file found"));
}

#[test]
fn a_failed_upgrade_leaves_the_tree_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let ws = project("locked-operator");
    ws.write("runtime/src/tls.rs", "//! An older TLS module.\n");
    make_runtime_older(&ws);
    let locked = ws.root().join("runtime/src/tls.rs");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = ws.snapshot();
    let assert = ws.run(&["upgrade"]).failure().code(1);
    assert_eq!(
        stderr(&assert),
        "error: `runtime/src/tls.rs` is read-only, and rsbuilder would change it\n\
         help: make it writable (`chmod u+w <file>`), then run the command again\n"
    );
    assert_same_tree(&before, &ws.snapshot(), "a failed upgrade");
}

#[test]
fn a_newer_runtime_is_not_downgraded_without_force() {
    let ws = project("newer-operator");
    let project = ws
        .read("PROJECT")
        .replace("runtimeVersion: 0.1.0", "runtimeVersion: 0.10.0");
    ws.write("PROJECT", &project);
    let before = ws.snapshot();
    let assert = ws.run(&["upgrade"]).failure().code(1);
    assert_eq!(
        stderr(&assert),
        "error: the project's runtime (0.10.0) is newer than this rsbuilder's (0.1.0): upgrading would downgrade it\n\
         help: install a newer rsbuilder (`cargo install rsbuilder`), or pass --force to downgrade\n"
    );
    assert_same_tree(&before, &ws.snapshot(), "a refused downgrade");
    let assert = ws.run(&["upgrade", "--force"]).success();
    assert!(stderr(&assert).starts_with("warning: the project's runtime (0.10.0) is newer"));
    assert!(ws.read("PROJECT").contains("runtimeVersion: 0.1.0\n"));
}

/// A checkout with CRLF line ends (git's `core.autocrlf`) is not a changed runtime.
#[test]
fn a_runtime_checked_out_with_crlf_line_ends_is_unchanged() {
    let ws = project("crlf");
    make_runtime_older(&ws);
    for entry in walkdir::WalkDir::new(ws.root().join("runtime")) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(entry.path(), text.replace('\n', "\r\n")).unwrap();
        }
    }
    let assert = ws.run(&["upgrade"]).success();
    assert!(
        stderr(&assert).contains("upgraded the runtime"),
        "{}",
        stderr(&assert)
    );
}

/// `create api` and `create webhook` in a project whose runtime is older than this
/// rsbuilder's say so, and name `upgrade`.
#[test]
fn scaffolding_on_an_older_runtime_names_upgrade() {
    let ws = project("older-operator");
    make_runtime_older(&ws);
    let said = "the project's runtime is rsbuilder-runtime 0.0.9, older than this rsbuilder's 0.1.0, which the new code is written for: `rsbuilder upgrade` brings it\n";
    let err = stderr(
        &ws.run(&[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
        ])
        .success(),
    );
    assert!(err.ends_with(said), "{err}");
    let err = stderr(
        &ws.run(&[
            "create",
            "webhook",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Frigate",
            "--defaulting",
        ])
        .success(),
    );
    assert!(err.ends_with(said), "{err}");
    ws.run(&["upgrade"]).success();
    let err = stderr(
        &ws.run(&[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Sloop",
        ])
        .success(),
    );
    assert!(!err.contains("rsbuilder upgrade"), "{err}");
}

/// The harness and schema plumbing that rsbuilder keeps: an older text it wrote is refreshed,
/// one the user changed is refused by name (the tree as it was), `--force` replaces it, and a
/// file older than `hack/CHECKSUMS` is kept with a note.
#[test]
fn rsbuilders_other_files_are_refreshed_unless_changed() {
    let ws = project("owned-refresh");
    let fresh = ws.snapshot();
    let sums = ws.read("hack/CHECKSUMS");
    for path in [
        "api/src/schema.rs",
        "hack/e2e_local.py",
        "hack/kube_emulator.py",
    ] {
        assert!(sums.contains(&format!("  {path}\n")), "{path} in:\n{sums}");
    }
    // As an older rsbuilder wrote it, with its checksum.
    let harness = ws.read("hack/e2e_local.py");
    let older = harness.replacen("\n", "\n# an older harness\n", 1);
    ws.write("hack/e2e_local.py", &older);
    ws.write(
        "hack/CHECKSUMS",
        &sums.replace(&sha256(harness.as_bytes()), &sha256(older.as_bytes())),
    );
    let err = stderr(&ws.run(&["upgrade"]).success());
    assert!(
        err.contains("refreshed rsbuilder's files under hack/ and api/src/"),
        "{err}"
    );
    assert_same_tree(&fresh, &ws.snapshot(), "`upgrade` of the harness");

    // Changed by the user: refused, naming it, and nothing written.
    ws.write("hack/e2e_local.py", &older);
    let before = ws.snapshot();
    let err = stderr(&ws.run(&["upgrade"]).code(1));
    assert!(
        err.contains("error: rsbuilder's files were changed since it wrote them: `hack/e2e_local.py` does not match `hack/CHECKSUMS`"),
        "{err}"
    );
    assert!(
        err.contains("help: move your changes into files of your own"),
        "{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), "a refused `upgrade`");
    ws.run(&["upgrade", "--force"]).success();
    assert_same_tree(&fresh, &ws.snapshot(), "`upgrade --force`");

    // Written before hack/CHECKSUMS existed: kept, with a note.
    std::fs::remove_file(ws.root().join("hack/CHECKSUMS")).unwrap();
    ws.write("hack/e2e_local.py", &older);
    let err = stderr(&ws.run(&["upgrade"]).success());
    assert!(
        err.contains("note: hack/e2e_local.py is older than `hack/CHECKSUMS` and is kept"),
        "{err}"
    );
    assert_eq!(ws.read("hack/e2e_local.py"), older);
    assert!(!ws.read("hack/CHECKSUMS").contains("hack/e2e_local.py"));
    assert!(
        ws.read("hack/CHECKSUMS")
            .contains("  hack/kube_emulator.py\n")
    );
}
