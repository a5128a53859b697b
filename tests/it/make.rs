//! The generated Makefile's end-to-end targets, run for real by `make` with stand-ins for kind,
//! docker, kubectl, cargo and rsbuilder that record their arguments: the steps in their order,
//! cert-manager installed when config/default uses it and only then, what `make deploy` applies,
//! and the Kind cluster deleted whatever the tests' outcome. No cluster, image or network is
//! needed; the stand-in kubectl builds kustomizations with the real one.

use std::path::Path;
use std::process::Command;

use crate::support::Workspace;

/// Records `<tool> <args>` to `$STANDIN_LOG`; `kubectl apply -f -` keeps what it was given in
/// `$STANDIN_LOG.applied-<n>`, `kubectl kustomize` runs the real kubectl, `kind get clusters`
/// prints `$STANDIN_CLUSTERS`, `kubectl get crd` fails unless `$STANDIN_CERT_MANAGER` is set, and
/// `cargo test` exits with `$STANDIN_TESTS_EXIT`.
const STANDIN: &str = r#"#!/usr/bin/env bash
set -eu
tool="$(basename "$0")"
# What a pipe feeds `apply` is read before the call is recorded, so that the command writing
# into the pipe is recorded first.
if [[ "$tool $*" == "kubectl apply "*" -f -" ]]; then
  n=$(ls "$STANDIN_LOG".applied-* 2>/dev/null | wc -l)
  cat > "$STANDIN_LOG.applied-$n"
fi
echo "$tool $*" >> "$STANDIN_LOG"
case "$tool $*" in
  "kind get clusters") printf '%s' "${STANDIN_CLUSTERS:-}" ;;
  "kubectl kustomize "*) exec "$STANDIN_KUBECTL" "$@" ;;
  "kubectl get crd "*) [[ -n "${STANDIN_CERT_MANAGER:-}" ]] ;;
  "cargo test "*) exit "${STANDIN_TESTS_EXIT:-0}" ;;
esac
"#;

struct Run {
    success: bool,
    steps: Vec<String>,
    applied: Vec<String>,
    output: String,
}

/// `make <target>` in the project with every tool a stand-in, or `None` with a note when make
/// or kubectl is missing (a failure under `RSBUILDER_REQUIRE_E2E_LOCAL=1`, as in CI).
fn make(ws: &Workspace, target: &str, env: &[(&str, &str)]) -> Option<Run> {
    let (Some(real_make), Some(real_kubectl)) = (which("make"), which("kubectl")) else {
        assert!(
            std::env::var("RSBUILDER_REQUIRE_E2E_LOCAL").as_deref() != Ok("1"),
            "RSBUILDER_REQUIRE_E2E_LOCAL=1, but make or kubectl is missing"
        );
        eprintln!("note: skipping the Makefile's end-to-end targets: make or kubectl is missing");
        return None;
    };
    let bin = ws.root().join("standins");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["kind", "docker", "kubectl", "cargo", "rsbuilder"] {
        let path = bin.join(tool);
        std::fs::write(&path, STANDIN).unwrap();
        let mut permissions = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).unwrap();
    }
    let log = ws.root().join("standins.log");
    let _ = std::fs::remove_file(&log);
    for entry in std::fs::read_dir(ws.root()).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("standins.log.applied-") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let tool = |name: &str| format!("{name}={}", bin.join(name.to_lowercase()).display());
    let output = Command::new(real_make)
        .current_dir(ws.root())
        .args(["--no-print-directory", target])
        .args([
            tool("KIND"),
            tool("KUBECTL"),
            tool("CARGO"),
            tool("RSBUILDER"),
            format!("CONTAINER_TOOL={}", bin.join("docker").display()),
        ])
        .env("STANDIN_LOG", &log)
        .env("STANDIN_KUBECTL", real_kubectl)
        .envs(env.iter().copied())
        .output()
        .expect("make runs");
    let bin_prefix = format!("{}/", bin.display());
    let steps = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|line| line.replace(&bin_prefix, ""))
        .collect();
    let mut applied = Vec::new();
    while let Ok(yaml) =
        std::fs::read_to_string(format!("{}.applied-{}", log.display(), applied.len()))
    {
        applied.push(yaml);
    }
    Some(Run {
        success: output.status.success(),
        steps,
        applied,
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(tool))
            .find(|path| path.is_file())
    })
}

