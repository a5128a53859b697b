#!/usr/bin/env bash
# User journeys: scaffold a project, make the edits a user makes to the types and samples, and
# check that everything still builds, lints, tests and regenerates. Each kind of the project
# takes one journey:
#   example/Application  the fields users describe: replicas (1..=10), image and version in
#                        the spec, availableReplicas in the status;
#   shapes/Shape         an Option, a map, a nested struct, an enum and a Vec of structs;
#   plain/Bare           the example `size` field removed;
#   report/Report        a second status field;
#   web/Site             a kind that runs an image (--image): a spec field that its pure
#                        Deployment builder passes to the pods, with a test of it;
#   example/Application  also a second controller (--controller-name application-audit);
#   ledger/Ledger        a server-side-applied kind (--ssa) with another optional field;
#   batch/Task           two versions of a kind that embeds Kubernetes' own types: a
#                        JobTemplateSpec, a Vec<ObjectReference>, an enum with a default and
#                        an Option<Time> in the status; its CRD's size is printed and checked,
#                        with every description and with Kubernetes' descriptions dropped.
# Application then gets its webhooks, filled in as users describe them: defaulting sets
# replicas to 1 when they are 0; validation denies fewer than one replica ("replicas must be
# at least 1") and warns about an image without a tag; tests prove it through the HTTP layer.
# The edits touch the types, the samples and the webhook module, then run `make manifests` (with the
# rsbuilder that `make rsbuilder` installs from this checkout), `cargo clippy --all-targets
# -D warnings`, `cargo test` and `make check-manifests`, all `--locked`.
#
#   scripts/journeys.sh RSBUILDER_BINARY
#
# Last, a project made by an older rsbuilder (the golden project-webhooks at commit 3b7f4c3,
# from git history) is upgraded and must still pass clippy and its tests.
#
# Uses CARGO_TARGET_DIR when set, so that it shares the golden projects' build.
set -euo pipefail

rsbuilder="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d -t rsbuilder-journeys.XXXXXX)"
trap 'rm -rf "$work"' EXIT
project="$work/journey-operator"
mkdir "$project"
cd "$project"

step() { printf -- '-- [%ss] %s\n' "$SECONDS" "$*"; }

step "scaffold"
"$rsbuilder" init --domain example.com 2>/dev/null
for api in "example Application" "shapes Shape" "plain Bare" "report Report"; do
  set -- $api
  "$rsbuilder" create api --group "$1" --version v1 --kind "$2" 2>/dev/null
done
"$rsbuilder" create api --group web --version v1 --kind Site --image nginx:1.27 \
  --image-container-port 8080 --run-as-user 1001 2>/dev/null
"$rsbuilder" create api --group example --version v1 --kind Application --resource=false \
  --controller-name application-audit 2>/dev/null
"$rsbuilder" create api --group ledger --version v1 --kind Ledger --ssa 2>/dev/null
"$rsbuilder" create api --group batch --version v1 --kind Task 2>/dev/null
"$rsbuilder" create api --group batch --version v2 --kind Task --controller=false 2>/dev/null

step "edit the types and the samples"
python3 - <<'PY'
import pathlib, re

def edit(path, old, new):
    file = pathlib.Path(path)
    text = file.read_text()
    if old not in text:
        raise SystemExit(f"journey: `{old}` not found in {path}")
    file.write_text(text.replace(old, new, 1))

SIZE = '''    /// An example field: how many instances to run.
    #[schemars(range(min = 1, max = 10))]
    pub size: i32,
'''
CONDITIONS = '''    pub conditions: Vec<metav1::Condition>,
'''

# The fields users describe.
edit("api/src/example/v1/application.rs", SIZE, SIZE + '''
    /// How many replicas of the application to run.
    #[schemars(range(min = 1, max = 10))]
    pub replicas: i32,

    /// The container image.
    pub image: String,

    /// The application's version.
    pub version: String,
''')
edit("api/src/example/v1/application.rs", CONDITIONS, CONDITIONS + '''
    /// How many replicas are available.
    #[serde(default)]
    pub available_replicas: i32,
''')
edit("config/samples/example_v1_application.yaml", "  size: 1\n",
     "  size: 1\n  replicas: 3\n  image: nginx:1.27\n  version: \"1.0\"\n")

