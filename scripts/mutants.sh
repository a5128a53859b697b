#!/usr/bin/env bash
# The mutation check (cargo-mutants 27.1.0): every mutant of the runtime (runtime/src) and of the
# CLI's guards of the user's files and names (src/apply/, src/names/, src/scaffold/markers.rs,
# src/project/, the diff and Cargo.toml readers src/diff.rs and src/manifest.rs, alpha
# generate's swap, apply/swap.rs, the CEL rule checks of src/validations/, the runtime's forms
# src/runtime/form.rs, the lock's runtime entry src/lockfile.rs and the files rsbuilder keeps,
# src/owned.rs) must make a test fail, within the test's own time limit.
#
#   scripts/mutants.sh                 every mutant; see README "Mutation testing" for its time
#   scripts/mutants.sh --in-diff FILE  only the mutants on lines that the unified diff FILE adds
#   scripts/mutants.sh --file runtime/src/leader.rs    one file (any cargo mutants filter)
#
# The runtime's mutants build and run its unit tests (`--lib`), the CLI's build and run
# rsbuilder's unit tests (`--bin rsbuilder`): the end-to-end suite takes minutes and is not
# needed to catch them, and building only the unit tests halves each mutant's build.
# The source is mutated in place, a file at a time, and restored after each mutant (Ctrl-C
# restores it too): edit nothing while it runs; after a `kill -9`, `git checkout` the file.
# Results: target/mutants/{runtime,cli}/mutants.out (caught.txt, missed.txt, timeout.txt).
# Exits non-zero when a mutant is missed or times out.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! cargo mutants --version >/dev/null 2>&1; then
  echo "error: cargo-mutants is not installed" >&2
  echo "help: cargo install --locked cargo-mutants@27.1.0" >&2
  exit 1
fi

# Most tests wait on sockets or on paused time, not on the CPU: more threads than cores.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
# The `mutants` profile (no debug information) rebuilds and links each mutant sooner; CI sets
# MUTANTS_PROFILE=test to reuse what its test run built.
profile="${MUTANTS_PROFILE:-mutants}"
common=(--in-place --timeout 60 --profile "$profile" --no-shuffle)

status=0
SECONDS=0
cargo mutants "${common[@]}" -p rsbuilder-runtime --cargo-arg=--lib \
  --output target/mutants/runtime "$@" || status=$?
echo "runtime: $SECONDS s"
start=$SECONDS
cargo mutants "${common[@]}" -p rsbuilder --cargo-arg=--bin=rsbuilder \
  --file 'src/apply/*.rs' --file 'src/names/*.rs' --file src/scaffold/markers.rs --file src/project/mod.rs \
  --file src/diff.rs --file src/manifest.rs --file src/validations/mod.rs \
  --file src/runtime/form.rs --file src/lockfile.rs --file src/owned.rs --file src/project/runtime_record.rs \
  --output target/mutants/cli "$@" || status=$?
echo "cli: $((SECONDS - start)) s"
exit "$status"
