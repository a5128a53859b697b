//! Golden projects: `testdata/<name>/` holds what a scripted list of commands generates. The test
//! runs the commands again and fails on any byte of difference; `SNAPSHOTS=overwrite` (or
//! `RSBUILDER_BLESS=1`) rewrites `testdata/` instead. CI never blesses, and also builds and tests every golden project
//! (`scripts/test.sh`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::{Workspace, snapshot, stderr};

/// One golden project: the directory it is generated in (which names the project) and the
/// rsbuilder commands that make it, in order, as a shell would split them (single quotes group).
struct Scenario {
    name: &'static str,
    directory: &'static str,
    commands: &'static [&'static str],
    /// What the user then writes by hand, after which `rsbuilder generate` runs.
    edits: &'static [Edit],
}

/// A user's edit of a file: `from` replaced by `to`, once.
pub struct Edit {
    pub path: &'static str,
    pub from: &'static str,
    pub to: &'static str,
}

/// The types of project-v1's Policy, as a user writes CEL rules (kube's `KubeSchema` and
/// `x_kube`), a print column with a priority and the scale subresource; and its sample, which
/// keeps the rules.
const POLICY_EDITS: &[Edit] = &[
    Edit {
        path: "api/src/appotp/v1/policy.rs",
        from: "    schemars::JsonSchema,\n)]\n#[kube(",
        to: "    kube::KubeSchema,\n)]\n#[kube(",
    },
    Edit {
        path: "api/src/appotp/v1/policy.rs",
        from: "    status = \"PolicyStatus\",\n",
        to: "    status = \"PolicyStatus\",\n    scale(\n        spec_replicas_path = \".spec.replicas\",\n        status_replicas_path = \".status.replicas\"\n    ),\n    printcolumn(\n        name = \"Replicas\",\n        type_ = \"integer\",\n        json_path = \".spec.replicas\",\n        description = \"Replicas to run\",\n        priority = 1\n    ),\n",
    },
    Edit {
        path: "api/src/appotp/v1/policy.rs",
        from: "#[serde(rename_all = \"camelCase\")]\npub struct PolicySpec {",
        to: "#[serde(rename_all = \"camelCase\")]\n#[x_kube(validation = Rule::new(\"self.replicas <= self.size * 2\").message(\"too many replicas\"))]\npub struct PolicySpec {",
    },
    Edit {
        path: "api/src/appotp/v1/policy.rs",
        from: "    pub size: i32,\n}\n",
        to: "    pub size: i32,\n\n    /// Replicas to run: at most twice the size.\n    pub replicas: i32,\n\n    /// Where the policy applies; it cannot change once set.\n    #[x_kube(validation = Rule::new(\"self == oldSelf\").message(\"region is immutable\"))]\n    pub region: String,\n}\n",
    },
    Edit {
        path: "api/src/appotp/v1/policy.rs",
        from: "    pub observed_generation: Option<i64>,\n}\n",
        to: "    pub observed_generation: Option<i64>,\n\n    /// Replicas running, for the scale subresource.\n    #[serde(default)]\n    pub replicas: i32,\n}\n",
    },
    Edit {
        path: "config/samples/appotp_v1_policy.yaml",
        from: "  size: 1\n",
        to: "  size: 1\n  replicas: 2\n  region: eu-west-1\n",
    },
];

