//! rsbuilder killed at each of its writes in turn, and two commands run at once: a project is
//! never left half written.
//!
//! The kills come from strace's fault injection: SIGKILL at the Nth call of each syscall that
//! writes (`write`, `rename`, `mkdir`, `unlink` and their `*at` forms), for N = 1, 2, ... until
//! the command runs to its end. After each kill the tree is the old one, the new one, or holds
//! the command's journal; and unless it is the new one, running the command again (whose lock
//! undoes the journal first) gives exactly the tree of an uninterrupted run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{APP, INIT, Workspace};

/// How many kill points a command may have before the test calls it a runaway.
const MOST_KILL_POINTS: usize = 600;

fn strace() -> Option<PathBuf> {
    let found = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|output| output.status.success());
    if found {
        return Some(PathBuf::from("strace"));
    }
    assert!(
        std::env::var_os("RSBUILDER_REQUIRE_STRACE").is_none_or(|v| v != "1"),
        "strace is not installed, and RSBUILDER_REQUIRE_STRACE=1"
    );
    None
}

/// Copies the tree at `from` into `to`, which exists.
fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rsbuilder"))
}

/// Runs rsbuilder with `args` in `dir`, killed at the `n`th call of a writing syscall; whether
/// it was killed.
fn run_killed_at(strace: &Path, dir: &Path, args: &[&str], n: usize, children: bool) -> bool {
    run_killed_with(strace, dir, args, (WRITING, n), children, &[])
}

/// The syscalls that write.
const WRITING: &str = "write,rename,renameat,renameat2,mkdir,mkdirat,unlink,unlinkat";

/// [`run_killed_at`] with `env` set, killed at the `n`th call of each of the syscalls `calls`
/// (strace counts the calls of each syscall on its own).
fn run_killed_with(
    strace: &Path,
    dir: &Path,
    args: &[&str],
    (calls, n): (&str, usize),
    children: bool,
    env: &[(&str, &std::ffi::OsStr)],
) -> bool {
    let status = Command::new(strace)
        .current_dir(dir)
        .envs(env.iter().copied())
        .args(children.then_some("-f"))
        .args(["-qq", "-o", "/dev/null", "-e", &format!("trace={calls}")])
        .args(["-e", &format!("inject={calls}:signal=KILL:when={n}")])
        .arg(binary())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    !status.success()
}

/// The tree without the journal and its copies.
fn without_journal(tree: &BTreeMap<PathBuf, Vec<u8>>) -> BTreeMap<PathBuf, Vec<u8>> {
    tree.iter()
        .filter(|(path, _)| {
            !path.starts_with(".rsbuilder-journal")
                && !path.starts_with(".rsbuilder-undo")
                && !path.starts_with(".rsbuilder-generate")
        })
        .map(|(path, bytes)| (path.clone(), bytes.clone()))
        .collect()
}

/// Kills `command` at every write in turn, in a project made by `setup`.
fn survives_every_kill(setup: &[&[&str]], command: &[&str], prepare: fn(&Workspace)) {
    survives_every_kill_of(setup, command, prepare, true);
}

