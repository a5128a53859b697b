//! `rsbuilder alpha generate`: a project scaffolded again from its PROJECT file, into a new
//! directory or in place, is byte for byte what its own commands made.

use std::path::{Path, PathBuf};

use crate::support::{Workspace, assert_refused, assert_same_tree, rsbuilder, snapshot, stderr};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// A copy of the golden project `name`, as a user's project.
fn copy(name: &str) -> Workspace {
    let ws = Workspace::new(name);
    for entry in walkdir::WalkDir::new(testdata().join(name)) {
        let entry = entry.unwrap();
        let relative = entry.path().strip_prefix(testdata().join(name)).unwrap();
        let target = ws.root().join(relative);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
    ws
}

fn golden_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testdata())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_golden_project_is_scaffolded_again_byte_for_byte_from_its_project_file() {
    let names = golden_names();
    assert!(names.len() >= 7, "{names:?}");
    for name in names {
        let ws = copy(&name);
        let before = ws.snapshot();
        let out = ws.root().parent().unwrap().join("again");
        let assert = ws
            .run(&["alpha", "generate", "--output-dir", out.to_str().unwrap()])
            .success();
        assert!(
            stderr(&assert).contains("rsbuilder init --domain "),
            "{name}: {}",
            stderr(&assert)
        );
        assert_same_tree(
            &before,
            &ws.snapshot(),
            &format!("{name}: the project read"),
        );
        let golden = snapshot(&testdata().join(&name));
        let again = snapshot(&out);
        // What the user wrote by hand is not in PROJECT; all else is scaffolded again.
        let edited = crate::golden::edited_files(&name);
        for path in &edited {
            assert!(
                golden.contains_key(path) && again.contains_key(path),
                "{name}: {} is not in both trees",
                path.display()
            );
        }
        let differ: std::collections::BTreeSet<_> = golden
            .keys()
            .chain(again.keys())
            .filter(|path| golden.get(*path) != again.get(*path))
            .filter(|path| !edited.contains(path))
            .collect();
        assert!(differ.is_empty(), "{name}: these differ: {differ:?}");
    }
}

/// The metrics a user lists for Grafana are the user's: `alpha generate` carries the
/// configuration over and charts it, as kubebuilder's does.
#[test]
fn the_grafana_configuration_is_carried_over_and_charted() {
    let ws = copy("project-v4-with-plugins");
    let config = ws.read("grafana/custom-metrics/config.yaml")
        + "- metric: shop_orders_total\n  type: counter\n";
    ws.write("grafana/custom-metrics/config.yaml", &config);
    ws.run(&["edit", "--plugins=grafana/v1-alpha"]).success();
    let dashboard = ws.read("grafana/custom-metrics/custom-metrics-dashboard.json");
    let out = ws.root().parent().unwrap().join("again");
    ws.run(&["alpha", "generate", "--output-dir", out.to_str().unwrap()])
        .success();
    let read = |path: &str| std::fs::read_to_string(out.join(path)).unwrap();
    assert_eq!(read("grafana/custom-metrics/config.yaml"), config);
    assert_eq!(
        read("grafana/custom-metrics/custom-metrics-dashboard.json"),
        dashboard
    );
}