/// The files of golden project `name` that a user's edits change: those edits' files, and the
/// CRDs `generate` makes of them.
pub fn edited_files(name: &str) -> Vec<PathBuf> {
    SCENARIOS
        .iter()
        .filter(|scenario| scenario.name == name)
        .flat_map(|scenario| scenario.edits.iter().map(|edit| PathBuf::from(edit.path)))
        .chain(
            (name == "project-v1")
                .then(|| PathBuf::from("config/crd/bases/appotp.learn.com_policies.yaml")),
        )
        .collect()
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "project-v1",
        directory: "otp-operator",
        commands: &[
            "init --domain learn.com --owner 'The otp-operator Authors'",
            "create api --group appotp --version v1 --kind AppOTP",
            "create api --group appotp --version v1 --kind Policy",
            // A second version of a kind: the CRD holds both, v1 stays the storage version.
            "create api --group appotp --version v2 --kind AppOTP --controller=false",
            // A second group, a cluster-scoped kind, named like something the controller imports.
            "create api --group fleet --version v1beta1 --kind Client --namespaced=false",
            // A kind whose module name is a Rust keyword: its types first, its controller later.
            "create api --group fleet --version v1 --kind Loop --resource=true --controller=false",
            "create api --group fleet --version v1 --kind Loop --resource=false --controller=true",
            "create api --group fleet --version v1 --kind Person --plural persons --controller=false",
            // A long kind in a dotted group, where rustfmt would rewrap lines that grow with names.
            "create api --group security.platform --version v1alpha1 --kind CertificateRequestPolicy",
            // Webhooks for a kind with two versions: admission, then conversion.
            "create webhook --group appotp --version v1 --kind AppOTP --defaulting --programmatic-validation",
            "create webhook --group appotp --version v1 --kind AppOTP --conversion --spoke v2",
            // Scaffolding a kind again rewrites its own files and duplicates no insertion.
            "create api --group appotp --version v1 --kind AppOTP --force",
        ],
        edits: POLICY_EDITS,
    },
    // Names that clash with Rust keywords, with crates, or with what the generated code imports.
    Scenario {
        name: "project-names",
        directory: "names-operator",
        commands: &[
            "init --runtime=registry --domain example.com",
            "create api --group kube --version v1 --kind Context",
            "create api --group super --version v1 --kind Status",
            "create api --group type --version v1 --kind Match",
            "create api --group core --version v1 --kind Core",
            "create api --group std --version v1 --kind Object",
            "create api --group apps --version v1 --kind Error",
            "create api --group ops --version v1 --kind Registration",
            "create api --group ops --version v1 --kind Spec --namespaced=false",
            "create api --group ops --version v1 --kind ApiServer",
            // Kinds named like what the webhook modules define or import.
            "create api --group ops --version v1 --kind Webhooks",
            "create webhook --group ops --version v1 --kind Webhooks --defaulting --programmatic-validation",
            "create api --group ops --version v1 --kind Defaulter",
            "create webhook --group ops --version v1 --kind Defaulter --defaulting --programmatic-validation",
            // Groups and kinds named like crate files, and a kind YAML 1.1 would read as `true`.
            "create api --group lib --version v1 --kind Mod",
            "create api --group main --version v1 --kind On",
            // A cluster-scoped kind: its samples have no namespace.
            "create webhook --group ops --version v1 --kind Spec --defaulting --programmatic-validation",
        ],
        edits: &[],
    },
    Scenario {
        name: "project-namespaced",
        directory: "ns-operator",
        commands: &[
            // An owner with what breaks TOML, Tera and shells, short of what is refused.
            "init --runtime=registry --domain example.org --namespaced --license none --repo https://github.com/example/ns-operator --owner 'Ünïcödé $HOME {{ team }} {% raw %} Authors 🦀'",
            "create api --group ship --version v1 --kind Captain",
            "create webhook --group ship --version v1 --kind Captain --defaulting",
        ],
        edits: &[],
    },
    // Kinds that run an image, as kubebuilder's deploy-image plugin makes them, and controllers
    // for Kubernetes' own kinds.
    Scenario {
        name: "project-deploy-image",
        directory: "memcached-operator",
        commands: &[
            "init --runtime=registry --domain learn.com",
            "create api --group example.com --version v1alpha1 --kind Memcached --image=memcached:1.6.26-alpine3.19 --image-container-command=memcached,--memory-limit=64,-o,modern,-v --image-container-port=11211 --run-as-user=1001 --plugins=deploy-image/v1-alpha",
            "create api --group appotp --version v1 --kind AppOTP --image memcached:1.6.26-alpine3.19 --image-container-port 11211 --run-as-user 1001",
            "create api --group web --version v1 --kind Site --image nginx",
            // An image with every part of the reference grammar, and a command with quotes, a
            // backslash, a shell variable and unicode, which reach Rust string literals.
            "create api --group web --version v1 --kind Proxy --image registry.example.com:5000/team_a/proxy.x:v1.2_rc-3 --image-container-command 'sh,-c,echo \"héllo \\ wörld\" $HOME 🦀' --image-container-port 8080",
            "create api --group apps --version v1 --kind Deployment --resource=false --controller",
            "create api --group core --version v1 --kind Pod --resource=false --controller",
            "create api --group rbac.authorization --version v1 --kind ClusterRole --resource=false --controller",
            // Webhooks for Kubernetes' own kinds, as kubebuilder's scripts make them.
            "create webhook --group core --version v1 --kind Pod --programmatic-validation",
            "create webhook --group apps --version v1 --kind Deployment --defaulting",
            "create webhook --group apps --version v1 --kind Deployment --programmatic-validation",
        ],
        edits: &[],
    },
    // Webhooks: the Application operator of defaulting and validation, and a kind with two
    // versions whose module grows one webhook at a time, up to a conversion.
    Scenario {
        name: "project-webhooks",
        directory: "webhook-operator",
        commands: &[
            "init --runtime=registry --domain example.com --project-name myoperator",
            "create api --group example --version v1 --kind Application",
            "create webhook --group example --version v1 --kind Application --defaulting --programmatic-validation",
            "create api --group example --version v1 --kind Cache",
            "create webhook --group example --version v1 --kind Cache --defaulting --defaulting-path /default-cache",
            "create api --group example --version v2 --kind Cache --controller=false",
            "create webhook --group example --version v1 --kind Cache --programmatic-validation=true",
            "create webhook --group example --version v1 --kind Cache --conversion --spoke v2",
            // A third version joins the conversion at its markers, without --force.
            "create api --group example --version v3 --kind Cache --controller=false",
            "create webhook --group example --version v1 --kind Cache --conversion --spoke v3",
            // Scaffolding webhooks again rewrites their module and duplicates nothing else.
            "create webhook --group example --version v1 --kind Application --defaulting --force",
        ],
        edits: &[],
    },
];

