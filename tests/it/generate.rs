//! `rsbuilder generate`: the manifests follow the compiled types and the RBAC markers. These
//! tests build a generated api crate with cargo (the build is shared between runs).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::support::{Workspace, stderr};

/// The target directory the generated projects share, so that their dependencies build once.
pub fn target() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generated-projects")
}

/// Held by each test while it builds: cargo copies every project's `crdgen` to the same path of
/// the shared target directory, so two builds at once could run each other's binary.
static BUILDING: Mutex<()> = Mutex::new(());

pub fn one_build_at_a_time() -> MutexGuard<'static, ()> {
    BUILDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A project with two kinds. Each test names its own project: cargo would otherwise take one
/// test's build of the shared target directory for another's.
fn project(name: &str) -> Workspace {
    let ws = Workspace::new(name);
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
    ws.run(&[
        "create",
        "api",
        "--group",
        "fleet",
        "--version",
        "v1",
        "--kind",
        "Ship",
        "--namespaced=false",
    ])
    .success();
    ws
}

fn edit(ws: &Workspace, path: &str, from: &str, to: &str) {
    let text = ws.read(path);
    assert!(text.contains(from), "`{from}` not in {path}");
    ws.write(path, &text.replacen(from, to, 1));
}

#[test]
fn manifests_follow_the_types_and_the_markers() {
    let _build = one_build_at_a_time();
    let ws = project("follow-operator");
    let target = target();
    let check = |ws: &Workspace| ws.run_with_target(&target, &["generate", "--check"]);

    // What `create api` rendered from templates is what the compiled types produce.
    let err = stderr(&check(&ws).success());
    assert!(err.contains("the manifests are up to date"), "{err}");

    // A new validated field and a printer column change that kind's CRD, and nothing else.
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "    pub size: i32,\n",
        "    pub size: i32,\n\n    /// Replicas to keep warm.\n    #[schemars(range(min = 1, max = 10))]\n    pub replicas: i32,\n",
    );
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "    printcolumn(\n        name = \"Age\",",
        "    printcolumn(name = \"Replicas\", type_ = \"integer\", json_path = \".spec.replicas\"),\n    printcolumn(\n        name = \"Age\",",
    );
    let before = ws.snapshot();
    let err = stderr(&check(&ws).code(1));
    assert!(
        err.contains("stale config/crd/bases/appotp.learn.com_appotps.yaml\n"),
        "{err}"
    );
    assert!(err.contains("+              replicas:\n"), "{err}");
    assert!(err.contains("error: 1 manifest is out of date"), "{err}");
    crate::support::assert_same_tree(&before, &ws.snapshot(), "--check wrote something");

    let err = stderr(&ws.run_with_target(&target, &["generate"]).success());
    assert!(
        err.contains("updated config/crd/bases/appotp.learn.com_appotps.yaml\n"),
        "{err}"
    );
    assert!(
        err.contains("unchanged config/crd/bases/fleet.learn.com_ships.yaml\n"),
        "{err}"
    );
    assert!(err.contains("unchanged config/rbac/role.yaml\n"), "{err}");
    let crd = ws.read("config/crd/bases/appotp.learn.com_appotps.yaml");
    assert!(
        crd.contains("                maximum: 10.0\n                minimum: 1.0\n"),
        "{crd}"
    );
    assert!(
        crd.contains("    - jsonPath: .spec.replicas\n      name: Replicas\n      type: integer\n"),
        "{crd}"
    );
    check(&ws).success();

    // A CEL rule on the spec reaches the CRD, and the samples are evaluated against it.
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "#[serde(rename_all = \"camelCase\")]\npub struct AppOTPSpec {",
        "#[serde(rename_all = \"camelCase\")]\n#[x_kube(validation = Rule::new(\"self.replicas <= self.size * 2\").message(\"at most twice the size\"))]\npub struct AppOTPSpec {",
    );
    // As the scaffold's comment says: KubeSchema in place of JsonSchema.
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "    schemars::JsonSchema,\n)]\n#[kube(",
        "    kube::KubeSchema,\n)]\n#[kube(",
    );
    ws.write(
        "config/samples/appotp_v1_app_otp.yaml",
        &ws.read("config/samples/appotp_v1_app_otp.yaml")
            .replace("  size: 1\n", "  size: 1\n  replicas: 2\n"),
    );
    let err = stderr(&ws.run_with_target(&target, &["generate"]).success());
    assert!(!err.contains("breaks the rule"), "{err}");
    let crd = ws.read("config/crd/bases/appotp.learn.com_appotps.yaml");
    assert!(
        crd.contains("            x-kubernetes-validations:\n            - message: at most twice the size\n              rule: self.replicas <= self.size * 2\n"),
        "{crd}"
    );
    check(&ws).success();
    ws.write(
        "config/samples/appotp_v1_app_otp.yaml",
        &ws.read("config/samples/appotp_v1_app_otp.yaml")
            .replace("  replicas: 2\n", "  replicas: 3\n"),
    );
    let err = stderr(&check(&ws).code(1));
    assert!(
        err.contains("warning: `config/samples/appotp_v1_app_otp.yaml`: appotp-sample breaks the rule `self.replicas <= self.size * 2` at `.spec` ({\"replicas\":3,\"size\":1}): at most twice the size\n"),
        "{err}"
    );
    assert!(
        err.contains("error: 1 sample breaks a CEL rule of its CRD"),
        "{err}"
    );

    // A rule that does not parse fails `generate`, which writes nothing.
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "self.replicas <= self.size * 2",
        "self.replicas <= self.size *",
    );
    let before = ws.snapshot();
    let err = stderr(&ws.run_with_target(&target, &["generate"]).code(1));
    assert!(
        err.contains("error: the CEL rule `self.replicas <= self.size *` of AppOTP v1 at `.spec` does not parse; nothing was written:\nERROR: <input>:1:"),
        "{err}"
    );
    crate::support::assert_same_tree(&before, &ws.snapshot(), "a failed generate");
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "self.replicas <= self.size *",
        "self.replicas <= self.size * 3",
    );
    ws.run_with_target(&target, &["generate"]).success();
    check(&ws).success();

    // An RBAC marker changes the role, and nothing else.
    edit(
        &ws,
        "operator/src/controllers/appotp/app_otp.rs",
        "// +rsbuilder:rbac:groups=appotp.learn.com,resources=appotps/finalizers,verbs=update\n",
        "// +rsbuilder:rbac:groups=appotp.learn.com,resources=appotps/finalizers,verbs=update\n// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch\n",
    );
    check(&ws).code(1);
    let err = stderr(&ws.run_with_target(&target, &["generate"]).success());
    assert_eq!(err.matches("updated ").count(), 1, "{err}");
    assert!(err.contains("updated config/rbac/role.yaml\n"), "{err}");
    assert!(ws.read("config/rbac/role.yaml").contains("- apiGroups:\n  - apps\n  resources:\n  - deployments\n  verbs:\n  - get\n  - list\n  - watch\n"));
    check(&ws).success();

    // A CRD no kind produces is reported.
    ws.write("config/crd/bases/old.learn.com_gone.yaml", "---\n");
    let err = stderr(&check(&ws).code(1));
    assert!(
        err.contains("stale config/crd/bases/old.learn.com_gone.yaml"),
        "{err}"
    );
    let err = stderr(&ws.run_with_target(&target, &["generate"]).success());
    assert!(
        err.contains("warning: `config/crd/bases/old.learn.com_gone.yaml` matches no kind"),
        "{err}"
    );
}