#[test]
fn dry_run_prints_the_commands_and_writes_nothing() {
    let ws = copy("project-deploy-image");
    let before = ws.snapshot();
    let assert = ws.run(&["alpha", "generate", "--dry-run"]).success();
    assert_same_tree(&before, &ws.snapshot(), "--dry-run");
    assert_eq!(
        stderr(&assert),
        "",
        "the commands are the output, on stdout"
    );
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "rsbuilder init --domain learn.com --project-name memcached-operator --runtime=registry",
            "rsbuilder create api --group example.com --version v1alpha1 --kind Memcached --resource --controller=true --image memcached:1.6.26-alpine3.19 --image-container-command=memcached,--memory-limit=64,-o,modern,-v --image-container-port=11211 --run-as-user=1001",
            "rsbuilder create api --group appotp --version v1 --kind AppOTP --resource --controller=true --image memcached:1.6.26-alpine3.19 --image-container-port=11211 --run-as-user=1001",
        ]
    );
    assert!(
        lines.contains(&"rsbuilder create api --group web --version v1 --kind Proxy --resource --controller=true --image registry.example.com:5000/team_a/proxy.x:v1.2_rc-3 '--image-container-command=sh,-c,echo \"héllo \\ wörld\" $HOME 🦀' --image-container-port=8080"),
        "{lines:#?}"
    );
    // Kubernetes' Pod's webhook was added before the Deployment's, as webhooks/mod.rs shows.
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "rsbuilder create webhook --group core --version v1 --kind Pod --programmatic-validation",
            "rsbuilder create webhook --group apps --version v1 --kind Deployment --defaulting --programmatic-validation",
        ]
    );

    // Without the workspace Cargo.toml: init's own owner and license, and a warning.
    std::fs::remove_file(ws.root().join("Cargo.toml")).unwrap();
    let assert = ws.run(&["alpha", "generate", "--dry-run"]).success();
    assert_eq!(
        stderr(&assert),
        "warning: the workspace Cargo.toml is missing: the project is scaffolded with init's owner and license\n"
    );
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert_eq!(
        out.lines().next(),
        Some(
            "rsbuilder init --domain learn.com --project-name memcached-operator --runtime=registry"
        )
    );
}

