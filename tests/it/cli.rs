//! The commands that need no project: help, version, completion, and usage errors.

use crate::support::{Workspace, stderr};

#[test]
fn version_names_what_it_scaffolds() {
    let out = Workspace::new("x").run(&["version"]).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.starts_with(&format!("rsbuilder {}\n", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    for line in [
        "rsbuilder-runtime 0.1.0",
        "kube 5.0.0",
        "k8s-openapi 0.29.0",
        "kubernetes 1.33",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in {stdout}");
    }
}

#[test]
fn completion_scripts_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = Workspace::new("x").run(&["completion", shell]).success();
        let script = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(
            script.contains("rsbuilder") && script.contains("init"),
            "{shell}: {script}"
        );
    }
}

#[test]
fn usage_errors_exit_with_2_and_write_nothing() {
    let ws = Workspace::new("x");
    for args in [
        &["init", "--no-such-flag"][..],
        &["init", "--license", "gpl"],
        &["frobnicate"],
        &[],
    ] {
        ws.run(args).code(2);
    }
    assert!(ws.snapshot().is_empty());
}

#[test]
fn help_lists_the_commands() {
    let out = Workspace::new("x").run(&["--help"]).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for command in ["init", "version", "completion"] {
        assert!(stdout.contains(command), "{stdout}");
    }
    let out = Workspace::new("x").run(&["init", "--help"]).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for flag in [
        "--domain",
        "--project-name",
        "--repo",
        "--owner",
        "--license",
        "--namespaced",
        "--force",
        "--dry-run",
    ] {
        assert!(stdout.contains(flag), "{flag} in {stdout}");
    }
    let _ = stderr(&out);
}

/// Runs rsbuilder with its stdout (or its stderr) a pipe whose reader is already gone, as
/// `| true` leaves it and `| head -1` leaves it after the first line: every write fails with
/// EPIPE, deterministically.
fn with_closed_pipe(dir: &std::path::Path, args: &[&str], stderr: bool) -> std::process::Output {
    use std::process::{Command, Stdio};
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("rsbuilder"));
    command.current_dir(dir).args(args).stdin(Stdio::null());
    if stderr {
        command.stderr(writer).stdout(Stdio::null());
    } else {
        command.stdout(writer).stderr(Stdio::piped());
    }
    command.output().expect("rsbuilder runs")
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["version"][..], &["completion", "bash"][..]] {
        let output = with_closed_pipe(dir.path(), args, false);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }

    // `init ... 2>&1 | head -1`: the files are all written, and the command succeeds.
    let project = dir.path().join("piped-operator");
    std::fs::create_dir(&project).unwrap();
    let output = with_closed_pipe(&project, &["init", "--domain", "learn.com"], true);
    assert_eq!(output.status.code(), Some(0));
    assert!(project.join("PROJECT").is_file());
}