# Every shape of field.
edit("api/src/shapes/v1/shape.rs", SIZE, SIZE + '''
    /// An optional description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Labels to put on what the resource creates.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,

    /// The database to use.
    #[serde(default)]
    pub database: Database,

    /// The service tier.
    #[serde(default)]
    pub tier: Tier,

    /// The ports to expose.
    #[serde(default)]
    pub ports: Vec<Port>,
''')
pathlib.Path("api/src/shapes/v1/shape.rs").write_text(pathlib.Path("api/src/shapes/v1/shape.rs").read_text() + '''
/// Where the data lives.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Database {
    /// The database host.
    pub host: String,
    /// The database port.
    pub port: Option<u16>,
}

/// A service tier.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Copy, Debug, Default, PartialEq, schemars::JsonSchema,
)]
pub enum Tier {
    /// Best effort.
    #[default]
    Free,
    /// With a support contract.
    Paid,
}

/// A port to expose.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// The port's name.
    pub name: String,
    /// The port number.
    pub container_port: i32,
}
''')
edit("config/samples/shapes_v1_shape.yaml", "  size: 1\n", '''  size: 1
  description: A sample
  labels:
    team: platform
  database:
    host: db.example.com
    port: 5432
  tier: Paid
  ports:
  - name: http
    containerPort: 8080
''')

# The example field removed.
edit("api/src/plain/v1/bare.rs", SIZE, "")
edit("config/samples/plain_v1_bare.yaml", "  size: 1\n", "  {}\n")
edit("config/samples/plain_v1_bare.yaml", "spec:\n  # TODO(user): Add the fields of your spec here.\n  {}\n", "spec: {}\n")

# A second status field.
edit("api/src/report/v1/report.rs", CONDITIONS, CONDITIONS + '''
    /// A short summary of the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
''')
PY

step "create webhook for Application, and fill in its defaulting and validation"
"$rsbuilder" create webhook --group example --version v1 --kind Application \
  --defaulting --programmatic-validation 2>/dev/null
python3 - <<'PY'
import pathlib

MODULE = "operator/src/webhooks/example/v1/application.rs"

def edit(old, new):
    file = pathlib.Path(MODULE)
    text = file.read_text()
    if old not in text:
        raise SystemExit(f"journey: `{old}` not found in {MODULE}")
    file.write_text(text.replace(old, new, 1))

edit("""        // TODO(user): Set the fields users may leave out. The API server gets the difference
        // as a JSON patch. Return `Err(webhook::Denied::new("..."))` to refuse the object.
        Ok(())""", """        if object.spec.replicas == 0 {
            object.spec.replicas = 1;
        }
        Ok(())""")
edit("""        tracing::debug!(name = ?object.metadata.name, "validating a creation");
        Ok(Vec::new())""", """        tracing::debug!(name = ?object.metadata.name, "validating a creation");
        check(object)""")
edit("""        tracing::debug!(name = ?new.metadata.name, "validating an update");
        Ok(Vec::new())""", """        tracing::debug!(name = ?new.metadata.name, "validating an update");
        check(new)""")
edit("""// +rsbuilder:scaffold:webhooks.conversion
""", """/// What the schema cannot express: its minimum keeps negative replicas out of the cluster,
/// but this also guards the objects that reach the webhook some other way.
fn check(object: &Object) -> webhook::Verdict {
    if object.spec.replicas < 1 {
        return Err(webhook::Denied::invalid("replicas must be at least 1"));
    }
    let mut warnings = Vec::new();
    if !object.spec.image.contains(':') {
        warnings.push(format!(
            "image {} has no tag: the latest one is pulled",
            object.spec.image
        ));
    }
    Ok(warnings)
}

// +rsbuilder:scaffold:webhooks.conversion
""")
edit("""        let mut object = Object::new("sample", Spec::default());""", """        let spec = Spec {
            replicas: 1,
            image: "nginx:1.27".into(),
            version: "1.0".into(),
            ..Spec::default()
        };
        let mut object = Object::new("sample", spec);""")