#[test]
fn in_place_needs_force_and_keeps_git() {
    let ws = copy("project-webhooks");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    ws.write("operator/src/extra.rs", "// the user's\n");
    let edited = ws
        .read("Makefile")
        .replace("IMG ?= controller:latest", "IMG ?= mine:1");
    ws.write("Makefile", &edited);
    let before = ws.snapshot();

    let refused = ws.run(&["alpha", "generate"]).failure().code(1);
    let err = stderr(&refused);
    assert!(
        err.starts_with(&format!(
            "error: alpha generate without --output-dir replaces every file of {} but .git\nhelp: pass --output-dir <dir> for a new tree, or --force to replace the project's files (commit them first)\n",
            ws.root().display()
        )),
        "{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), "without --force");

    ws.run(&["alpha", "generate", "--force"]).success();
    let mut golden = snapshot(&testdata().join("project-webhooks"));
    golden.insert(PathBuf::from(".git"), Vec::new());
    golden.insert(
        PathBuf::from(".git/HEAD"),
        b"ref: refs/heads/main\n".to_vec(),
    );
    let now = ws.snapshot();
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        golden.keys().collect::<Vec<_>>()
    );
    assert!(now == golden, "the tree is the golden project and .git");
    let siblings: Vec<_> = std::fs::read_dir(ws.root().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(siblings, ["project-webhooks"], "nothing is left beside it");
}

/// A project folder that is a mount point (a devcontainer's, a Codespace's): the swap stages
/// inside the project, so no rename crosses file systems. The mount is a tmpfs in a user and
/// mount namespace of its own (`unshare`); where those cannot be made, the test says so and
/// checks nothing.
#[test]
fn in_place_works_in_a_project_folder_that_is_a_mount_point() {
    let ws = copy("project-webhooks");
    ws.write("operator/src/extra.rs", "// the user's\n");
    let parent = tempfile::tempdir().unwrap();
    let (mounted, out) = (
        parent.path().join("project-webhooks"),
        parent.path().join("out"),
    );
    std::fs::create_dir(&mounted).unwrap();
    std::fs::create_dir(&out).unwrap();
    let script = r#"set -e
mount -t tmpfs tmpfs "$1"
cp -a "$2/." "$1/"
cd "$1"
"$4" alpha generate --force
cp -a "$1/." "$3/"
"#;
    let probe = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg("mount -t tmpfs tmpfs \"$1\"")
        .arg("sh")
        .arg(&out)
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("skipped: unshare cannot make a user and mount namespace here to mount a tmpfs");
        return;
    }
    let run = std::process::Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&mounted)
        .arg(ws.root())
        .arg(&out)
        .arg(env!("CARGO_BIN_EXE_rsbuilder"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        snapshot(&out) == snapshot(&testdata().join("project-webhooks")),
        "the mounted project is the golden one again: {}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// The webhooks of a kind added in any order (conversion before defaulting, another kind's in
/// between) give the same files as alpha generate's replay: each kind of fragment has its own
/// marker in the kind's module and in config/default, so `alpha generate` makes the project
/// again byte for byte, and `alpha update` sees no change the user did not make.
#[test]
fn webhooks_added_in_any_order_are_scaffolded_again_byte_for_byte() {
    let validation = "--programmatic-validation";
    let webhook = |kind: &str, flags: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "create",
            "webhook",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            kind,
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(flags.iter().map(|f| f.to_string()));
        args
    };
    let orders = [
        vec![
            webhook("Frigate", &["--conversion", "--spoke", "v2"]),
            webhook("Frigate", &["--defaulting"]),
            webhook("Destroyer", &[validation]),
            webhook("Frigate", &[validation]),
        ],
        vec![
            webhook("Destroyer", &[validation]),
            webhook("Frigate", &[validation]),
            webhook("Frigate", &["--conversion", "--spoke", "v2"]),
            webhook("Frigate", &["--defaulting"]),
        ],
    ];
    let mut trees = Vec::new();
    for order in orders {
        let ws = Workspace::new("fleet");
        ws.run(&["init", "--domain", "example.com"]).success();
        for (kind, version, controller) in [
            ("Frigate", "v1", "--controller=true"),
            ("Frigate", "v2", "--controller=false"),
            ("Destroyer", "v1", "--controller=true"),
        ] {
            ws.run(&[
                "create",
                "api",
                "--group",
                "ship",
                "--version",
                version,
                "--kind",
                kind,
                "--resource",
                controller,
            ])
            .success();
        }
        for args in &order {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ws.run(&args).success();
        }
        let again = tempfile::tempdir().unwrap();
        let out = again.path().join("fleet");
        ws.run(&["alpha", "generate", "--output-dir", out.to_str().unwrap()])
            .success();
        assert_same_tree(&ws.snapshot(), &snapshot(&out), "alpha generate's replay");
        trees.push(ws.snapshot());
    }
    // The kinds' modules are listed in the order they came; all else is the same.
    let modules = |tree: &std::collections::BTreeMap<PathBuf, Vec<u8>>| {
        let mut tree = tree.clone();
        tree.remove(Path::new("operator/src/webhooks/mod.rs"));
        tree.remove(Path::new("operator/src/webhooks/ship/v1/mod.rs"));
        tree
    };
    assert_same_tree(&modules(&trees[0]), &modules(&trees[1]), "the other order");
}

#[test]
fn what_cannot_be_scaffolded_again_is_refused_before_anything_is_written() {
    let ws = copy("project-v1");
    let out = ws.root().parent().unwrap().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "mine").unwrap();
    let err = stderr(
        &ws.run(&["alpha", "generate", "--output-dir", out.to_str().unwrap()])
            .failure()
            .code(1),
    );
    assert_eq!(
        err,
        format!(
            "error: --output-dir {}: the directory is not empty\nhelp: pass a new or empty directory\n",
            out.display()
        )
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);

    // A directory inside the project, new or not, relative or not: nothing is made.
    for inside in ["again", "config/../again", "operator/src/again"] {
        let before = ws.snapshot();
        assert_refused(
            &ws,
            &["alpha", "generate", "--output-dir", inside],
            &format!(
                "--output-dir {}/{inside}: the directory is inside the project",
                ws.root().display()
            ),
            "pass a directory outside the project",
        );
        assert_same_tree(&before, &ws.snapshot(), inside);
    }

    // A kind of another domain (an external API): nothing is made.
    let project = ws.read("PROJECT").replacen(
        "  domain: learn.com\n  group: fleet\n",
        "  domain: other.io\n  group: fleet\n",
        1,
    );
    ws.write("PROJECT", &project);
    let fresh = ws.root().parent().unwrap().join("fresh");
    let err = stderr(
        &rsbuilder(
            ws.root(),
            &["alpha", "generate", "--output-dir", fresh.to_str().unwrap()],
        )
        .failure()
        .code(1),
    );
    assert!(
        err.starts_with("error: PROJECT has fleet.other.io/"),
        "{err}"
    );
    assert!(!fresh.exists());
}

