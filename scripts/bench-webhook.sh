#!/usr/bin/env bash
# How the runtime's webhook and metrics servers hold up on this machine, over HTTPS on loopback,
# with wrk (Debian's package, installed when missing) and curl as the clients, each a separate
# process from the server (runtime/examples/webhook_server.rs, built in release):
#   - reviews per second and p50/p99 latency of a 2 KB AdmissionReview (validating and
#     defaulting) and ConversionReview, 16 connections;
#   - scrapes per second of /metrics with a token whose review is cached;
#   - the server's peak memory while 16 reviews of 7 MiB arrive at once, and how many got 429;
#   - the server's memory after a flood of distinct 16 KiB bearer tokens (the longest reviewed),
#     and of 64 KiB ones (refused before any review).
# Future changes must not regress these figures; the README states the last ones.
#
#   scripts/bench-webhook.sh [SECONDS]
set -euo pipefail

seconds="${1:-10}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v wrk >/dev/null 2>&1; then
  echo "wrk is missing: installing it with apt-get" >&2
  apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
fi
cargo build --quiet --release --manifest-path "$root/Cargo.toml" -p rsbuilder-runtime --example webhook_server
work="$(mktemp -d -t rsbuilder-bench-webhook.XXXXXX)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$root/target/release/examples/webhook_server" >"$work/ports" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
  [[ $(wc -l <"$work/ports") -ge 2 ]] && break
  sleep 0.1
done
webhooks="https://$(awk '/^webhooks/ {print $2}' "$work/ports")"
metrics="https://$(awk '/^metrics/ {print $2}' "$work/ports")"

# The bodies: 2 KB reviews, and a 7 MiB one whose object holds a numeric array.
python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
def app(version, extra):
    spec = {"image": "", "env": [{"name": f"VAR_{i}", "value": "x" * 20} for i in range(30)]}
    spec.update(extra)
    return {"apiVersion": f"example.com/{version}", "kind": "Application",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": None},
            "spec": spec}
def admission(obj):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "example.com", "version": "v1", "kind": "Application"},
        "resource": {"group": "example.com", "version": "v1", "resource": "applications"},
        "operation": "CREATE", "userInfo": {"username": "admin"}, "object": obj}}
def conversion(obj):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": "example.com/v1",
        "objects": [obj]}}
def write(name, review):
    with open(f"{work}/{name}", "w") as f:
        json.dump(review, f, separators=(",", ":"))
write("validate.json", admission(app("v1", {"replicas": 2})))
write("mutate.json", admission(app("v1", {})))
write("convert.json", conversion(app("v2", {"scale": "2"})))
small = len(json.dumps(admission(app("v1", {"values": []})), separators=(",", ":")))
count = (7 * 1024 * 1024 - small - 64) // 2
write("large.json", admission(app("v1", {"values": [1] * count})))
EOF

cat >"$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = io.open(os.getenv("BODY"), "rb")
wrk.body = file:read("*a")
file:close()
EOF
cat >"$work/flood.lua" <<'EOF'
-- A distinct bearer token on every request, of TOKEN_BYTES bytes.
local size = tonumber(os.getenv("TOKEN_BYTES"))
local filler = string.rep("t", size - 24)
local count = 0
request = function()
  count = count + 1
  local token = string.format("%012d%012d", math.random(0, 999999999), count) .. filler
  return wrk.format("GET", "/metrics", {["Authorization"] = "Bearer " .. token})
end
EOF

rss() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$server_pid/status"; }

# `wrk` figures of one run: requests per second, p50 and p99 latency.
run_wrk() {
  local label="$1"
  shift
  local out
  out="$(wrk --latency -t2 -c16 -d"${seconds}s" "$@")"
  local rate p50 p99 non2xx
  rate="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
  p50="$(awk '$1 == "50%" {print $2}' <<<"$out")"
  p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
  non2xx="$(awk '/Non-2xx/ {print $NF}' <<<"$out")"
  printf '%-34s %10s req/s   p50 %8s   p99 %8s%s\n' "$label" "$rate" "$p50" "$p99" \
    "${non2xx:+   non-2xx: $non2xx}"
}

echo "== throughput and latency, 2 threads, 16 connections, ${seconds}s each"
BODY="$work/validate.json" run_wrk "validating review ($(wc -c <"$work/validate.json") B)" -s "$work/post.lua" "$webhooks/validate"
BODY="$work/mutate.json" run_wrk "defaulting review ($(wc -c <"$work/mutate.json") B)" -s "$work/post.lua" "$webhooks/mutate"
BODY="$work/convert.json" run_wrk "conversion review ($(wc -c <"$work/convert.json") B)" -s "$work/post.lua" "$webhooks/convert"
run_wrk "/metrics, cached token" -H "Authorization: Bearer valid-prometheus" "$metrics/metrics"

echo
echo "== memory"
echo "idle: $(($(rss VmRSS) / 1024)) MiB resident"
for path in validate mutate; do
  before="$(rss VmRSS)"
  echo 5 >"/proc/$server_pid/clear_refs"
  for _ in $(seq 16); do
    curl -sk -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
      --data-binary "@$work/large.json" "$webhooks/$path" >>"$work/codes-$path" &
  done
  wait $(jobs -p | grep -v "^$server_pid\$") 2>/dev/null || true
  peak="$(rss VmHWM)"
  printf '16 reviews of %s MiB at once on /%s: %s served, %s refused (429), peak growth %s MiB\n' \
    "$(awk -v b="$(wc -c <"$work/large.json")" 'BEGIN { printf "%.1f", b / 1048576 }')" "$path" \
    "$(grep -c '^200$' "$work/codes-$path" || true)" "$(grep -c '^429$' "$work/codes-$path" || true)" \
    "$(((peak - before) / 1024))"
done
for bytes in 16384 65536; do
  before="$(rss VmRSS)"
  TOKEN_BYTES="$bytes" wrk -t2 -c16 -d"${seconds}s" -s "$work/flood.lua" "$metrics/metrics" >"$work/flood-$bytes"
  sent="$(awk '/requests in/ {print $1}' "$work/flood-$bytes")"
  printf '%s distinct tokens of %s KiB: resident %s MiB before, %s MiB after\n' \
    "$sent" "$((bytes / 1024))" "$((before / 1024))" "$(($(rss VmRSS) / 1024))"
done