edit("""    // +rsbuilder:scaffold:tests.conversion
""", """    #[tokio::test]
    async fn zero_replicas_are_defaulted_to_one() {
        let mut object = sample();
        object.spec.replicas = 0;
        let review = webhook::review::create(&object);
        let answer = within(webhooks().review(DEFAULTING_PATH, &review))
            .await
            .unwrap();
        assert!(answer.allowed, "denied: {}", answer.message);
        assert_eq!(
            serde_json::to_value(answer.patch.unwrap()).unwrap(),
            serde_json::json!([{"op": "replace", "path": "/spec/replicas", "value": 1}])
        );
    }

    #[tokio::test]
    async fn fewer_than_one_replica_is_denied_on_create_and_update() {
        let mut negative = sample();
        negative.spec.replicas = -1;
        for review in [
            webhook::review::create(&negative),
            webhook::review::update(&sample(), &negative),
        ] {
            let answer = within(webhooks().review(VALIDATION_PATH, &review))
                .await
                .unwrap();
            assert!(!answer.allowed);
            assert_eq!(answer.message, "replicas must be at least 1");
            assert_eq!((answer.reason.as_str(), answer.code), ("Invalid", 422));
        }
    }

    #[tokio::test]
    async fn an_image_without_a_tag_is_admitted_with_a_warning() {
        let mut untagged = sample();
        untagged.spec.image = "nginx".into();
        let review = webhook::review::create(&untagged);
        let answer = within(webhooks().review(VALIDATION_PATH, &review))
            .await
            .unwrap();
        assert!(answer.allowed, "denied: {}", answer.message);
        assert_eq!(
            answer.warnings,
            ["image nginx has no tag: the latest one is pulled"]
        );
    }

    // +rsbuilder:scaffold:tests.conversion
""")
PY

step "edit the kind that runs an image, its controller and its tests; the --ssa kind"
python3 - <<'PY'
import pathlib

def edit(path, old, new):
    file = pathlib.Path(path)
    text = file.read_text()
    if old not in text:
        raise SystemExit(f"journey: `{old}` not found in {path}")
    file.write_text(text.replace(old, new, 1))

# A field of the spec that reaches the pods through the pure Deployment builder.
edit("api/src/web/v1/site.rs", "    pub ports: Vec<corev1::ContainerPort>,\n}\n", '''    pub ports: Vec<corev1::ContainerPort>,

    /// The service account the pods run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}
''')
edit("operator/src/controllers/web/site.rs", "                    containers: vec![container],\n",
     "                    service_account_name: object.spec.service_account_name.clone(),\n"
     "                    containers: vec![container],\n")
edit("config/samples/web_v1_site.yaml", "  image: nginx:1.27\n", "  image: nginx:1.27\n  serviceAccountName: default\n")
test = pathlib.Path("operator/tests/controllers/web/site.rs")
test.write_text(test.read_text() + '''
#[test]
fn the_service_account_reaches_the_pods() {
    let object = object(json!({"serviceAccountName": "site"}), &[], 1);
    let pods = deployment(&object).spec.unwrap().template.spec.unwrap();
    assert_eq!(pods.service_account_name.as_deref(), Some("site"));
}
''')

# The --ssa kind gets another optional field, and keeps applying only what is set.
edit("api/src/ledger/v1/ledger.rs", "    pub size: Option<i32>,\n", '''    pub size: Option<i32>,

    /// The account the ledger books to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
''')
edit("config/samples/ledger_v1_ledger.yaml", "  size: 1\n", "  size: 1\n  account: operations\n")

# A kind that embeds Kubernetes' own types, in both of its versions.
TASK_FIELDS = '''
    /// The Job that runs the task.
    pub job_template: k8s_openapi::api::batch::v1::JobTemplateSpec,

    /// What happens when a run is still going when the next one starts.
    #[serde(default)]
    pub concurrency: Concurrency,

    /// The objects the task reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<k8s_openapi::api::core::v1::ObjectReference>,
}

/// What happens when a run is still going when the next one starts.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
pub enum Concurrency {
    /// The runs go side by side.
    #[default]
    Allow,
    /// The new run is skipped.
    Forbid,
    /// The new run replaces the old one.
    Replace,
}
'''
for version in ["v1", "v2"]:
    types = f"api/src/batch/{version}/task.rs"
    edit(types, "    pub size: i32,\n}\n", "    pub size: i32,\n" + TASK_FIELDS)
    edit(types, "    pub observed_generation: Option<i64>,\n", '''    pub observed_generation: Option<i64>,

    /// When the task last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<metav1::Time>,
''')
    edit(f"config/samples/batch_{version}_task.yaml", "  size: 1\n", '''  size: 1
  concurrency: Forbid
  inputs:
  - kind: ConfigMap
    name: task-input
  jobTemplate:
    metadata:
      labels:
        app: task
    spec:
      template:
        metadata:
          labels:
            app: task
        spec:
          restartPolicy: Never
          containers:
          - name: task
            image: busybox:1.36
            command: ["sh", "-c", "echo done"]
            resources:
              limits:
                memory: 64Mi
''')
PY
# The journeys' own edits must be rustfmt-clean, as a user's editor would leave them.
cargo fmt --all

