#!/usr/bin/env bash
# rsbuilder and rsbuilder-runtime as crates.io would receive them:
#   1. `cargo package` of both crates: each is packed and built from its `.crate`;
#   2. rsbuilder installed from its `.crate` into a temporary root (`cargo install --path` of the
#      unpacked crate, with its Cargo.lock), which must still carry the runtime it writes;
#   3. with that binary, an `init` + `create api` project in the default (vendored) form builds
#      with `--locked`, and so does one in the registry form against the packaged runtime (a
#      `[patch.crates-io]` to the unpacked `rsbuilder-runtime` crate, until it is published),
#      whose Cargo.lock cargo completes with the runtime alone (scripts/check-lock.py).
# The builds share target/ with the rest of the tests (CARGO_TARGET_DIR), so the kube stack is
# compiled once.
#
#   scripts/package.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
step() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
runtime_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' runtime/Cargo.toml | head -n 1)"
if [[ "$version" != "$runtime_version" ]]; then
  echo "error: rsbuilder is $version and rsbuilder-runtime $runtime_version: they are released together" >&2
  exit 1
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
work="$(mktemp -d -t rsbuilder-package.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# --allow-dirty: a clean clone (CI) has nothing uncommitted; a working copy packs what is there.
step "cargo package -p rsbuilder-runtime"
cargo package --quiet --allow-dirty -p rsbuilder-runtime
step "cargo package -p rsbuilder"
cargo package --quiet --allow-dirty -p rsbuilder

for crate in rsbuilder rsbuilder-runtime; do
  tar -xzf "$CARGO_TARGET_DIR/package/$crate-$version.crate" -C "$work"
done
tests="$(find "$work/rsbuilder-$version/vendor" \( -name tests.rs -o -name testing.rs \) -print -quit)"
if [[ -n "$tests" ]]; then
  echo "error: rsbuilder's .crate carries the runtime's tests" >&2
  exit 1
fi

step "cargo install rsbuilder from its .crate"
cargo install --quiet --locked --debug --path "$work/rsbuilder-$version" --root "$work/root"
rsbuilder="$work/root/bin/rsbuilder"
"$rsbuilder" version

scaffold() {
  mkdir "$work/$1"
  (cd "$work/$1" && "$rsbuilder" init --domain learn.com --project-name otp-operator "${@:2}" >/dev/null \
    && "$rsbuilder" create api --group appotp --version v1 --kind AppOTP >/dev/null)
}

step "a vendored project of the installed rsbuilder: cargo build --locked"
scaffold vendored
if grep -rq --include='*.rs' -e '#\[test\]' -e '#\[tokio::test' "$work/vendored/runtime"; then
  echo "error: the vendored runtime holds tests" >&2
  exit 1
fi
(cd "$work/vendored" && cargo build --quiet --locked)

step "a registry project against the packaged rsbuilder-runtime: cargo build"
scaffold registry --runtime=registry
mkdir "$work/registry/.cargo"
printf '[patch.crates-io]\nrsbuilder-runtime = { path = "%s" }\n' "$work/rsbuilder-runtime-$version" \
  >"$work/registry/.cargo/config.toml"
cp "$work/registry/Cargo.lock" "$work/registry.lock"
(cd "$work/registry" && cargo build --quiet)
python3 "$root/scripts/check-lock.py" "$work/registry.lock" "$work/registry/Cargo.lock"
# The crates of both projects (one name, two builds) are of no use to later builds.
(cd "$work/vendored" && cargo clean --quiet -p otp-operator -p otp-operator-api) || true
echo "packaged, installed and built: rsbuilder $version, rsbuilder-runtime $version"