#[test]
fn types_that_do_not_compile_change_nothing() {
    let _build = one_build_at_a_time();
    let ws = project("broken-operator");
    // The first build writes Cargo.lock, as any cargo build does.
    ws.run_with_target(&target(), &["generate", "--check"])
        .success();
    edit(
        &ws,
        "api/src/appotp/v1/app_otp.rs",
        "    pub size: i32,\n",
        "    pub size: NoSuchType,\n",
    );
    let before = ws.snapshot();
    let err = stderr(&ws.run_with_target(&target(), &["generate"]).code(1));
    assert!(err.contains("NoSuchType"), "cargo's error is shown:\n{err}");
    assert!(
        err.contains("error: `cargo run --bin crdgen` failed; nothing was written"),
        "{err}"
    );
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn bad_markers_and_read_only_files_change_nothing() {
    let _build = one_build_at_a_time();
    let ws = project("marker-operator");
    let target = target();
    // The first build writes Cargo.lock, as any cargo build does.
    ws.run_with_target(&target, &["generate", "--check"])
        .success();
    edit(
        &ws,
        "operator/src/controllers/fleet/ship.rs",
        "resources=ships/finalizers,verbs=update",
        "resources=ships/finalizers,verbs=update,colour=blue",
    );
    let before = ws.snapshot();
    let err = stderr(&ws.run_with_target(&target, &["generate"]).code(1));
    assert!(
        err.contains("error: invalid RBAC marker at operator/src/controllers/fleet/ship.rs:"),
        "{err}"
    );
    assert!(err.contains("unknown key `colour`"), "{err}");
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");

    edit(
        &ws,
        "operator/src/controllers/fleet/ship.rs",
        ",colour=blue",
        "",
    );
    edit(
        &ws,
        "operator/src/controllers/fleet/ship.rs",
        "verbs=update\n",
        "verbs=update\n// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get\n",
    );
    let role = ws.root().join("config/rbac/role.yaml");
    let mut permissions = std::fs::metadata(&role).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&role, permissions).unwrap();
    let before = ws.snapshot();
    let err = stderr(&ws.run_with_target(&target, &["generate"]).code(1));
    assert!(
        err.contains("error: `config/rbac/role.yaml` is read-only, and rsbuilder would change it"),
        "{err}"
    );
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn outside_a_project_generate_says_how_to_start_one() {
    let ws = Workspace::new("empty");
    let err = stderr(&ws.run(&["generate"]).code(1));
    assert!(err.contains("error: no PROJECT file found in"), "{err}");
}

#[test]
fn create_api_with_make_regenerates_at_once() {
    let _build = one_build_at_a_time();
    let ws = Workspace::new("make-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    let err = stderr(
        &ws.run_with_target(
            &target(),
            &[
                "create",
                "api",
                "--group",
                "appotp",
                "--version",
                "v1",
                "--kind",
                "AppOTP",
                "--make=true",
            ],
        )
        .success(),
    );
    assert!(
        err.contains("unchanged config/crd/bases/appotp.learn.com_appotps.yaml\n"),
        "{err}"
    );
    assert!(err.contains("generated the manifests in"), "{err}");
}