/// PROJECT's records are checked when it is read: a chart recorded from a file outside the
/// project, or a `cliVersion` that is more than a version, is refused before anything is read,
/// copied or installed, and the file outside is left as it was.
#[test]
fn records_that_reach_outside_the_project_are_refused_and_touch_nothing() {
    let ws = copy("project-v4-with-plugins");
    let outside = ws.root().parent().unwrap().join("install.yaml");
    std::fs::write(&outside, "kind: List\n").unwrap();
    let project = ws.read("PROJECT");
    ws.write(
        "PROJECT",
        &project.replace("manifests: dist/install.yaml", "manifests: ../install.yaml"),
    );
    let again = ws.root().parent().unwrap().join("p-again");
    let err = stderr(
        &ws.run(&["alpha", "generate", "--output-dir", "../p-again"])
            .failure()
            .code(1),
    );
    assert!(
        err.starts_with(
            "error: PROJECT is not valid: the helm.kubebuilder.io/v2-alpha plugin's `manifests:` \
             `../install.yaml`: must be a path inside the project"
        ),
        "{err}"
    );
    assert!(
        err.contains("\nhelp: correct the value in PROJECT"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "kind: List\n");
    assert!(!again.exists());

    ws.write(
        "PROJECT",
        &project.replace("cliVersion: 0.1.0", "cliVersion: 0.0.9 --path ../elsewhere"),
    );
    let before = ws.snapshot();
    let err = stderr(&ws.run(&["alpha", "update"]).failure().code(1));
    assert!(
        err.starts_with("error: PROJECT is not valid: cliVersion `0.0.9 --path ../elsewhere`"),
        "{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), "alpha update");
}

/// `alpha generate --force` takes the project's lock before it reads PROJECT: a command that
/// holds the lock (here, the test, which adds a kind meanwhile, as `create api` at its prompt
/// would) finishes first, and its kind is scaffolded again, not deleted.
#[test]
fn alpha_generate_reads_the_project_only_once_it_holds_the_lock() {
    use std::io::Read as _;
    let ws = copy("project-webhooks");
    ws.write(".git/HEAD", "ref: refs/heads/main\n");
    let with_bar = copy("project-webhooks");
    with_bar
        .run(&[
            "create",
            "api",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Bar",
        ])
        .success();
    let lock = std::fs::File::open(ws.root()).unwrap();
    lock.lock().unwrap();
    let mut generating = std::process::Command::new(env!("CARGO_BIN_EXE_rsbuilder"))
        .args(["alpha", "generate", "--force"])
        .current_dir(ws.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = generating.stderr.take().unwrap();
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&said).contains("waiting for another rsbuilder command") {
        assert_eq!(
            stderr_pipe.read(&mut byte).unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&said)
        );
        said.push(byte[0]);
    }
    // It names the process that holds the lock (here, the test), and the way out of a prompt.
    while !said.ends_with(b"\n") {
        assert_eq!(stderr_pipe.read(&mut byte).unwrap(), 1);
        said.push(byte[0]);
    }
    let waiting = String::from_utf8_lossy(&said).into_owned();
    assert!(
        waiting.contains(&format!(": process {} (`", std::process::id()))
            && waiting.contains("if it asks a question, answer it in its terminal"),
        "{waiting}"
    );
    // The other command's writes, while it holds the lock.
    for (path, contents) in with_bar.snapshot() {
        let target = ws.root().join(&path);
        if with_bar.root().join(&path).is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::write(&target, contents).unwrap();
        }
    }
    lock.unlock().unwrap();
    let mut rest = String::new();
    stderr_pipe.read_to_string(&mut rest).unwrap();
    assert!(generating.wait().unwrap().success(), "{rest}");
    assert!(ws.read("PROJECT").contains("kind: Bar"), "{rest}");
    assert_eq!(
        ws.read("api/src/ship/v1/bar.rs"),
        with_bar.read("api/src/ship/v1/bar.rs"),
        "the kind added meanwhile is scaffolded again"
    );
}