step "make manifests (rsbuilder installed into bin/ from this checkout)"
# A debug install: with CARGO_TARGET_DIR at rsbuilder's target/, it is the build the tests ran.
make --no-print-directory manifests RSBUILDER_INSTALL="--debug --path $root --quiet rsbuilder" 2>"$work/manifests.err" \
  || { cat "$work/manifests.err"; exit 1; }
test -x bin/rsbuilder-*/bin/rsbuilder
step "the CRD that embeds Kubernetes' types: its size, and the warning of generate"
# Sizes as the API server is sent them (JSON), and of the file. The goal, with every
# description: a version's schema no larger than controller-gen's for a JobTemplateSpec
# (kubebuilder's CronJob tutorial, one version: a 593,281-byte file at 31f7ac08) and under
# 310,000 bytes of JSON (kube and schemars wrote 352,966 before api/src/schema.rs).
crd_size() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys, yaml
path, most_json, most_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = open(path).read()
crd = next(d for d in yaml.safe_load_all(text) if d)
versions = crd["spec"]["versions"]
schema = [len(json.dumps(v["schema"]["openAPIV3Schema"], separators=(",", ":"))) for v in versions]
whole = len(json.dumps(crd, separators=(",", ":")))
print(f"  {path}: {len(text)} bytes of YAML, {whole} of JSON; per version {schema} of JSON")
own = versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["jobTemplate"]
assert own.get("description") == "The Job that runs the task.", own.get("description")
meta = own["properties"]["metadata"]["properties"]
assert sorted(meta) == ["annotations", "finalizers", "labels", "name", "namespace"], sorted(meta)
if max(schema) > most_json or len(text) / len(versions) > most_file:
    raise SystemExit(f"journey: the CRD is larger than its goal ({most_json} of JSON, {most_file} of YAML a version)")
PY
}
crd_size config/crd/bases/batch.example.com_tasks.yaml 310000 593281
grep -q "warning: \`config/crd/bases/batch.example.com_tasks.yaml\` is .* KiB as JSON; its largest fields: v1:spec.jobTemplate" "$work/manifests.err" \
  || { echo "journey: generate did not warn about the CRD over 256 KiB:"; cat "$work/manifests.err"; exit 1; }
step "cargo clippy --locked --all-targets -- -D warnings"
cargo clippy --quiet --locked --all-targets -- -D warnings
step "cargo test --locked"
cargo test --quiet --locked
step "make check-manifests"
make --no-print-directory check-manifests
if command -v "${KUBECTL:-kubectl}" >/dev/null 2>&1; then
  step "kubectl kustomize config/default and config/samples"
  "${KUBECTL:-kubectl}" kustomize config/default >/dev/null
  "${KUBECTL:-kubectl}" kustomize config/samples >/dev/null
else
  echo "note: kubectl not found: the kustomize builds are skipped"
fi
validator="$root/../shared/tools/validate-manifests"
if [[ -x "$validator" ]]; then
  step "validate-manifests (the samples against their CRDs)"
  "$validator" --quiet .
fi
step "Kubernetes' descriptions dropped (KubernetesAtMost(0)): under 256 KiB, and no warning"
sed -i 's/^pub const DESCRIPTIONS: schema::Descriptions = schema::Descriptions::All;/pub const DESCRIPTIONS: schema::Descriptions = schema::Descriptions::KubernetesAtMost(0);/' api/src/lib.rs
grep -q 'KubernetesAtMost(0);' api/src/lib.rs
make --no-print-directory manifests 2>"$work/manifests.err" || { cat "$work/manifests.err"; exit 1; }
crd_size config/crd/bases/batch.example.com_tasks.yaml 60000 230000
if grep -q "warning: \`config/crd/bases/batch.example.com_tasks.yaml\`" "$work/manifests.err"; then
  echo "journey: generate warned about a CRD under 256 KiB"; cat "$work/manifests.err"; exit 1
fi
cargo test --quiet --locked -p journey-operator-api
make --no-print-directory check-manifests
step "the webhook tests of the journey ran"
count="$(cargo test --quiet --locked --lib -- --list 2>/dev/null | grep -c '^webhooks::example::v1::application::tests::.*: test$' || true)"
if [[ "$count" != 8 ]]; then
  echo "journey: 8 webhook tests of Application expected, $count found"
  exit 1