/// [`survives_every_kill`], with the writes of `command`'s child processes counted when
/// `children` (without, only the writes of the rsbuilder that was started).
fn survives_every_kill_of(
    setup: &[&[&str]],
    command: &[&str],
    prepare: fn(&Workspace),
    children: bool,
) {
    let Some(strace) = strace() else {
        println!("skipped: strace is not installed");
        return;
    };
    let base = Workspace::new("crash-operator");
    for args in setup {
        base.run(args).success();
    }
    prepare(&base);
    let old = base.snapshot();
    let done = Workspace::new("crash-operator");
    copy_tree(base.root(), done.root());
    done.run(command).success();
    let new = done.snapshot();
    assert_ne!(old, new, "{command:?} changed nothing");

    // The state a kill leaves, then the command run again.
    let check = |ws: &Workspace, at: &str| {
        let killed = ws.snapshot();
        let journaled = killed.contains_key(Path::new(".rsbuilder-journal"))
            || ws.root().join(".rsbuilder-generate").exists();
        let whole = without_journal(&killed) == old || without_journal(&killed) == new;
        assert!(
            journaled || whole,
            "{command:?} killed at {at} left a half-written tree without a journal"
        );
        if killed == new {
            // Killed once its writes were done (while it printed them).
            return;
        }
        ws.run(command).success();
        assert_eq!(
            ws.snapshot(),
            new,
            "{command:?} killed at {at}, then run again, gave another tree"
        );
    };
    if !children {
        // Each write of its own in the project, and each line it prints: a process whose
        // children write elsewhere has few, and strace counts each syscall on its own.
        let probe = Workspace::new("crash-operator");
        copy_tree(base.root(), probe.root());
        let points = project_writes(&strace, probe.root(), command, &[]);
        assert!(points.len() > 10, "{points:?}");
        for (call, n) in &points {
            let ws = Workspace::new("crash-operator");
            copy_tree(base.root(), ws.root());
            assert!(
                run_killed_with(&strace, ws.root(), command, (call, *n), false, &[]),
                "{command:?} was not killed at {call} {n}"
            );
            check(&ws, &format!("{call} {n}"));
        }
        println!("{command:?}: killed at each of {} writes", points.len());
        return;
    }
    for n in 1..=MOST_KILL_POINTS {
        let ws = Workspace::new("crash-operator");
        copy_tree(base.root(), ws.root());
        if !run_killed_at(&strace, ws.root(), command, n, children) {
            assert_eq!(ws.snapshot(), new, "{command:?} ran to its end at n = {n}");
            println!("{command:?}: killed at each of {} writes", n - 1);
            return;
        }
        check(&ws, &format!("write {n}"));
    }
    panic!("{command:?} was still being killed after {MOST_KILL_POINTS} writes");
}

fn nothing(_: &Workspace) {}

/// Ctrl-C (SIGINT) at any rename of `create api`: the command stops, undoes what it wrote and
/// says so (exit 1, the old tree), or, after its last rename, finishes (exit 0, the new tree).
/// Never a half-written tree.
#[test]
fn ctrl_c_while_writing_undoes_the_writes() {
    let Some(strace) = strace() else {
        println!("skipped: strace is not installed");
        return;
    };
    let base = Workspace::new("interrupted-operator");
    base.run(INIT).success();
    let old = base.snapshot();
    let command = [
        "create",
        "api",
        "--group",
        "apps",
        "--version",
        "v1",
        "--kind",
        "Cache",
    ];
    let done = Workspace::new("interrupted-operator");
    copy_tree(base.root(), done.root());
    done.run(&command).success();
    let new = done.snapshot();
    let calls = "rename,renameat,renameat2";
    for n in 1..=MOST_KILL_POINTS {
        let ws = Workspace::new("interrupted-operator");
        copy_tree(base.root(), ws.root());
        let output = Command::new(&strace)
            .current_dir(ws.root())
            .args([
                "-f",
                "-qq",
                "-o",
                "/dev/null",
                "-e",
                &format!("trace={calls}"),
            ])
            .args(["-e", &format!("inject={calls}:signal=INT:when={n}")])
            .arg(binary())
            .args(command)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        if output.status.success() {
            assert_eq!(ws.snapshot(), new, "interrupted at rename {n}");
            assert!(n > 1, "no Ctrl-C was undone");
            println!("Ctrl-C at each of {} renames was undone", n - 1);
            return;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "Ctrl-C at rename {n} ended the process: {stderr}"
        );
        assert!(
            stderr.contains("error: failed to write `")
                && stderr.contains("nothing was changed: interrupted"),
            "Ctrl-C at rename {n}: {stderr}"
        );
        assert_eq!(
            ws.snapshot(),
            old,
            "Ctrl-C at rename {n} left a changed tree"
        );
    }
    panic!("still interrupted after {MOST_KILL_POINTS} renames");
}

#[test]
fn init_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill(&[], INIT, nothing);
}

#[test]
fn create_api_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill(&[INIT], APP, nothing);
}

#[test]
fn create_webhook_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill(
        &[INIT, APP],
        &[
            "create",
            "webhook",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--defaulting",
            "--programmatic-validation",
        ],
        nothing,
    );
}

#[test]
fn edit_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill(&[INIT, APP], &["edit", "--namespaced"], nothing);
}

#[test]
fn upgrade_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill(&[INIT], &["upgrade"], crate::upgrade::make_runtime_older);
}

