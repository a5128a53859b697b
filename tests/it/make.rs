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
        crate::support::write_executable(&path, STANDIN);
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

/// `DEPLOY_CONFIG=config/webhook-self-certs`: no cert-manager is installed, and what `make
/// deploy` applies is that overlay's build, whose manager makes its own webhook certificate.
#[test]
fn test_e2e_with_self_managed_webhook_certificates_installs_no_cert_manager() {
    let ws = project(true);
    let Some(run) = make(
        &ws,
        "test-e2e",
        &[("DEPLOY_CONFIG", "config/webhook-self-certs")],
    ) else {
        return;
    };
    assert!(run.success, "{}", run.output);
    let expected: Vec<String> = steps(&[], TESTS)
        .into_iter()
        .map(|step| step.replace("config/default", "config/webhook-self-certs"))
        .collect();
    assert_eq!(run.steps, expected, "{}", run.output);
    assert!(run.output.contains(
        "config/webhook-self-certs makes its own webhook certificate: cert-manager is not installed"
    ));
    let overlay = built(ws.root(), "config/webhook-self-certs");
    assert!(!overlay.contains("cert-manager") && overlay.contains("WEBHOOK_CERT_SECRET"));
    assert_eq!(
        run.applied[1],
        overlay.replace(
            "image: controller:latest\n",
            "image: example.com/shop-operator:v0.0.1\n"
        )
    );
}

/// Whether python3 with PyYAML and openssl run here; a failure under
/// `RSBUILDER_REQUIRE_E2E_LOCAL=1`, as in CI.
fn python_with_yaml() -> bool {
    let python = Command::new("python3").args(["-c", "import yaml"]).output();
    let openssl = Command::new("openssl").arg("version").output();
    let ok = python.is_ok_and(|o| o.status.success()) && openssl.is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("RSBUILDER_REQUIRE_E2E_LOCAL").as_deref() != Ok("1"),
            "RSBUILDER_REQUIRE_E2E_LOCAL=1, but python3 with PyYAML or openssl is missing"
        );
        eprintln!("note: skipping hack/run_webhooks.py: python3 with PyYAML or openssl is missing");
    }
    ok
}

/// A project with defaulting and validating webhooks, and a kind converted by webhook.
fn webhook_project() -> Workspace {
    let ws = project(true);
    ws.run(&[
        "create",
        "webhook",
        "--group",
        "store",
        "--version",
        "v1",
        "--kind",
        "Cart",
        "--programmatic-validation",
    ])
    .success();
    ws.run(&[
        "create",
        "api",
        "--group",
        "store",
        "--version",
        "v2",
        "--kind",
        "Cart",
        "--controller=false",
    ])
    .success();
    ws.run(&[
        "create",
        "webhook",
        "--group",
        "store",
        "--version",
        "v1",
        "--kind",
        "Cart",
        "--conversion",
        "--spoke",
        "v2",
    ])
    .success();
    ws
}

#[test]
fn run_webhooks_points_every_webhook_at_this_machine_with_a_certificate_for_it() {
    if !python_with_yaml() {
        return;
    }
    let ws = webhook_project();
    let output = Command::new("python3")
        .args([
            "hack/run_webhooks.py",
            "--host",
            "10.1.2.3",
            "--port",
            "9555",
            "--print",
        ])
        .current_dir(ws.root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_slice(&output.stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let ca = std::fs::read(ws.root().join("bin/local-webhooks/ca.crt")).unwrap();
    let bundle = base64_of(&ca);
    let kinds: Vec<_> = documents
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or("patch"))
        .collect();
    assert_eq!(
        kinds,
        [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "patch"
        ]
    );
    assert_eq!(
        documents[0]["metadata"]["name"],
        "shop-operator-local-mutating-webhook-configuration"
    );
    for (document, verb) in documents[..2].iter().zip(["mutate", "validate"]) {
        let webhooks = document["webhooks"].as_sequence().unwrap();
        assert_eq!(webhooks.len(), 1);
        let client = &webhooks[0]["clientConfig"];
        assert_eq!(
            client["url"],
            format!("https://10.1.2.3:9555/{verb}-store-shop-com-v1-cart").as_str()
        );
        assert_eq!(client["caBundle"], bundle.as_str());
        assert!(client.get("service").is_none());
    }
    let patch = &documents[2];
    assert_eq!(patch["crd"], "carts.store.shop.com");
    let client = &patch["patch"]["spec"]["conversion"]["webhook"]["clientConfig"];
    assert_eq!(client["url"], "https://10.1.2.3:9555/convert");
    assert_eq!(client["caBundle"], bundle.as_str());
    // The serving certificate names the host, and the CA signed it.
    let dir = ws.root().join("bin/local-webhooks");
    let san = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(dir.join("tls.crt"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&san.stdout).contains("IP Address:10.1.2.3"));
    let verify = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(dir.join("ca.crt"))
        .arg(dir.join("tls.crt"))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

fn base64_of(bytes: &[u8]) -> String {
    let output = Command::new("python3")
        .args([
            "-c",
            "import base64,sys; print(base64.b64encode(sys.stdin.buffer.read()).decode(), end='')",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(bytes)?;
            child.wait_with_output()
        })
        .unwrap();
    String::from_utf8(output.stdout).unwrap()
}

/// The manager runs with its webhooks on, the configurations are applied before it and
/// removed after it, also when it is stopped with SIGTERM, which it gets once.
#[test]
fn run_webhooks_removes_its_configurations_when_the_manager_stops() {
    if !python_with_yaml() {
        return;
    }
    let ws = webhook_project();
    let log = ws.root().join("run.log");
    let kubectl = ws.root().join("kubectl-standin");
    crate::support::write_executable(
        &kubectl,
        "#!/usr/bin/env bash\ncat > /dev/null\necho \"kubectl $1 $2\" >> \"$RUN_LOG\"\n",
    );
    let manager = ws.root().join("manager-standin");
    crate::support::write_executable(
        &manager,
        "#!/usr/bin/env bash\ntrap 'echo \"manager stops on TERM\" >> \"$RUN_LOG\"; exit 0' TERM\necho \"manager $* ENABLE_WEBHOOKS=$ENABLE_WEBHOOKS\" >> \"$RUN_LOG\"\nwhile true; do sleep 0.05; done\n",
    );
    let mut child = Command::new("python3")
        .args([
            "hack/run_webhooks.py",
            "--host",
            "host.docker.internal",
            "--kubectl",
        ])
        .arg(&kubectl)
        .arg("--")
        .arg(&manager)
        .arg("--leader-elect")
        .current_dir(ws.root())
        .env("RUN_LOG", &log)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("manager ")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the manager never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("run_webhooks.py did not stop after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cert_dir = ws.root().join("bin/local-webhooks");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "kubectl apply -f\nkubectl patch crd\nmanager --leader-elect --webhook-cert-path={} --webhook-port=9443 ENABLE_WEBHOOKS=true\nmanager stops on TERM\nkubectl delete --ignore-not-found\n",
            cert_dir.canonicalize().unwrap().display()
        )
    );
}
