#!/usr/bin/env python3
"""Checks that cargo completed a project's Cargo.lock only with the runtime crate.

A project that takes rsbuilder-runtime from crates.io, a path or git gets a Cargo.lock from
`rsbuilder init` without the runtime's entry (its checksum or commit is cargo's to write), and
with every other package the build needs. After the first build, the lock must differ from the
scaffolded one by the `rsbuilder-runtime` package and by that name in its dependents' lists:
anything else means the scaffolded lock was incomplete or wrong.

    scripts/check-lock.py SCAFFOLDED_LOCK BUILT_LOCK
"""

import sys
import tomllib

RUNTIME = "rsbuilder-runtime"


def packages(path):
    with open(path, "rb") as file:
        lock = tomllib.load(file)
    return {(p["name"], p["version"]): p for p in lock.get("package", [])}


def without_runtime(package):
    package = dict(package)
    package["dependencies"] = [
        d for d in package.get("dependencies", []) if d.split(" ")[0] != RUNTIME
    ]
    return package


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    before, after = packages(sys.argv[1]), packages(sys.argv[2])
    problems = []
    if any(name == RUNTIME for name, _ in before):
        problems.append(f"the scaffolded lock already has {RUNTIME}")
    if not any(name == RUNTIME for name, _ in after):
        problems.append(f"the built lock has no {RUNTIME}")
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    for key in added:
        if key[0] != RUNTIME:
            problems.append(f"cargo added {key[0]} {key[1]}, which the scaffolded lock lacks")
    for key in removed:
        problems.append(f"cargo removed {key[0]} {key[1]}, which nothing uses")
    for key in sorted(set(before) & set(after)):
        if without_runtime(before[key]) != without_runtime(after[key]):
            problems.append(f"cargo changed the entry of {key[0]} {key[1]}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if not problems:
        print(f"ok: cargo added {RUNTIME} to Cargo.lock, and changed nothing else")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
