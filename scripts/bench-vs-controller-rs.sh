#!/usr/bin/env bash
# Build cost of a generated project next to kube-rs/controller-rs, the reference Rust operator,
# measured in one run on this machine, so that the ratios hold whatever the machine's speed.
#
#   scripts/bench-vs-controller-rs.sh CONTROLLER_RS_CHECKOUT [RUNS]
#
# CONTROLLER_RS_CHECKOUT is a clone of https://github.com/kube-rs/controller-rs (any commit);
# it is copied, never changed. RUNS (default 2) is the number of cold builds of each.
# Prints, for the `init` + `create api` project and for controller-rs:
#   1. a cold debug `cargo build` (each with its own empty target directory);
#   2. the first regeneration of the CRDs right after that cold build: `rsbuilder generate`
#      here, `cargo run --bin crdgen` there;
#   3. regenerating the CRDs after a one-field edit of the types, median of 5: `rsbuilder
#      generate` here, `cargo run --bin crdgen` there;
#   4. the size of the stripped release binary (`strip` is run on controller-rs's, which its
#      release profile does not strip).
# and the ratios. Asserts nothing.
set -euo pipefail

controller_rs="$(cd "${1:?usage: scripts/bench-vs-controller-rs.sh CONTROLLER_RS_CHECKOUT [RUNS]}" && pwd)"
runs="${2:-2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin rsbuilder
rsbuilder="$root/target/release/rsbuilder"

work="$(mktemp -d -t rsbuilder-vs.XXXXXX)"
trap 'rm -rf "$work"' EXIT

seconds() {
  local start=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# The projects.
mkdir "$work/otp-operator"
(cd "$work/otp-operator" && "$rsbuilder" init --domain learn.com 2>/dev/null \
  && "$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null)
cp -R "$controller_rs" "$work/controller-rs"
rm -rf "$work/controller-rs/target" "$work/controller-rs/.git"
(cd "$work/otp-operator" && cargo fetch --quiet)
(cd "$work/controller-rs" && cargo fetch --quiet)

ours_cold=()
theirs_cold=()
first_generate=()
first_crdgen=()
for run in $(seq "$runs"); do
  export CARGO_TARGET_DIR="$work/target-ours-$run"
  ours_cold+=("$(cd "$work/otp-operator" && seconds cargo build)")
  first_generate+=("$(cd "$work/otp-operator" && seconds "$rsbuilder" generate)")
  export CARGO_TARGET_DIR="$work/target-theirs-$run"
  theirs_cold+=("$(cd "$work/controller-rs" && seconds cargo build)")
  first_crdgen+=("$(cd "$work/controller-rs" && seconds cargo run --bin crdgen)")
done

# A one-field edit, then the CRDs regenerated; five times each, alternating the field.
types="$work/otp-operator/api/src/appotp/v1/app_otp.rs"
export CARGO_TARGET_DIR="$work/target-ours-1"
ours_edit=()
for i in 1 2 3 4 5; do
  sed -i "s/    pub size: i32,.*/    pub size: i32,\n    pub extra$i: Option<String>,/" "$types"
  ours_edit+=("$(cd "$work/otp-operator" && seconds "$rsbuilder" generate)")
done
spec="$work/controller-rs/src/controller.rs"
export CARGO_TARGET_DIR="$work/target-theirs-1"
theirs_edit=()
for i in 1 2 3 4 5; do
  sed -i "0,/    pub content: String,/s//    pub content: String,\n    pub extra$i: Option<String>,/" "$spec"
  theirs_edit+=("$(cd "$work/controller-rs" && seconds cargo run --bin crdgen)")
done

# Release binaries.
export CARGO_TARGET_DIR="$work/target-ours-1"
(cd "$work/otp-operator" && cargo build --quiet --release --bin manager)
ours_size=$(stat -c %s "$work/target-ours-1/release/manager")
export CARGO_TARGET_DIR="$work/target-theirs-1"
(cd "$work/controller-rs" && cargo build --quiet --release --bin controller)
cp "$work/target-theirs-1/release/controller" "$work/controller.stripped"
strip "$work/controller.stripped"
theirs_size=$(stat -c %s "$work/controller.stripped")
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

echo
echo "| work | this project | controller-rs | ratio |"
echo "|---|---|---|---|"
row=""
for run in $(seq "$runs"); do
  i=$((run - 1))
  row+="$(ratio "${ours_cold[$i]}" "${theirs_cold[$i]}") "
done
echo "| cold debug build ($runs runs) | ${ours_cold[*]} s | ${theirs_cold[*]} s | $row|"
row=""
for run in $(seq "$runs"); do
  i=$((run - 1))
  row+="$(ratio "${first_generate[$i]}" "${first_crdgen[$i]}") "
done
echo "| first regeneration after the cold build | ${first_generate[*]} s | ${first_crdgen[*]} s | $row|"
ours_median=$(median "${ours_edit[@]}")
theirs_median=$(median "${theirs_edit[@]}")
echo "| CRDs after a one-field edit, median of 5 | $ours_median s | $theirs_median s | $(ratio "$ours_median" "$theirs_median") |"
echo "| stripped release binary | $(mib "$ours_size") | $(mib "$theirs_size") | $(ratio "$ours_size" "$theirs_size") |"
