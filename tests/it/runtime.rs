//! Where a project takes the runtime crate from: `init --runtime`, `edit --runtime` and
//! `upgrade` in each form, and the refusals that leave the tree as it was.

use std::path::Path;

use crate::support::{Workspace, assert_refused, assert_same_tree, stderr};

/// The runtime's version, which this rsbuilder writes.
const VERSION: &str = "0.1.0";

/// A project made by `init` with `flags`, and one kind.
fn project(flags: &[&str]) -> Workspace {
    let ws = Workspace::new("otp-operator");
    let mut init = vec!["init", "--domain", "learn.com"];
    init.extend_from_slice(flags);
    ws.run(&init).success();
    ws.run(&[
        "create",
        "api",
        "--group",
        "appotp",
        "--version",
        "v1",
        "--kind",
        "AppOTP",
    ])
    .success();
    ws
}

/// The `rsbuilder-runtime` line of the workspace manifest.
fn dependency(ws: &Workspace) -> String {
    let manifest = ws.read("Cargo.toml");
    manifest
        .lines()
        .find(|line| line.starts_with("rsbuilder-runtime = "))
        .unwrap_or_else(|| panic!("no rsbuilder-runtime line in:\n{manifest}"))
        .to_owned()
}

#[test]
fn a_registry_project_depends_on_the_crate_and_holds_no_copy() {
    let ws = project(&["--runtime=registry"]);
    assert_eq!(
        dependency(&ws),
        format!("rsbuilder-runtime = \"={VERSION}\"")
    );
    assert!(!ws.root().join("runtime").exists());
    let project = ws.read("PROJECT");
    assert!(
        project.contains(&format!(
            "    runtime: registry\n    runtimeVersion: {VERSION}\n"
        )),
        "{project}"
    );
    assert!(!project.contains("runtimeChecksum"), "{project}");
    // The manager's own permissions come from the runtime's markers, copy or not.
    let vendored = self::project(&[]);
    assert_eq!(
        ws.read("config/rbac/role.yaml"),
        vendored.read("config/rbac/role.yaml")
    );
    assert!(ws.read("config/rbac/role.yaml").contains("events.k8s.io"));
    // The lock lacks the runtime alone: its checksum is cargo's to write.
    let lock = ws.read("Cargo.lock");
    assert!(
        !lock.contains("rsbuilder-runtime"),
        "the lock names the runtime"
    );
    assert!(lock.contains("name = \"kube-runtime\""));
    for (file, text) in [
        ("Dockerfile", "COPY runtime/"),
        (".dockerignore", "runtime/"),
        (".github/workflows/test.yml", "CHECKSUMS"),
    ] {
        assert!(!ws.read(file).contains(text), "{file}");
        assert!(vendored.read(file).contains(text), "{file}");
    }
}

#[test]
fn path_and_git_forms_write_their_entry() {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime");
    let form = format!("--runtime=path:{}", runtime.display());
    let ws = project(&[&form]);
    assert_eq!(
        dependency(&ws),
        format!("rsbuilder-runtime = {{ path = \"{}\" }}", runtime.display())
    );
    assert!(!ws.root().join("runtime").exists());
    assert!(
        ws.read("PROJECT")
            .contains(&format!("    runtime: path:{}\n", runtime.display()))
    );

    let ws = project(&["--runtime=git:https://github.com/rsbuilder/rsbuilder#v0.1.0"]);
    assert_eq!(
        dependency(&ws),
        "rsbuilder-runtime = { git = \"https://github.com/rsbuilder/rsbuilder\", rev = \"v0.1.0\" }"
    );
    assert!(
        ws.read("PROJECT")
            .contains("    runtime: git:https://github.com/rsbuilder/rsbuilder#v0.1.0\n")
    );
}