/// `alpha generate --force` in a git work tree refuses to delete what git cannot bring back:
/// uncommitted changes, untracked and ignored files (but target/, which stays); the tree stays
/// as it was.
#[test]
fn alpha_generate_in_place_keeps_what_git_cannot_restore() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("RSBUILDER_REQUIRE_E2E_LOCAL").as_deref() != Ok("1"),
            "git is missing"
        );
        eprintln!("note: skipping: git is missing");
        return;
    }
    let ws = copy("project-webhooks");
    git(&ws, &["init", "--quiet"]);
    git(&ws, &["add", "--all"]);
    git(&ws, &["commit", "--quiet", "-m", "scaffold"]);
    let committed = ws.snapshot();
    ws.write("target/debug/build-output", "cargo's\n");
    ws.write(".env", "TOKEN=mine\n");
    ws.write("bin/tool", "downloaded\n");
    let makefile = ws.read("Makefile");
    ws.write("Makefile", &format!("{makefile}# mine\n"));
    let before = ws.snapshot();
    let err = stderr(&ws.run(&["alpha", "generate", "--force"]).failure().code(1));
    assert!(
        err.starts_with(
            "error: alpha generate --force would delete what git cannot bring back (3 entries that `git status --ignored` shows):\n M Makefile\n?? .env\n!! bin/\nhelp: commit them"
        ),
        "{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), "refused");

    ws.write("Makefile", &makefile);
    for gone in [".env", "bin"] {
        let path = ws.root().join(gone);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
    }
    ws.run(&["alpha", "generate", "--force"]).success();
    let mut now = ws.snapshot();
    now.retain(|path, _| !path.starts_with(".git"));
    // cargo's target/ stays, built.
    assert_eq!(ws.read("target/debug/build-output"), "cargo's\n");
    now.retain(|path, _| !path.starts_with("target"));
    let mut then = committed;
    then.retain(|path, _| !path.starts_with(".git"));
    assert!(now == then, "the project is scaffolded again as committed");
}

/// An "older rsbuilder" for `alpha update`: this one, then the differences of an older
/// scaffold: a Makefile line today's has not, and no `replacements` marker in config/default.
const OLDER: &str = r#"#!/usr/bin/env bash
set -e
"$RSBUILDER_REAL" "$@"
if [[ -f Makefile ]] && ! grep -q '^# an older scaffold$' Makefile; then
  sed -i '1i # an older scaffold' Makefile
fi
if [[ -f config/default/kustomization.yaml ]]; then
  sed -i '/^# +rsbuilder:scaffold:replacements$/d' config/default/kustomization.yaml
fi
"#;

pub fn git(ws: &Workspace, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(ws.root())
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A project the older rsbuilder made, committed, and its path; None without git.
pub fn older_project() -> Option<(Workspace, PathBuf)> {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("RSBUILDER_REQUIRE_E2E_LOCAL").as_deref() != Ok("1"),
            "git is missing"
        );
        eprintln!("note: skipping alpha update: git is missing");
        return None;
    }
    let ws = Workspace::new("otp-operator");
    let older = ws.root().parent().unwrap().join("older-rsbuilder");
    crate::support::write_executable(&older, OLDER);
    for args in [
        &["init", "--domain", "learn.com"][..],
        &[
            "create",
            "api",
            "--group",
            "appotp",
            "--version",
            "v1",
            "--kind",
            "AppOTP",
        ],
    ] {
        let status = std::process::Command::new(&older)
            .args(args)
            .current_dir(ws.root())
            .env("RSBUILDER_REAL", env!("CARGO_BIN_EXE_rsbuilder"))
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    assert!(ws.read("Makefile").starts_with("# an older scaffold\n"));
    git(&ws, &["init", "--quiet"]);
    git(&ws, &["add", "--all"]);
    git(&ws, &["commit", "--quiet", "-m", "scaffold"]);
    Some((ws, older))
}

fn update(ws: &Workspace, older: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    update_with(ws, older, extra, &[])
}

