//! `rsbuilder init`: what it writes, and how it refuses bad input without changing anything.

use crate::support::{Workspace, assert_refused, rsbuilder, snapshot, stderr};

/// Runs a failing `init` and checks its message, its exit code and that the tree is untouched.
#[track_caller]
fn refuses(ws: &Workspace, args: &[&str], error: &str, help: &str) {
    assert_refused(ws, args, error, help);
}

#[test]
fn init_writes_the_project_and_says_what_it_did() {
    let ws = Workspace::new("otp-operator");
    let assert = ws.run(&["init", "--domain", "learn.com"]).success();
    let err = stderr(&assert);
    for line in [
        "created Cargo.toml",
        "created operator/src/main.rs",
        "created config/rbac/role.yaml",
        "created PROJECT",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    assert!(err.contains("Next, define a resource with:\n  rsbuilder create api --group <group> --version v1 --kind <Kind>\n"), "{err}");
    let last_file = err.lines().rfind(|l| l.starts_with("created "));
    assert_eq!(
        last_file,
        Some("created PROJECT"),
        "PROJECT is written last"
    );
    let project = ws.read("PROJECT");
    assert!(
        project.contains("projectName: otp-operator\n") && project.contains("domain: learn.com\n"),
        "{project}"
    );
    assert!(
        ws.read("operator/Cargo.toml")
            .contains("name = \"otp-operator\"")
    );
    assert!(
        ws.read("api/Cargo.toml")
            .contains("name = \"otp-operator-api\"")
    );
}

#[test]
fn init_writes_no_path_time_zone_or_host() {
    // Two projects in folders at different depths, under different time zones and locales:
    // the same bytes, and none of what differs between machines.
    let a = Workspace::new("otp-operator");
    let b = Workspace::new("otp-operator");
    std::fs::create_dir_all(b.root().join("deeper/otp-operator")).unwrap();
    let b_root = b.root().join("deeper/otp-operator");
    let run = |dir: &std::path::Path, tz: &str, lang: &str| {
        assert_cmd::Command::cargo_bin("rsbuilder")
            .unwrap()
            .current_dir(dir)
            .env("TZ", tz)
            .env("LANG", lang)
            .env("HOME", dir)
            .args(["init", "--domain", "learn.com"])
            .assert()
            .success();
    };
    run(a.root(), "UTC", "C");
    run(&b_root, "Asia/Tokyo", "de_DE.UTF-8");
    let first = a.snapshot();
    assert!(first.len() > 30);
    assert_eq!(first, snapshot(&b_root));
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let forbidden = [a.root().display().to_string(), hostname.trim().to_owned()];
    for (path, bytes) in &first {
        let text = String::from_utf8_lossy(bytes);
        for word in forbidden.iter().filter(|w| w.len() > 3) {
            assert!(
                !text.contains(word.as_str()),
                "{} holds `{word}`",
                path.display()
            );
        }
    }
}

#[test]
fn a_dry_run_lists_the_files_and_writes_nothing() {
    let ws = Workspace::new("otp-operator");
    ws.write("README.md", "# mine\n");
    let before = ws.snapshot();
    let assert = ws
        .run(&["init", "--domain", "learn.com", "--dry-run"])
        .success();
    let out = crate::support::stdout(&assert);
    assert!(out.contains("would create Cargo.toml\n"), "{out}");
    assert!(out.contains("would keep README.md\n"), "{out}");
    assert!(out.contains("would create PROJECT\n"), "{out}");
    assert!(!stderr(&assert).contains("would "));
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn files_users_bring_are_kept() {
    let ws = Workspace::new("otp-operator");
    ws.write("README.md", "# mine\n");
    ws.write(".gitignore", "/mine\n");
    ws.write("LICENSE", "mine\n");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    let assert = ws.run(&["init", "--domain", "learn.com"]).success();
    let err = stderr(&assert);
    assert!(
        err.contains("kept README.md\n") && err.contains("kept .gitignore\n"),
        "{err}"
    );
    assert_eq!(ws.read("README.md"), "# mine\n");
    assert_eq!(ws.read(".gitignore"), "/mine\n");
    assert_eq!(ws.read("LICENSE"), "mine\n");
}

#[test]
fn bad_domains_are_refused() {
    let ws = Workspace::new("otp-operator");
    refuses(
        &ws,
        &["init", "--domain", "Learn.COM"],
        "invalid domain `Learn.COM`: must be a lowercase RFC 1123 subdomain",
        "pass `--domain learn.com`",
    );
    refuses(
        &ws,
        &["init", "--domain", "learn_com"],
        "invalid domain `learn_com`",
        "pass `--domain learn-com`",
    );
}

#[test]
fn bad_project_names_are_refused() {
    let ws = Workspace::new("otp-operator");
    refuses(
        &ws,
        &[
            "init",
            "--domain",
            "learn.com",
            "--project-name",
            "My_Operator",
        ],
        "invalid project name `My_Operator`: must be a lowercase RFC 1123 label",
        "pass `--project-name my-operator`",
    );
    refuses(
        &ws,
        &["init", "--project-name", "2fast"],
        "invalid project name `2fast`: must start with a letter",
        "pass `--project-name fast`",
    );
    refuses(
        &ws,
        &["init", "--project-name", "test"],
        "invalid project name `test`: is reserved",
        "pass `--project-name my-operator`",
    );

    let ws = Workspace::new("My_Operator");
    refuses(
        &ws,
        &["init", "--domain", "learn.com"],
        "invalid project name (from the directory name) `my_operator`",
        "pass `--project-name my-operator`",
    );
    ws.run(&["init", "--project-name", "my-operator"]).success();
    assert!(ws.read("PROJECT").contains("projectName: my-operator\n"));
}

#[test]
fn an_existing_project_is_refused() {
    for existing in ["Makefile", "operator/src/main.rs"] {
        let ws = Workspace::new("otp-operator");
        ws.write(existing, "mine\n");
        let found = existing.split('/').next().unwrap();
        refuses(
            &ws,
            &["init", "--domain", "learn.com"],
            &format!(
                "the current directory holds files that rsbuilder would overwrite: found `{found}`"
            ),
            "run `rsbuilder init` in a new directory, or pass --force",
        );
    }
}

#[test]
fn a_cargo_project_is_told_from_an_rsbuilder_project_and_force_keeps_the_users_files() {
    let ws = Workspace::new("otp-operator");
    ws.write("Cargo.toml", "[package]\nname = \"mine\"\n");
    ws.write("README.md", "# Mine\n");
    ws.write(".gitignore", "/mine\n");
    refuses(
        &ws,
        &["init", "--domain", "learn.com"],
        "the current directory holds a Cargo project that rsbuilder did not scaffold: found `Cargo.toml`",
        "run `rsbuilder init` in a new directory; --force would replace that Cargo.toml",
    );
    let assert = ws
        .run(&["init", "--domain", "learn.com", "--force"])
        .success();
    let err = stderr(&assert);
    assert!(err.contains("kept README.md\n"), "{err}");
    assert!(err.contains("kept .gitignore\n"), "{err}");
    assert_eq!(ws.read("README.md"), "# Mine\n");
    assert_eq!(ws.read(".gitignore"), "/mine\n");
    // A second --force keeps them too.
    ws.run(&["init", "--domain", "learn.com", "--force"])
        .success();
    assert_eq!(ws.read("README.md"), "# Mine\n");
}

/// `init --force` keeps PROJECT's plugin records, whose files it leaves in place.
#[test]
fn init_force_keeps_the_plugins_records() {
    let ws = Workspace::new("otp-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    ws.run(&["edit", "--plugins=grafana/v1-alpha,autoupdate/v1-alpha"])
        .success();
    let project = ws.read("PROJECT");
    assert!(
        project.contains("grafana.kubebuilder.io/v1-alpha"),
        "{project}"
    );
    ws.run(&["init", "--domain", "learn.com", "--force"])
        .success();
    assert_eq!(ws.read("PROJECT"), project);
}

/// A kubebuilder project is told from an rsbuilder one: its PROJECT has another layout.
#[test]
fn a_kubebuilder_project_is_not_called_an_rsbuilder_project() {
    let ws = Workspace::new("otp-operator");
    ws.write(
        "PROJECT",
        "domain: learn.com\nlayout:\n- go.kubebuilder.io/v4\nprojectName: otp\nversion: \"3\"\n",
    );
    refuses(
        &ws,
        &["init", "--domain", "learn.com"],
        "the current directory is a project of another tool: its `PROJECT` has the layout `go.kubebuilder.io/v4`",
        "run `rsbuilder init` in a new directory; `rsbuilder create api` there for each kind of this one",
    );
}

#[test]
fn init_twice_is_refused_and_force_scaffolds_again() {
    let ws = Workspace::new("otp-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    let first = ws.snapshot();
    refuses(
        &ws,
        &["init", "--domain", "learn.com"],
        "the current directory is already an rsbuilder project: found `PROJECT`",
        "add APIs with `rsbuilder create api`, or pass --force",
    );

    ws.write("operator/src/main.rs", "// edited\n");
    let assert = ws
        .run(&["init", "--domain", "learn.com", "--force"])
        .success();
    let err = stderr(&assert);
    assert!(err.contains("overwrote operator/src/main.rs\n"), "{err}");
    assert!(err.contains("unchanged Cargo.toml\n"), "{err}");
    assert_eq!(ws.snapshot(), first);
}

#[test]
fn other_existing_files_are_conflicts() {
    let ws = Workspace::new("otp-operator");
    ws.write("config/rbac/role.yaml", "# mine\n");
    refuses(
        &ws,
        &["init", "--domain", "learn.com"],
        "`config/rbac/role.yaml` already exists and would be overwritten",
        "pass --force to overwrite it\n",
    );
}

#[test]
fn a_tree_that_cannot_be_written_is_left_as_it_was() {
    // `config` is a file, so nothing can be written below it; the files written before it
    // (Cargo.toml, api/, ...) must be taken back.
    let ws = Workspace::new("otp-operator");
    ws.write("config", "not a directory\n");
    let before = ws.snapshot();
    let assert = ws
        .run(&["init", "--domain", "learn.com", "--force"])
        .code(1);
    let err = stderr(&assert);
    assert!(
        err.contains("error: failed to write `config/") && err.contains("; nothing was changed: "),
        "{err}"
    );
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn a_read_only_directory_is_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new("otp-operator");
    let mut permissions = std::fs::metadata(ws.root()).unwrap().permissions();
    permissions.set_mode(0o555);
    std::fs::set_permissions(ws.root(), permissions.clone()).unwrap();
    let assert = if std::fs::write(ws.root().join("probe"), "").is_ok() {
        // Root writes anywhere: run rsbuilder as `nobody`, for whom the directory is read-only.
        std::fs::remove_file(ws.root().join("probe")).unwrap();
        let parent = ws.root().parent().unwrap();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_cmd::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(assert_cmd::cargo::cargo_bin("rsbuilder"))
            .args(["init", "--domain", "learn.com"])
            .current_dir(ws.root())
            .assert()
            .code(1)
    } else {
        ws.run(&["init", "--domain", "learn.com"]).code(1)
    };
    assert!(
        stderr(&assert).contains("nothing was changed"),
        "{}",
        stderr(&assert)
    );
    permissions.set_mode(0o755);
    std::fs::set_permissions(ws.root(), permissions).unwrap();
    assert!(snapshot(ws.root()).is_empty());
}

#[test]
fn init_works_from_any_directory_name_given_a_project_name() {
    let ws = Workspace::new("Some Dir");
    rsbuilder(ws.root(), &["init", "--project-name", "otp-operator"]).success();
    assert!(ws.read("PROJECT").contains("domain: my.domain\n"));
}

#[test]
fn text_that_would_break_the_manifests_is_refused() {
    let ws = Workspace::new("otp-operator");
    refuses(
        &ws,
        &["init", "--owner", "say \"hi\""],
        "invalid --owner `say \"hi\"`: must not be blank, nor hold quotes",
        "pass `--owner \"The otp-operator Authors\"`",
    );
    refuses(
        &ws,
        &["init", "--repo", " "],
        "invalid --repo ` `",
        "pass `--repo https://github.com/<owner>/<project>`",
    );
}

#[test]
fn force_is_refused_where_apis_exist() {
    let ws = Workspace::new("otp-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
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
    refuses(
        &ws,
        &["init", "--domain", "learn.com", "--force"],
        "the project already has 1 API (AppOTP first): `init --force` would unwire it",
        "run `rsbuilder init` in a new directory",
    );
}

#[test]
fn kubebuilder_init_flags_are_accepted_and_unknown_plugins_refused() {
    let ws = Workspace::new("otp-operator");
    refuses(
        &ws,
        &["init", "--domain", "learn.com", "--plugins=helm/v1-alpha"],
        "unknown plugin `helm/v1-alpha` for init",
        "drop it from --plugins; rsbuilder knows go/v4 and kustomize/v2",
    );
    ws.run(&[
        "init",
        "--domain",
        "learn.com",
        "--plugins=go/v4,kustomize/v2",
        "--multigroup",
    ])
    .success();
    assert!(ws.read("PROJECT").contains("domain: learn.com\n"));
}

#[test]
fn init_inside_a_project_is_refused_even_with_force() {
    let ws = Workspace::new("outer-operator");
    ws.run(&["init", "--domain", "example.com"]).success();
    let before = ws.snapshot();
    for args in [
        &["init", "--domain", "example.com"][..],
        &["init", "--domain", "example.com", "--force"][..],
    ] {
        let assert = crate::support::rsbuilder(&ws.root().join("operator"), args).code(1);
        let err = stderr(&assert);
        assert!(
            err.contains("error: the current directory is inside the rsbuilder project at `")
                && err.contains("a project in it would break its Cargo workspace"),
            "{err}"
        );
        assert!(
            err.contains("help: run `rsbuilder init` outside `"),
            "{err}"
        );
        assert_eq!(ws.snapshot(), before, "{args:?} changed the tree");
    }
}
