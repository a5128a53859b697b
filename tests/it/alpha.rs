//! `rsbuilder alpha generate`: a project scaffolded again from its PROJECT file, into a new
//! directory or in place, is byte for byte what its own commands made.

use std::path::{Path, PathBuf};

use crate::support::{Workspace, assert_same_tree, rsbuilder, snapshot, stderr};

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
        let differ: std::collections::BTreeSet<_> = golden
            .keys()
            .chain(again.keys())
            .filter(|path| golden.get(*path) != again.get(*path))
            .collect();
        assert!(differ.is_empty(), "{name}: these differ: {differ:?}");
    }
}

#[test]
fn dry_run_prints_the_commands_and_writes_nothing() {
    let ws = copy("project-deploy-image");
    let before = ws.snapshot();
    let assert = ws.run(&["alpha", "generate", "--dry-run"]).success();
    assert_same_tree(&before, &ws.snapshot(), "--dry-run");
    let err = stderr(&assert);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "rsbuilder init --domain learn.com --project-name memcached-operator",
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