/// Golden projects that kubebuilder's own scripts make: `scripts/kubebuilder-testdata.sh` runs
/// their command lists as kubebuilder's users write them.
const KUBEBUILDER_SCRIPTS: &[&str] = &["project-v4-multigroup", "project-v4-with-plugins"];

/// The target directory of rsbuilder's own build, which the golden projects' builds share.
fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    )
}

/// Runs kubebuilder's script for `name` in a new temporary directory; returns the directory
/// (kept alive by the returned handle) and the project in it.
fn run_kubebuilder_script(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kubebuilder-testdata.sh");
    let output = std::process::Command::new("bash")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_rsbuilder"))
        .arg(dir.path())
        .arg(name)
        .env("NO_COLOR", "1")
        // `make build-installer` compiles the project's crdgen: with the dependencies built
        // for rsbuilder's own tests and the other golden projects.
        .env("CARGO_TARGET_DIR", target())
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "{name}: kubebuilder's commands failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let project = dir.path().join(name);
    (dir, project)
}

/// Whether kubectl runs; when it does not, a note says what is skipped, unless
/// `RSBUILDER_REQUIRE_KUBECTL=1` makes that a failure.
fn kubectl_runs() -> bool {
    match std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(output) if output.status.success() => true,
        result if std::env::var("RSBUILDER_REQUIRE_KUBECTL").as_deref() == Ok("1") => {
            panic!("RSBUILDER_REQUIRE_KUBECTL=1, but kubectl does not run: {result:?}")
        }
        result => {
            eprintln!(
                "note: skipping golden project-v4-with-plugins, whose `make build-installer` needs kubectl: {result:?}"
            );
            false
        }
    }
}

/// Splits a command line on spaces, keeping single-quoted text together.
fn split(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in command.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => words.extend((!word.is_empty()).then(|| std::mem::take(&mut word))),
            c => word.push(c),
        }
    }
    words.extend((!word.is_empty()).then_some(word));
    words
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