#[test]
fn edit_switches_to_what_init_would_have_made_and_back() {
    let ws = project(&[]);
    let vendored = ws.snapshot();
    let err = stderr(&ws.run(&["edit", "--runtime=registry"]).success());
    assert!(
        err.contains("the project takes rsbuilder-runtime 0.1.0 from crates.io"),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l == "removed runtime/src/lib.rs"),
        "{err}"
    );
    let registry = project(&["--runtime=registry"]);
    // Cargo.lock too: as `init` writes it for the form, so `--locked` still holds.
    assert_same_tree(
        &registry.snapshot(),
        &ws.snapshot(),
        "`edit --runtime=registry`",
    );
    ws.run(&["edit", "--runtime=vendored"]).success();
    assert_same_tree(&vendored, &ws.snapshot(), "`edit --runtime=vendored`");
    // Asking for the form the project has changes nothing.
    let before = ws.snapshot();
    ws.run(&["edit", "--runtime=vendored"]).success();
    assert_same_tree(&before, &ws.snapshot(), "`edit --runtime=vendored` again");
}

#[test]
fn a_manifest_an_older_scaffold_wrote_still_gets_the_new_entry() {
    let ws = project(&[]);
    // The comment above the entry, as an older rsbuilder wrote it.
    let manifest = ws.read("Cargo.toml");
    let comment_start = manifest.find("# The manager, leader election").unwrap();
    let entry = manifest.find("rsbuilder-runtime = ").unwrap();
    let older = format!(
        "{}# rsbuilder's runtime: replaced by `rsbuilder upgrade`.\n{}",
        &manifest[..comment_start],
        &manifest[entry..]
    );
    ws.write("Cargo.toml", &older);
    ws.run(&["edit", "--runtime=registry"]).success();
    let manifest = ws.read("Cargo.toml");
    assert_eq!(
        manifest,
        older.replace(
            "rsbuilder-runtime = { path = \"runtime\" }",
            "rsbuilder-runtime = \"=0.1.0\""
        )
    );
}

#[test]
fn bad_forms_are_refused_and_write_nothing() {
    let ws = Workspace::new("otp-operator");
    for (form, error, help) in [
        (
            "--runtime=crates",
            "`crates` is not a form of the runtime crate",
            "pass --runtime=`vendored`, `registry`, `path:DIR` or `git:URL[#REV]`",
        ),
        (
            "--runtime=path:missing",
            "`missing` holds no Cargo.toml",
            "pass --runtime=path:DIR with DIR the `runtime/` folder",
        ),
        (
            "--runtime=git:github.com/rsbuilder/rsbuilder",
            "`github.com/rsbuilder/rsbuilder` is not a git URL",
            "pass --runtime=git:https://",
        ),
    ] {
        assert_refused(&ws, &["init", "--domain", "learn.com", form], error, help);
        assert!(ws.snapshot().is_empty(), "{form}");
    }
    // A path that holds another crate, or the runtime at a version this rsbuilder does not
    // write.
    ws.write(
        "other/Cargo.toml",
        "[package]\nname = \"kube\"\nversion = \"0.1.0\"\n",
    );
    assert_refused(
        &ws,
        &["init", "--domain", "learn.com", "--runtime=path:other"],
        "`other` holds the crate `kube`, not rsbuilder-runtime",
        "pass --runtime=path:DIR",
    );
    ws.write(
        "other/Cargo.toml",
        "[package]\nname = \"rsbuilder-runtime\"\nversion = \"0.2.0\"\n",
    );
    assert_refused(
        &ws,
        &["init", "--domain", "learn.com", "--runtime=path:other"],
        "`other` holds rsbuilder-runtime 0.2.0, and this rsbuilder writes projects for 0.1.0",
        "check out the runtime at 0.1.0",
    );
}

#[test]
fn edit_refuses_to_drop_an_edited_runtime_unless_forced() {
    let ws = project(&[]);
    let leader = ws.read("runtime/src/leader.rs");
    ws.write("runtime/src/leader.rs", &format!("{leader}// mine\n"));
    assert_refused(
        &ws,
        &["edit", "--runtime=registry"],
        "the runtime was changed since rsbuilder wrote it: `runtime/src/leader.rs` does not match PROJECT's checksum, and `--runtime=registry` removes runtime/",
        "move your changes out of runtime/ (into operator/), or pass --force to remove them",
    );
    let err = stderr(&ws.run(&["edit", "--runtime=registry", "--force"]).success());
    assert!(err.contains("--force removes them"), "{err}");
    assert!(!ws.root().join("runtime").exists());
}