fn update_with(
    ws: &Workspace,
    older: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> assert_cmd::assert::Assert {
    let mut args = vec!["alpha", "update", "--from-binary", older.to_str().unwrap()];
    args.extend_from_slice(extra);
    assert_cmd::Command::cargo_bin("rsbuilder")
        .unwrap()
        .current_dir(ws.root())
        .envs(env.iter().copied())
        .env("RSBUILDER_REAL", env!("CARGO_BIN_EXE_rsbuilder"))
        .env(
            "CARGO_TARGET_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generated-projects"),
        )
        .args(&args)
        .write_stdin("")
        .assert()
}

/// The tree without `.git`, which git itself may touch (its index) when it only reads.
fn work_tree(ws: &Workspace) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut tree = ws.snapshot();
    tree.retain(|path, _| !path.starts_with(".git"));
    tree
}

#[test]
fn alpha_update_merges_on_a_branch_keeping_every_edit_and_the_new_scaffold() {
    let Some((ws, older)) = older_project() else {
        return;
    };
    let makefile = ws
        .read("Makefile")
        .replace("IMG ?= controller:latest", "IMG ?= mine:1");
    ws.write("Makefile", &makefile);
    ws.write("operator/src/mine.rs", "// the user's own\n");
    git(&ws, &["add", "--all"]);
    git(&ws, &["commit", "--quiet", "-m", "edits"]);

    // --dry-run lists the merge and writes nothing.
    let before = work_tree(&ws);
    let err = stderr(&update(&ws, &older, &["--dry-run"]).success());
    assert!(
        err.contains("\nupdate Makefile\nupdate config/default/kustomization.yaml\n"),
        "{err}"
    );
    assert_same_tree(&before, &work_tree(&ws), "--dry-run");

    let err = stderr(&update(&ws, &older, &[]).success());
    assert!(
        err.ends_with("\nThe update is committed on the branch `rsbuilder-update-from-0.1.0-to-0.1.0`: review it with `git show`, then merge it.\n"),
        "{err}"
    );
    assert_eq!(
        git(&ws, &["branch", "--show-current"]),
        "rsbuilder-update-from-0.1.0-to-0.1.0\n"
    );
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    let makefile = ws.read("Makefile");
    assert!(
        makefile
            .starts_with("# Image URL to use all building/pushing image targets\nIMG ?= mine:1\n"),
        "{makefile}"
    );
    assert!(
        ws.read("config/default/kustomization.yaml")
            .contains("\n# +rsbuilder:scaffold:replacements\n")
    );
    assert_eq!(ws.read("operator/src/mine.rs"), "// the user's own\n");
    assert_eq!(
        git(&ws, &["show", "--stat", "--format=%s", "HEAD"])
            .lines()
            .next(),
        Some("Update the scaffold from rsbuilder 0.1.0 to 0.1.0")
    );
    // A second update has nothing to merge: no branch, no commit.
    let head = git(&ws, &["rev-parse", "HEAD"]);
    let err = stderr(&update(&ws, &older, &[]).success());
    assert!(
        err.ends_with("\nthe project is what rsbuilder 0.1.0 scaffolds, with your changes\n"),
        "{err}"
    );
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
    // The marker that was missing is there: the webhook the old scaffold refused goes in.
    ws.run(&[
        "create",
        "webhook",
        "--group",
        "appotp",
        "--version",
        "v1",
        "--kind",
        "AppOTP",
        "--defaulting",
    ])
    .success();
}

#[test]
fn alpha_update_stops_on_a_conflict_writing_nothing_and_force_writes_the_markers() {
    let Some((ws, older)) = older_project() else {
        return;
    };
    let makefile = ws.read("Makefile").replacen(
        "# an older scaffold\n",
        "# an older scaffold, and mine\n",
        1,
    );
    ws.write("Makefile", &makefile);
    git(&ws, &["commit", "--quiet", "-am", "a conflicting edit"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    let before = work_tree(&ws);
    let err = stderr(&update(&ws, &older, &[]).failure().code(1));
    assert!(
        err.contains("error: the update from rsbuilder 0.1.0 to 0.1.0 conflicts with your changes in 1 file, and wrote nothing:\nMakefile: 1 place changed on both sides\n<<<<<<< your project\n# an older scaffold, and mine\n=======\n>>>>>>> rsbuilder 0.1.0 scaffold\n\nhelp: "),
        "{err}"
    );
    assert!(err.ends_with("help: change those places back to the old scaffold's text, or run `rsbuilder alpha update --force` to write the merge with conflict markers and resolve them by hand\n"), "{err}");
    assert_same_tree(&before, &work_tree(&ws), "a conflict");
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&ws, &["branch", "--list", "rsbuilder-update-*"]), "");

    let err = stderr(&update(&ws, &older, &["--force"]).success());
    assert!(err.contains("warning: the merge has conflicts"), "{err}");
    assert!(
        ws.read("Makefile")
            .starts_with("<<<<<<< your project\n# an older scaffold, and mine\n")
    );
    assert!(
        ws.read("config/default/kustomization.yaml")
            .contains("\n# +rsbuilder:scaffold:replacements\n")
    );
    assert_eq!(
        git(&ws, &["rev-parse", "HEAD"]),
        head,
        "--force commits nothing"
    );
}

