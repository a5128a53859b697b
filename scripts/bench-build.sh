#!/usr/bin/env bash
# Where the build time of a generated project goes: a cold `cargo build` of a scaffolded
# project (init + one kind) with `--timings`, then the compile time of chosen dependency groups,
# summed from cargo's timing report. Prints the figures; asserts nothing.
#
#   scripts/bench-build.sh [--release]
#
# RSBUILDER=/path/to/rsbuilder scaffolds with another build of rsbuilder, to compare versions.
#
# The groups are the dependencies the runtime crate could do without, each with the crates
# only it brings in:
#   http2    h2 (and its private dependencies), for --enable-http2;
#   rcgen    rcgen, yasna, time and its parts, for the self-signed metrics certificate;
#   clap     clap_derive, for the derive of the manager's flags;
#   runtime  the rsbuilder-runtime crate itself.
# Unit times overlap on a machine with several cores: compare a group with the total unit time,
# and the wall time with a build of another project on the same machine.
# Needs python3 to read the report.
set -euo pipefail

profile=()
[[ "${1:-}" == "--release" ]] && profile=(--release)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rsbuilder="${RSBUILDER:-}"
if [[ -z "$rsbuilder" ]]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin rsbuilder
  rsbuilder="$root/target/release/rsbuilder"
fi

work="$(mktemp -d -t rsbuilder-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/otp-operator"
cd "$work/otp-operator"
export CARGO_TARGET_DIR="$work/target"
"$rsbuilder" init --domain learn.com 2>/dev/null
"$rsbuilder" create api --group appotp --version v1 --kind AppOTP 2>/dev/null
cargo fetch --quiet

start=$EPOCHREALTIME
cargo build --quiet --timings "${profile[@]}" --bin manager
wall=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
report="$CARGO_TARGET_DIR/cargo-timings/cargo-timing.html"

cargo metadata --quiet --format-version 1 --filter-platform "$(rustc -vV | sed -n 's/^host: //p')" >"$work/metadata.json"

python3 - "$report" "$wall" "$work/metadata.json" <<'PY'
import json, re, sys
report, wall, metadata = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
html = open(report).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
by_name = {}
for unit in units:
    by_name[unit["name"]] = by_name.get(unit["name"], 0.0) + unit["duration"]
total = sum(by_name.values())

# The graph of what the manager needs (normal and build edges), by package name.
names = {p["id"]: p["name"] for p in metadata["packages"]}
edges = {}
for node in metadata["resolve"]["nodes"]:
    deps = set()
    for dep in node["deps"]:
        if any(kind["kind"] != "dev" for kind in dep["dep_kinds"]):
            deps.add(names[dep["pkg"]])
    edges.setdefault(names[node["id"]], set()).update(deps)
root = next(p["name"] for p in metadata["packages"] if any(t["name"] == "manager" for t in p["targets"]))

def reachable(cut_from=None, cut_to=None):
    seen, stack = set(), [root]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for dep in edges.get(name, ()):
            if not (dep == cut_to and (cut_from is None or name == cut_from)):
                stack.append(dep)
    return seen

everything = reachable()
# A group: the crates that leave the build when the named edge is cut.
groups = {
    "http2 (hyper's and hyper-util's h2)": (None, "h2"),
    "rcgen (self-signed certificate)": (None, "rcgen"),
    "clap derive": ("clap", "clap_derive"),
    "axum-server": (None, "axum-server"),
    "kube-lease-manager": (None, "kube-lease-manager"),
    "rsbuilder-runtime itself": (None, "rsbuilder-runtime"),
}
print(f"cold build of the manager: {wall} s wall, {total:.1f} s of compile units ({len(units)} units)")
for group, (cut_from, cut_to) in groups.items():
    if cut_to not in everything:
        print(f"{group:38}    -- not a dependency")
        continue
    gone = everything - reachable(cut_from, cut_to) if cut_to != "rsbuilder-runtime" else {"rsbuilder-runtime"}
    gone = {n for n in gone if by_name.get(n, 0.0) > 0}
    cost = sum(by_name.get(n, 0.0) for n in gone)
    detail = ", ".join(f"{n} {by_name.get(n, 0.0):.1f}" for n in sorted(gone, key=lambda n: -by_name.get(n, 0.0)))
    print(f"{group:38} {cost:6.1f} s ({100 * cost / total:4.1f} %): {detail}")
print("slowest units:")
for name, t in sorted(by_name.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {name:28} {t:6.1f} s")
PY