#[test]
fn golden_projects_are_up_to_date() {
    let bless = std::env::var_os("RSBUILDER_BLESS").is_some_and(|v| v == "1")
        || std::env::var_os("SNAPSHOTS").is_some_and(|v| v == "overwrite");
    let mut stale = Vec::new();
    for scenario in SCENARIOS {
        let ws = Workspace::new(scenario.directory);
        for command in scenario.commands {
            let args = split(command);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let assert = ws.run(&args);
            let output = assert.get_output();
            assert!(
                output.status.success(),
                "{}: `rsbuilder {}` failed:\n{}",
                scenario.name,
                command,
                stderr(&assert)
            );
        }
        if !scenario.edits.is_empty() {
            for edit in scenario.edits {
                let text = ws.read(edit.path);
                assert_eq!(
                    text.matches(edit.from).count(),
                    1,
                    "`{}` is not in {} once",
                    edit.from,
                    edit.path
                );
                ws.write(edit.path, &text.replacen(edit.from, edit.to, 1));
            }
            let assert = ws.run_with_target(&target(), &["generate"]);
            let err = stderr(&assert);
            assert!(
                assert.get_output().status.success(),
                "{}: `rsbuilder generate` after the edits failed:\n{err}",
                scenario.name,
            );
            // The edited samples keep the rules the edited types declare.
            assert!(!err.contains("breaks the rule"), "{}: {err}", scenario.name);
        }
        compare(scenario.name, ws.root(), bless, &mut stale);
    }
    for name in KUBEBUILDER_SCRIPTS {
        // project-v4-with-plugins runs `make build-installer`, whose kustomize build is kubectl's.
        if *name == "project-v4-with-plugins" && !kubectl_runs() {
            continue;
        }
        let (_dir, project) = run_kubebuilder_script(name);
        // kubebuilder's command lists make the default, vendored project; it then takes the
        // runtime from crates.io, as testdata's projects but project-v1 do.
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_rsbuilder"))
            .args(["edit", "--runtime=registry"])
            .current_dir(&project)
            .env("NO_COLOR", "1")
            .output()
            .expect("rsbuilder runs");
        assert!(
            output.status.success(),
            "{name}: `rsbuilder edit --runtime=registry` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        compare(name, &project, bless, &mut stale);
    }
    assert!(
        stale.is_empty(),
        "golden projects are stale (rerun with SNAPSHOTS=overwrite to accept):\n  {}",
        stale.join("\n  ")
    );
}

/// Compares the project generated in `root` with `testdata/<name>`, adding every difference to
/// `stale`; with `bless`, replaces `testdata/<name>` instead.
fn compare(name: &str, root: &Path, bless: bool, stale: &mut Vec<String>) {
    let golden = testdata().join(name);
    if bless {
        if golden.exists() {
            std::fs::remove_dir_all(&golden).unwrap();
        }
        copy_tree(root, &golden);
        return;
    }
    let want = snapshot(&golden);
    let got = snapshot(root);
    let paths: BTreeSet<&PathBuf> = want.keys().chain(got.keys()).collect();
    for path in paths {
        let problem = match (want.get(path), got.get(path)) {
            (Some(a), Some(b)) if a == b => continue,
            (Some(a), Some(b)) => format!("differs:\n{}", diff(path, a, b)),
            (Some(_), None) => "no longer generated".to_owned(),
            (None, Some(_)) => "not in testdata".to_owned(),
            (None, None) => unreachable!(),
        };
        stale.push(format!("{name}/{}: {problem}", path.display()));
    }
}

/// The unified diff from the golden file to the generated one, at most 40 lines of it.
fn diff(path: &Path, golden: &[u8], generated: &[u8]) -> String {
    let (golden, generated) = (
        String::from_utf8_lossy(golden),
        String::from_utf8_lossy(generated),
    );
    let shown = path.display().to_string();
    let text = similar::TextDiff::from_lines(golden.as_ref(), generated.as_ref())
        .unified_diff()
        .context_radius(2)
        .header(&format!("testdata/{shown}"), &format!("generated/{shown}"))
        .to_string();
    let mut lines: Vec<&str> = text.lines().take(41).collect();
    if lines.len() == 41 {
        lines[40] = "...";
    }
    lines.join("\n")
}

fn copy_tree(from: &Path, to: &Path) {
    for (path, bytes) in snapshot(from) {
        let target = to.join(&path);
        if from.join(&path).is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(&target, bytes).unwrap();
        }
    }
}