fi
step "the tests of the image kind, the second controller and the --ssa kind ran"
tests="$(cargo test --quiet --locked -- --list 2>/dev/null)"
for test in \
  'web::site::the_service_account_reaches_the_pods: test' \
  'example::application_audit::' \
  'ledger::v1::ledger::tests::unset_fields_are_left_out_of_an_apply: test'; do
  if ! grep -q "$test" <<<"$tests"; then
    echo "journey: no test \`$test\` ran"
    exit 1
  fi
done

# A project made before the runtime read reviews from raw bytes (commit 3b7f4c3): `rsbuilder
# upgrade` replaces its runtime, and the project's own webhook tests still build and pass.
old_commit=3b7f4c3
if git -C "$root" cat-file -e "$old_commit^{commit}" 2>/dev/null; then
  step "a project of rsbuilder $old_commit, upgraded: clippy and its tests"
  mkdir "$work/old"
  git -C "$root" archive "$old_commit" testdata/project-webhooks | tar -x -C "$work/old"
  # Its files take the commit's time; a build of today's project-webhooks (same crate names,
  # same relative paths) in the shared target directory would look newer than them.
  find "$work/old" -type f -exec touch {} +
  cd "$work/old/testdata/project-webhooks"
  "$rsbuilder" upgrade 2>/dev/null
  cargo clippy --quiet --all-targets -- -D warnings
  cargo test --quiet
  # The same project then takes the runtime from crates.io: `edit` drops runtime/ and writes
  # the pin, over a Cargo.toml an older scaffold wrote. Until the crate is published, cargo is
  # pointed at this repository's runtime/, as for the golden projects.
  step "the upgraded project in the registry form: edit --runtime=registry, clippy and its tests"
  "$rsbuilder" edit --runtime=registry 2>/dev/null
  if [[ -e runtime ]] || ! grep -q '^rsbuilder-runtime = "=' Cargo.toml; then
    echo "journey: edit --runtime=registry left runtime/ or wrote no pin"
    exit 1
  fi
  mkdir -p .cargo
  printf '[patch.crates-io]\nrsbuilder-runtime = { path = "%s/runtime" }\n' "$root" >.cargo/config.toml
  cargo clippy --quiet --all-targets -- -D warnings
  cargo test --quiet
  "$rsbuilder" generate --check 2>/dev/null
  passed=7 skipped=0
else
  echo "note: commit $old_commit is not in this clone: the upgrade journey is skipped"
  passed=6 skipped=1
fi

# A project made by rsbuilder at commit 5f6a0c3 (the first with the runtime crate), whose
# config/default has no `replacements` marker, so `create webhook` fails on it. The user edits
# it as users do (a field, an RBAC marker and an error variant in the controller, a Makefile
# variable); `alpha update` installs that rsbuilder from the checkout of the commit the way
# `make rsbuilder` does (RSBUILDER_INSTALL), merges old scaffold, project and new scaffold on a
# branch, and keeps every edit; then `create webhook` works and the project builds, lints, tests
# and regenerates. An edit next to a line the new scaffold changed stops the update with the
# conflict shown and nothing written; --force writes the conflict markers.
update_commit=5f6a0c3
if git -C "$root" cat-file -e "$update_commit^{commit}" 2>/dev/null; then
  step "a project of rsbuilder $update_commit, edited, then alpha update"
  mkdir -p "$work/update-src" "$work/update/otp-operator"
  git -C "$root" archive "$update_commit" | tar -x -C "$work/update-src"
  install="--debug --path $work/update-src --target-dir $work/update-target"
  # The old rsbuilder scaffolds the project; `alpha update` installs it again into the
  # project's bin/, from RSBUILDER_INSTALL, reusing this build's target directory.
  cargo install --quiet --locked --root "$work/update-bin" $install
  cd "$work/update/otp-operator"
  old="$work/update-bin/bin/rsbuilder"
  "$old" init --domain learn.com 2>/dev/null
  "$old" create api --group appotp --version v1 --kind AppOTP 2>/dev/null
  if "$rsbuilder" create webhook --group appotp --version v1 --kind AppOTP --defaulting 2>"$work/update.err"; then
    echo "journey: create webhook worked on the old scaffold; the journey tests nothing"; exit 1
  fi
  grep -q 'marker `# +rsbuilder:scaffold:replacements` not found' "$work/update.err"
  git init --quiet && git add -A
  git -c user.name=journey -c user.email=journey@example.com commit --quiet -m scaffold
  base_branch="$(git branch --show-current)"
  python3 - <<'PY'
import pathlib
def edit(path, old, new):
    file = pathlib.Path(path)
    text = file.read_text()
    if old not in text:
        raise SystemExit(f"journey: `{old}` not found in {path}")
    file.write_text(text.replace(old, new, 1))