/// An older rsbuilder that cannot be installed from `RSBUILDER_INSTALL`: an error naming the
/// source, with help, and nothing changed.
#[test]
fn alpha_update_that_cannot_install_the_older_rsbuilder_changes_nothing() {
    let Some((ws, _older)) = older_project() else {
        return;
    };
    let head = git(&ws, &["rev-parse", "HEAD"]);
    let before = work_tree(&ws);
    let missing = ws.root().parent().unwrap().join("no-checkout");
    let from = format!("--offline --path {}", missing.display());
    let assert = assert_cmd::Command::cargo_bin("rsbuilder")
        .unwrap()
        .current_dir(ws.root())
        .env("RSBUILDER_INSTALL", &from)
        .args(["alpha", "update"])
        .write_stdin("")
        .assert()
        .failure()
        .code(1);
    let err = stderr(&assert);
    assert!(
        err.contains(&format!(
            "error: rsbuilder 0.1.0, which made the project, could not be installed from `{from}`\nhelp: point RSBUILDER_INSTALL at it"
        )),
        "{err}"
    );
    assert_same_tree(&before, &work_tree(&ws), "a failed install");
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head);
}

/// A `--from-binary` that is missing, or is not rsbuilder: the update fails on the first
/// command with its error, and nothing changes, branches and HEAD included.
#[test]
fn alpha_update_with_a_binary_that_cannot_scaffold_changes_nothing() {
    let Some((ws, _older)) = older_project() else {
        return;
    };
    let not_rsbuilder = ws.root().parent().unwrap().join("not-rsbuilder");
    crate::support::write_executable(
        &not_rsbuilder,
        "#!/bin/sh\necho 'usage: something else' >&2\nexit 2\n",
    );
    let missing = ws.root().parent().unwrap().join("missing-rsbuilder");
    // Another version: its scaffold would be taken for 0.1.0's.
    let other_version = ws.root().parent().unwrap().join("rsbuilder-0.0.1");
    crate::support::write_executable(
        &other_version,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'rsbuilder 0.0.1'\nexit 0\n",
    );
    // Says it is 0.1.0, and cannot scaffold.
    let broken = ws.root().parent().unwrap().join("broken-rsbuilder");
    crate::support::write_executable(
        &broken,
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'rsbuilder 0.1.0' && exit 0\necho 'usage: something else' >&2\nexit 2\n",
    );
    let branches = git(&ws, &["branch", "--list"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    for (binary, error) in [
        (&missing, "--from-binary "),
        (
            &not_rsbuilder,
            "`--version` does not answer as rsbuilder does, not rsbuilder 0.1.0",
        ),
        (
            &other_version,
            "`--version` says `rsbuilder 0.0.1`, not rsbuilder 0.1.0, the version PROJECT records (cliVersion)",
        ),
        (&broken, "`rsbuilder init"),
    ] {
        let before = work_tree(&ws);
        let err = stderr(&update(&ws, binary, &[]).failure().code(1));
        let error_line = err
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_default();
        assert!(error_line.contains(error), "{err}");
        let help = err
            .lines()
            .find(|l| l.starts_with("help: "))
            .unwrap_or_default();
        assert!(help.contains("rsbuilder 0.1.0"), "{err}");
        assert_same_tree(&before, &work_tree(&ws), &binary.display().to_string());
        assert_eq!(git(&ws, &["branch", "--list"]), branches);
        assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head);
    }
}

/// `alpha update` checks what it can before it switches to its branch (git's identity, an
/// earlier update's branch); a failure after the switch says which branch the user is on, and
/// both ways out, and the way back restores the project.
#[test]
fn alpha_update_checks_before_it_switches_branch_and_a_later_failure_says_where_the_user_is() {
    let Some((ws, older)) = older_project() else {
        return;
    };
    let branch = "rsbuilder-update-from-0.1.0-to-0.1.0";
    let start = git(&ws, &["branch", "--show-current"]).trim().to_owned();
    let head = git(&ws, &["rev-parse", "HEAD"]);
    let before = work_tree(&ws);
    let unchanged = |what: &str| {
        assert_same_tree(&before, &work_tree(&ws), what);
        assert_eq!(
            git(&ws, &["branch", "--show-current"]).trim(),
            start,
            "{what}"
        );
    };

    let nobody = [
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("EMAIL", ""),
    ];
    let err = stderr(&update_with(&ws, &older, &[], &nobody).failure().code(1));
    assert!(
        err.contains("\nerror: git has no identity to commit the update with"),
        "{err}"
    );
    assert!(
        err.contains("\nhelp: set them with `git config user.name"),
        "{err}"
    );
    unchanged("no identity");
    assert!(!git(&ws, &["branch", "--list"]).contains(branch));

    git(&ws, &["branch", branch]);
    let err = stderr(&update(&ws, &older, &[]).failure().code(1));
    assert!(
        err.ends_with(&format!(
            "\nerror: the branch `{branch}` exists: an earlier `alpha update` made it\n\
             help: merge it, or delete it with `git branch -D {branch}`, then run `rsbuilder alpha update` again\n"
        )),
        "{err}"
    );
    unchanged("an earlier update's branch");
    git(&ws, &["branch", "-D", branch]);

    // The Makefile, which the update changes, is a link: the write is refused on the branch.
    std::fs::rename(ws.root().join("Makefile"), ws.root().join("Makefile.real")).unwrap();
    std::os::unix::fs::symlink("Makefile.real", ws.root().join("Makefile")).unwrap();
    git(&ws, &["add", "--all"]);
    git(&ws, &["commit", "--quiet", "-m", "a linked Makefile"]);
    let linked = work_tree(&ws);
    let err = stderr(&update(&ws, &older, &[]).failure().code(1));
    assert!(
        err.contains(&format!(
            "\nerror: the update stopped on the branch `{branch}`, which you are on now: "
        )),
        "{err}"
    );
    let back =
        format!("`git add --all && git stash && git switch {start} && git branch -D {branch}`");
    assert!(err.contains(&back), "{err}");
    assert_eq!(git(&ws, &["branch", "--show-current"]).trim(), branch);
    for step in [
        &["add", "--all"][..],
        &["stash", "--quiet"],
        &["switch", "--quiet", &start],
        &["branch", "-D", branch],
    ] {
        git(&ws, step);
    }
    assert_same_tree(&linked, &work_tree(&ws), "the way back");
    assert_ne!(git(&ws, &["rev-parse", "HEAD"]), head);
}

#[test]
fn alpha_update_refuses_a_project_outside_git_or_with_uncommitted_changes() {
    let Some((ws, older)) = older_project() else {
        return;
    };
    ws.write("Makefile", "changed\n");
    let before = work_tree(&ws);
    let err = stderr(&update(&ws, &older, &[]).failure().code(1));
    assert_eq!(
        err,
        "error: the project has changes that are not committed:\n M Makefile\nhelp: commit or stash them first: the update must be told apart from your work\n"
    );
    assert_same_tree(&before, &work_tree(&ws), "uncommitted changes");

    std::fs::remove_dir_all(ws.root().join(".git")).unwrap();
    let err = stderr(&update(&ws, &older, &[]).failure().code(1));
    assert!(
        err.starts_with(&format!(
            "error: {} is not in a git repository\n",
            ws.root().display()
        )),
        "{err}"
    );
}
