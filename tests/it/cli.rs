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