fn project(webhooks: bool) -> Workspace {
    let ws = Workspace::new("shop-operator");
    ws.run(&["init", "--domain", "shop.com"]).success();
    let kind = ["--group", "store", "--version", "v1", "--kind", "Cart"];
    ws.run(&[&["create", "api"][..], &kind[..]].concat())
        .success();
    if webhooks {
        ws.run(&[&["create", "webhook"][..], &kind[..], &["--defaulting"][..]].concat())
            .success();
    }
    ws
}

/// `kubectl kustomize <dir>` with the real kubectl.
fn built(root: &Path, dir: &str) -> String {
    let output = Command::new("kubectl")
        .args(["kustomize", dir])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

/// The steps of `make test-e2e` in a fresh cluster, cert-manager's between `cert_manager`.
fn steps(cert_manager: &[&str], tests: &str) -> Vec<String> {
    let mut steps = vec![
        "kind get clusters".to_owned(),
        "kind create cluster --name shop-operator-test-e2e".to_owned(),
    ];
    steps.extend(cert_manager.iter().map(|s| (*s).to_owned()));
    steps.extend(
        [
            "docker build -t example.com/shop-operator:v0.0.1 .",
            "kind load docker-image example.com/shop-operator:v0.0.1 --name shop-operator-test-e2e",
            "rsbuilder generate",
            "kubectl kustomize config/crd",
            "kubectl apply --server-side --force-conflicts -f -",
            "kubectl kustomize config/default",
            "kubectl apply --server-side --force-conflicts -f -",
            tests,
            "kind delete cluster --name shop-operator-test-e2e",
        ]
        .map(str::to_owned),
    );
    steps
}

const TESTS: &str = "cargo test -p shop-operator --test e2e -- --ignored";

#[test]
fn test_e2e_builds_loads_installs_deploys_tests_and_deletes_its_cluster() {
    let ws = project(false);
    let Some(run) = make(&ws, "test-e2e", &[]) else {
        return;
    };
    assert!(run.success, "{}", run.output);
    assert_eq!(run.steps, steps(&[], TESTS), "{}", run.output);
    assert!(
        run.output
            .contains("config/default does not use cert-manager: it is not installed")
    );
    // What `make install` and `make deploy` apply is exactly the kustomize builds, with the
    // image the tests loaded into the cluster.
    assert_eq!(run.applied.len(), 2);
    assert_eq!(run.applied[0], built(ws.root(), "config/crd"));
    let default = built(ws.root(), "config/default");
    assert!(default.contains("image: controller:latest\n"));
    assert_eq!(
        run.applied[1],
        default.replace(
            "image: controller:latest\n",
            "image: example.com/shop-operator:v0.0.1\n"
        )
    );
}

#[test]
fn test_e2e_installs_cert_manager_for_webhooks_and_deletes_its_cluster_when_tests_fail() {
    let ws = project(true);
    let Some(run) = make(&ws, "test-e2e", &[("STANDIN_TESTS_EXIT", "101")]) else {
        return;
    };
    assert!(
        !run.success,
        "failing tests fail make test-e2e:\n{}",
        run.output
    );
    let cert_manager = [
        "kubectl get crd certificates.cert-manager.io",
        "kubectl apply --server-side --force-conflicts -f https://github.com/cert-manager/cert-manager/releases/download/v1.19.1/cert-manager.yaml",
        "kubectl wait --for=condition=Available deployment --all -n cert-manager --timeout=300s",
    ];
    assert_eq!(run.steps, steps(&cert_manager, TESTS), "{}", run.output);
    assert!(run.applied[1].contains("kind: Certificate\n"));

    // A cluster that has cert-manager, or CERT_MANAGER_INSTALL_SKIP=true, installs nothing; a
    // Kind cluster that exists is used as it is.
    let run = make(
        &ws,
        "setup-test-e2e",
        &[
            ("STANDIN_CERT_MANAGER", "1"),
            ("STANDIN_CLUSTERS", "shop-operator-test-e2e\n"),
        ],
    )
    .unwrap();
    assert!(run.success, "{}", run.output);
    assert_eq!(
        run.steps,
        [
            "kind get clusters",
            "kubectl get crd certificates.cert-manager.io"
        ]
    );
    assert!(run.output.contains("cert-manager is installed already"));
    let run = make(
        &ws,
        "setup-cert-manager",
        &[("CERT_MANAGER_INSTALL_SKIP", "true")],
    )
    .unwrap();
    assert!(run.success, "{}", run.output);
    assert!(run.steps.is_empty(), "{:?}", run.steps);
    assert!(
        run.output
            .contains("CERT_MANAGER_INSTALL_SKIP=true: cert-manager is not installed")
    );
}