/// `alpha generate --force` killed at each write of its own (the commands it runs write in a
/// scratch folder): at the copy into the staging folder, at each journaled rename of the swap,
/// and at the removal of the old entries. The project is the old tree, the new one, or holds
/// the swap's journal, which the next command's lock undoes or finishes.
#[test]
fn alpha_generate_force_killed_at_any_write_leaves_no_half_project() {
    survives_every_kill_of(
        &[INIT, APP],
        &["alpha", "generate", "--force"],
        |ws| {
            // What the swap replaces or removes: a scaffold file edited, and a file of the user's.
            let makefile = ws.read("Makefile") + "# mine\n";
            ws.write("Makefile", &makefile);
            ws.write("notes/todo.txt", "mine\n");
        },
        false,
    );
}

/// `alpha update` killed at each write of its own (the scaffolds it merges are made in scratch
/// folders, the manifests in a copy of the merged project): the project's files are the old
/// ones, the updated ones, or hold the journal. Run again, it undoes what the lock finds
/// journaled, leaves the branch an interrupted update left before its commit, and commits the
/// same update.
#[test]
fn alpha_update_killed_at_any_write_leaves_no_half_project() {
    use crate::alpha::{git, older_project};
    let Some(strace) = strace() else {
        println!("skipped: strace is not installed");
        return;
    };
    let Some((base, older)) = older_project() else {
        return;
    };
    // The user's edits, which the update keeps.
    let makefile = base
        .read("Makefile")
        .replace("IMG ?= controller:latest", "IMG ?= mine:1");
    base.write("Makefile", &makefile);
    git(&base, &["add", "--all"]);
    git(&base, &["commit", "--quiet", "-m", "edits"]);
    let work_tree = |dir: &Path| {
        let mut tree = crate::support::snapshot(dir);
        tree.retain(|path, _| !path.starts_with(".git"));
        tree
    };
    let old = work_tree(base.root());
    // Each run in the same folder, copied with its files' times, so that cargo finds the
    // merged project's crdgen built.
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("otp-operator");
    let fresh_copy = || {
        let _ = std::fs::remove_dir_all(&dir);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(base.root())
            .arg(&dir)
            .status()
            .unwrap();
        assert!(copied.success());
    };
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generated-projects");
    let env = [
        (
            "RSBUILDER_REAL",
            std::ffi::OsStr::new(env!("CARGO_BIN_EXE_rsbuilder")),
        ),
        ("CARGO_TARGET_DIR", target.as_os_str()),
        ("GIT_AUTHOR_NAME", std::ffi::OsStr::new("t")),
        ("GIT_AUTHOR_EMAIL", std::ffi::OsStr::new("t@example.com")),
        ("GIT_COMMITTER_NAME", std::ffi::OsStr::new("t")),
        ("GIT_COMMITTER_EMAIL", std::ffi::OsStr::new("t@example.com")),
    ];
    let args = ["alpha", "update", "--from-binary", older.to_str().unwrap()];
    let update = || {
        let output = Command::new(binary())
            .current_dir(&dir)
            .envs(env.iter().copied())
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let in_dir = |args: &[&str]| -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    let committed = || {
        (
            in_dir(&["branch", "--show-current"]),
            in_dir(&["log", "-1", "--format=%s"]),
        )
    };
    fresh_copy();
    update();
    let new = work_tree(&dir);
    let expected = committed();
    assert_ne!(old, new, "the update changed nothing");
    assert_eq!(
        expected.1,
        "Update the scaffold from rsbuilder 0.1.0 to 0.1.0\n"
    );
    // The kill points: each write of the project's files, and each line printed (between the
    // steps); the writes in scratch folders (the scaffolds, the merged copy) are left out.
    fresh_copy();
    let points = project_writes(&strace, &dir, &args, &env);
    assert!(points.len() > 10, "{points:?}");
    for (call, n) in &points {
        let n = *n;
        fresh_copy();
        assert!(
            run_killed_with(&strace, &dir, &args, (call, n), false, &env),
            "alpha update was not killed at {call} {n}"
        );
        let killed = without_journal(&work_tree(&dir));
        let journaled = dir.join(".rsbuilder-journal").exists();
        assert!(
            journaled || killed == old || killed == new,
            "alpha update killed at {call} {n} left a half-written tree without a journal"
        );
        if killed == new && !journaled {
            // Killed once its writes were done (while it printed them).
            continue;
        }
        update();
        assert_eq!(
            work_tree(&dir),
            new,
            "alpha update killed at {call} {n}, then run again, gave another tree"
        );
        assert_eq!(
            committed(),
            expected,
            "killed at {call} {n}, then run again"
        );
    }
    println!("alpha update: killed at each of {} writes", points.len());
}

/// The writing syscalls of `args` run in `dir` that write in `dir` or print on stderr, from one
/// traced run, each as its name and its number among the calls of that name (from 1, as
/// strace's `when=` counts); the tree is left as that run leaves it.
fn project_writes(
    strace: &Path,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Vec<(String, usize)> {
    let calls = WRITING;
    let log = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new(strace)
        .current_dir(dir)
        .envs(env.iter().copied())
        .args(["-qq", "-y", "-o"])
        .arg(log.path())
        .args(["-e", &format!("trace={calls}")])
        .arg(binary())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let inside = format!("{}/", dir.display());
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut points = Vec::new();
    for line in std::fs::read_to_string(log.path()).unwrap().lines() {
        let Some((call, _)) = line.split_once('(') else {
            continue;
        };
        if line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        let n = counts.entry(call.to_owned()).or_default();
        *n += 1;
        let in_project = line.contains(&inside) && !line.contains("/rsbuilder-");
        if in_project || line.starts_with("write(2") {
            points.push((call.to_owned(), *n));
        }
    }
    points
}

/// Two `create api` at once in one project: both kinds end up in PROJECT and main.rs, whatever
/// the order; without the lock one of them was lost in most runs.
#[test]
fn two_commands_at_once_both_take_effect() {
    for round in 0..5 {
        let ws = Workspace::new("concurrent-operator");
        ws.run(INIT).success();
        let start = |kind: &str| {
            Command::new(binary())
                .current_dir(ws.root())
                .args([
                    "create",
                    "api",
                    "--group",
                    "apps",
                    "--version",
                    "v1",
                    "--kind",
                    kind,
                ])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        let (mut first, mut second) = (start("Cache"), start("Queue"));
        assert!(first.wait().unwrap().success(), "round {round}");
        assert!(second.wait().unwrap().success(), "round {round}");
        let project = ws.read("PROJECT");
        let main = ws.read("operator/src/main.rs");
        for kind in ["Cache", "Queue"] {
            assert!(
                project.contains(&format!("kind: {kind}")),
                "round {round}: {kind} lost from PROJECT"
            );
        }
        for module in ["cache", "queue"] {
            assert!(
                main.contains(module),
                "round {round}: {module} lost from main.rs"
            );
        }
        assert!(!ws.root().join(".rsbuilder-journal").exists());
    }
}

/// Ctrl-C after the last write, while `create api --make` waits for cargo, ends rsbuilder at
/// once, as Ctrl-C does before the first write.
#[test]
fn ctrl_c_after_the_writes_ends_the_command() {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let ws = Workspace::new("interrupted-operator");
    ws.run(INIT).success();
    let bin = tempfile::tempdir().unwrap();
    let (cargo, started) = (bin.path().join("cargo"), bin.path().join("started"));
    crate::support::write_executable(
        &cargo,
        &format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 60\n",
            started.display()
        ),
    );
    let mut child = Command::new(binary())
        .current_dir(ws.root())
        .args(["create", "api", "--group", "apps", "--version", "v1"])
        .args(["--kind", "Cache", "--make"])
        .env("CARGO", &cargo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let waiting = Instant::now();
    let sleeper = loop {
        if let Ok(pid) = std::fs::read_to_string(&started)
            && pid.ends_with('\n')
        {
            break pid.trim().to_owned();
        }
        if waiting.elapsed() > Duration::from_secs(60) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("create api --make did not run cargo within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let kill = |signal: &str, pid: &str| {
        Command::new("kill").args([signal, pid]).status().unwrap();
    };
    kill("-INT", &child.id().to_string());
    let interrupted = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if interrupted.elapsed() > Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    kill("-KILL", &sleeper);
    let Some(status) = status else {
        let _ = child.kill();
        panic!("rsbuilder ignored Ctrl-C after its writes for 10 s");
    };
    assert_eq!(status.signal(), Some(2), "ended by SIGINT: {status:?}");
}