#[test]
fn edit_refuses_a_form_for_a_runtime_of_another_version() {
    let ws = project(&["--runtime=registry"]);
    let older = ws.read("PROJECT").replace(
        &format!("runtimeVersion: {VERSION}"),
        "runtimeVersion: 0.0.9",
    );
    ws.write("PROJECT", &older);
    assert_refused(
        &ws,
        &["edit", "--runtime=vendored"],
        "the project's runtime is rsbuilder-runtime 0.0.9, and this rsbuilder writes 0.1.0",
        "run `rsbuilder upgrade` first",
    );
    assert_refused(
        &ws,
        &["edit", "--runtime=vendor"],
        "`vendor` is not a form of the runtime crate",
        "pass --runtime=",
    );
}

#[test]
fn upgrade_moves_a_registry_pin_to_this_version() {
    let ws = project(&["--runtime=registry"]);
    let fresh = ws.snapshot();
    ws.write(
        "PROJECT",
        &ws.read("PROJECT").replace(
            &format!("runtimeVersion: {VERSION}"),
            "runtimeVersion: 0.0.9",
        ),
    );
    ws.write(
        "Cargo.toml",
        &ws.read("Cargo.toml").replace(
            &format!("rsbuilder-runtime = \"={VERSION}\""),
            "rsbuilder-runtime = \"=0.0.9\"",
        ),
    );
    let err = stderr(&ws.run(&["upgrade"]).success());
    assert!(
        err.contains("upgraded the runtime from rsbuilder-runtime 0.0.9 to 0.1.0"),
        "{err}"
    );
    assert_same_tree(&fresh, &ws.snapshot(), "`upgrade` of a registry project");
    let err = stderr(&ws.run(&["upgrade"]).success());
    assert!(err.contains("the runtime is up to date"), "{err}");
}

#[test]
fn a_runtime_folder_that_is_not_rsbuilders_copy_is_never_removed_or_overwritten() {
    let ws = Workspace::new("otp-operator");
    // The user's checkout of the runtime, inside the project, named by a relative path.
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime/Cargo.toml");
    ws.write(
        "runtime/Cargo.toml",
        &std::fs::read_to_string(runtime).unwrap(),
    );
    ws.write("runtime/NOTES.md", "mine\n");
    ws.run(&["init", "--domain", "learn.com", "--runtime=path:runtime"])
        .success();
    assert_eq!(
        dependency(&ws),
        "rsbuilder-runtime = { path = \"runtime\" }"
    );
    ws.run(&["edit", "--runtime=registry"]).success();
    assert_eq!(ws.read("runtime/NOTES.md"), "mine\n");
    assert_refused(
        &ws,
        &["edit", "--runtime=vendored"],
        "`runtime/` holds files, and `--runtime=vendored` writes the runtime there",
        "move those files elsewhere, or pass --force",
    );
}

#[test]
fn a_scope_and_a_form_changed_at_once_keep_the_runtimes_rules() {
    let ws = project(&[]);
    ws.run(&["edit", "--namespaced", "--runtime=registry"])
        .success();
    let expected = project(&["--namespaced", "--runtime=registry"]);
    assert_same_tree(
        &expected.snapshot(),
        &ws.snapshot(),
        "`edit --namespaced --runtime=registry`",
    );
    assert!(ws.read("config/rbac/role.yaml").contains("events.k8s.io"));
}

#[test]
fn alpha_generate_checks_a_relative_runtime_path_from_the_project() {
    let ws = Workspace::new("otp-operator");
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime/Cargo.toml");
    let manifest = std::fs::read_to_string(runtime).unwrap();
    std::fs::create_dir_all(ws.root().join("../rt")).unwrap();
    std::fs::write(ws.root().join("../rt/Cargo.toml"), manifest).unwrap();
    ws.run(&["init", "--domain", "learn.com", "--runtime=path:../rt"])
        .success();
    // Scaffolded again one folder deeper, where `../rt` is another folder.
    ws.run(&["alpha", "generate", "--output-dir", "../deeper/again"])
        .success();
    let again = std::fs::read_to_string(ws.root().join("../deeper/again/Cargo.toml")).unwrap();
    assert!(
        again.contains("rsbuilder-runtime = { path = \"../rt\" }\n"),
        "{again}"
    );
}