edit("api/src/appotp/v1/app_otp.rs", "    pub size: i32,\n}",
     "    pub size: i32,\n    /// Where the instances run.\n"
     "    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n"
     "    pub region: Option<String>,\n}")
controller = "operator/src/controllers/appotp/app_otp.rs"
edit(controller, "appotps/finalizers,verbs=update\n",
     "appotps/finalizers,verbs=update\n"
     "// +rsbuilder:rbac:groups=\"\",resources=configmaps,verbs=get;list;watch\n")
edit(controller, "    Finalizer(#[source] Box<finalizer::Error<Error>>),\n",
     "    Finalizer(#[source] Box<finalizer::Error<Error>>),\n"
     "    /// The spec asks for what cannot be done.\n"
     "    #[error(\"invalid spec: {0}\")]\n    InvalidSpec(String),\n")
edit("Makefile", "IMG ?= controller:latest", "IMG ?= registry.example.com/otp:dev")
PY
  git -c user.name=journey -c user.email=journey@example.com commit --quiet -am "the user's edits"
  RSBUILDER_INSTALL="$install" "$rsbuilder" alpha update 2>"$work/update.err" || { cat "$work/update.err"; exit 1; }
  rm -rf "$work/update-target"
  grep -q "^installing rsbuilder 0.1.0: cargo install --locked --root $PWD/bin/rsbuilder-0.1.0 $install\$" "$work/update.err"
  [[ -x bin/rsbuilder-0.1.0/bin/rsbuilder ]]
  [[ "$(git branch --show-current)" == rsbuilder-update-from-0.1.0-to-0.1.0 ]]
  [[ -z "$(git status --porcelain)" ]]
  grep -q 'pub region: Option<String>,' api/src/appotp/v1/app_otp.rs
  grep -q 'resources=configmaps,verbs=get;list;watch' operator/src/controllers/appotp/app_otp.rs
  grep -q 'InvalidSpec(String),' operator/src/controllers/appotp/app_otp.rs
  grep -q '^IMG ?= registry.example.com/otp:dev$' Makefile
  grep -q '^# +rsbuilder:scaffold:replacements$' config/default/kustomization.yaml
  grep -q '^  - configmaps$' config/rbac/role.yaml
  "$rsbuilder" create webhook --group appotp --version v1 --kind AppOTP --defaulting --programmatic-validation 2>/dev/null
  cargo clippy --quiet --locked --all-targets -- -D warnings
  cargo test --quiet --locked
  "$rsbuilder" generate --check 2>/dev/null

  step "alpha update with an edit the new scaffold conflicts with: stops, writes nothing"
  git checkout --quiet --force "$base_branch"
  git clean --quiet --force -d
  git branch --quiet -D rsbuilder-update-from-0.1.0-to-0.1.0
  edit_line='    tracing::info!(region = ?object.spec.region, "applying");'
  sed -i "s|^    // report the outcome in the conditions below.\$|&\n$edit_line|" operator/src/controllers/appotp/app_otp.rs
  grep -qF "$edit_line" operator/src/controllers/appotp/app_otp.rs
  git -c user.name=journey -c user.email=journey@example.com commit --quiet -am "a reconcile line"
  head="$(git rev-parse HEAD)"
  if "$rsbuilder" alpha update 2>"$work/update.err"; then
    echo "journey: alpha update merged a conflicting edit"; exit 1
  fi
  grep -q '^error: the update from rsbuilder 0.1.0 to 0.1.0 conflicts with your changes in 1 file, and wrote nothing:$' "$work/update.err"
  grep -qF "$edit_line" "$work/update.err"
  grep -q '^<<<<<<< your project$' "$work/update.err"
  [[ -z "$(git status --porcelain)" && "$(git rev-parse HEAD)" == "$head" ]]
  [[ -z "$(git branch --list 'rsbuilder-update-*')" ]]
  "$rsbuilder" alpha update --force 2>"$work/update.err" || { cat "$work/update.err"; exit 1; }
  grep -q '^<<<<<<< your project$' operator/src/controllers/appotp/app_otp.rs
  grep -q '^IMG ?= registry.example.com/otp:dev$' Makefile
  passed=$((passed + 1))
else
  echo "note: commit $update_commit is not in this clone: the alpha update journey is skipped"
  skipped=$((skipped + 1))
fi
echo "journeys: $passed passed, 0 failed, $skipped skipped"
