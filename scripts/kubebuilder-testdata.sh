#!/usr/bin/env bash
# kubebuilder's scripts, run by rsbuilder: the command lists that make kubebuilder's own golden
# projects project-v4-multigroup and project-v4-with-plugins (test/testdata/generate.sh in the
# kubernetes-sigs/kubebuilder repository), with `rsbuilder` in place of `kubebuilder` and every
# flag as kubebuilder's users write it. The external-API commands are left out: their
# --external-api-path, --external-api-domain and --external-api-module name Go packages and Go
# modules. The grafana, helm and autoupdate lines run, and so does `make build-installer`, which
# writes the dist/install.yaml the helm plugin reads. The Makefile's RSBUILDER is the rsbuilder
# on PATH when its version is the project's, so RSBUILDER is put first on PATH for it; its
# `manifests` step compiles the project's crdgen (set CARGO_TARGET_DIR to share the
# dependencies' builds), and kubectl's kustomize builds the install file.
# The Go module steps (go mod init, go mod tidy) have no counterpart. What kubebuilder's
# `make all` and `make build-installer` check after the commands, scripts/test.sh checks of every
# golden project: build, clippy, tests, `rsbuilder generate --check` and the kustomize builds.
#
#   scripts/kubebuilder-testdata.sh RSBUILDER OUTPUT_DIR [PROJECT...]
#
# makes OUTPUT_DIR/<project> for each PROJECT (default: both). The golden test runs it to
# regenerate testdata/project-v4-multigroup and testdata/project-v4-with-plugins.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 RSBUILDER OUTPUT_DIR [PROJECT...]" >&2
  exit 2
fi
kb="$1"
output="$2"
shift 2
# The commands run inside each project: paths given relative to here must still work there.
if [[ "$kb" == */* ]]; then
  kb="$(cd "$(dirname "$kb")" && pwd)/$(basename "$kb")"
fi
mkdir -p "$output"
output="$(cd "$output" && pwd)"
# `rsbuilder` on PATH for the Makefile: the binary given.
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
[[ "$kb" == */* ]] || kb="$(command -v "$kb")"
ln -s "$kb" "$bin/rsbuilder"
projects=("$@")
if ((${#projects[@]} == 0)); then
  projects=(project-v4-multigroup project-v4-with-plugins)
fi

# Runs one rsbuilder command; prints it first, so that a failure names its line.
run() {
  local output
  echo "\$ rsbuilder $*" >&2
  if ! output="$("$kb" "$@" 2>&1)"; then
    echo "$output" >&2
    echo "error: \`rsbuilder $*\` failed in $project" >&2
    return 1
  fi
}

# Runs a make target of the project; prints it first, and its output when it fails.
run_make() {
  local output
  echo "\$ make $*" >&2
  if ! output="$(make --no-print-directory "$@" 2>&1)"; then
    echo "$output" >&2
    echo "error: \`make $*\` failed in $project" >&2
    return 1
  fi
}

scaffold_test_project() {
  local project="$1"
  shift
  local init_flags=("$@")
  mkdir -p "$output/$project"
  cd "$output/$project"
  echo "==> $project" >&2
  run init "${init_flags[@]}" --domain testproject.org --license apache2 --owner "The Kubernetes authors"

  if [[ $project =~ multigroup ]]; then
    run create api --group crew --version v1 --kind Captain --controller=true --resource=true --make=false --controller-name=captain
    run create api --group crew --version v1 --kind Captain --controller=true --resource=false --make=false --controller-name=captain-backup
    run create webhook --group crew --version v1 --kind Captain --defaulting --make=false
    run create webhook --group crew --version v1 --kind Captain --programmatic-validation --make=false

    run create api --group ship --version v1beta1 --kind Frigate --controller=true --resource=true --make=false
    run create api --group ship --version v1 --kind Destroyer --controller=true --resource=true --namespaced=false --make=false
    run create webhook --group ship --version v1 --kind Destroyer --defaulting --make=false
    run create api --group ship --version v2alpha1 --kind Cruiser --controller=true --resource=true --namespaced=false --make=false
    run create webhook --group ship --version v2alpha1 --kind Cruiser --programmatic-validation --make=false

    run create api --group sea-creatures --version v1beta1 --kind Kraken --controller=true --resource=true --make=false
    run create api --group sea-creatures --version v1beta2 --kind Leviathan --controller=true --resource=true --make=false
    run create api --group foo.policy --version v1 --kind HealthCheckPolicy --controller=true --resource=true --make=false
    run create api --group apps --version v1 --kind Deployment --controller=true --resource=false --make=false
    run create api --group foo --version v1 --kind Bar --controller=true --resource=true --make=false
    run create api --group fiz --version v1 --kind Bar --controller=true --resource=true --make=false
    run create webhook --group core --version v1 --kind Pod --programmatic-validation --make=false
    run create webhook --group apps --version v1 --kind Deployment --defaulting --make=false
    run create webhook --group apps --version v1 --kind Deployment --programmatic-validation --make=false

    run create api --group sea-creatures --version v1 --kind Prawn --controller=true --resource=true --ssa --make=false
  fi

  if [[ $project =~ with-plugins ]]; then
    run edit --namespaced --force
  fi

  if [[ $project =~ multigroup ]] || [[ $project =~ with-plugins ]]; then
    run create api --group example.com --version v1alpha1 --kind Memcached --image=memcached:1.6.26-alpine3.19 --image-container-command="memcached,--memory-limit=64,-o,modern,-v" --image-container-port="11211" --run-as-user="1001" --plugins="deploy-image/v1-alpha" --make=false
    run create api --group example.com --version v1alpha1 --kind Busybox --image=busybox:1.36.1 --plugins="deploy-image/v1-alpha" --make=false
    run create webhook --group example.com --version v1alpha1 --kind Memcached --programmatic-validation --make=false
    run create api --group example.com --version v1 --kind Wordpress --controller=true --resource=true  --make=false
    run create api --group example.com --version v2 --kind Wordpress --controller=false --resource=true  --make=false
    run create webhook --group example.com --version v1 --kind Wordpress --conversion --make=false --spoke v2

    run edit --plugins=grafana.kubebuilder.io/v1-alpha
  fi

  if [[ $project =~ with-plugins ]]; then
    PATH="$bin:$PATH" run_make build-installer
    run edit --plugins=helm.kubebuilder.io/v2-alpha
    run edit --plugins=autoupdate.kubebuilder.io/v1-alpha
  fi
  cd - >/dev/null
}

for project in "${projects[@]}"; do
  case "$project" in
    project-v4-multigroup) scaffold_test_project "$project" --plugins="go/v4" --multigroup ;;
    project-v4-with-plugins) scaffold_test_project "$project" --plugins="go/v4" --namespaced ;;
    *)
      echo "error: unknown project \`$project\`: kubebuilder's scripts make project-v4-multigroup and project-v4-with-plugins" >&2
      exit 2
      ;;
  esac
done
