#!/usr/bin/env python3
"""Prints src/names/builtin.rs: Kubernetes' own kinds that a controller can watch, as
k8s-openapi has them for the Kubernetes version rsbuilder targets.

    scripts/builtin-kinds.py ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33/api \
        > src/names/builtin.rs

It reads each type's `impl crate::Resource` (group, version, kind, plural, scope) and leaves
out what cannot be listed and watched: subresources (Scale, Eviction, TokenRequest), the
create-only reviews and Binding.
"""

import os
import re
import sys

NOT_WATCHABLE = {
    "Binding",
    "LocalSubjectAccessReview",
    "SelfSubjectAccessReview",
    "SelfSubjectReview",
    "SelfSubjectRulesReview",
    "SubjectAccessReview",
    "TokenReview",
}

PATTERN = re.compile(
    r'impl crate::Resource for (\w+) \{\s*'
    r'const API_VERSION: &\'static str = "[^"]*";\s*'
    r'const GROUP: &\'static str = "([^"]*)";\s*'
    r'const KIND: &\'static str = "([^"]*)";\s*'
    r'const VERSION: &\'static str = "([^"]*)";\s*'
    r'const URL_PATH_SEGMENT: &\'static str = "([^"]*)";\s*'
    r'type Scope = crate::(\w+);'
)


def main(api_dir):
    rows = []
    for root, _, files in os.walk(api_dir):
        for name in files:
            path = os.path.join(root, name)
            module = os.path.relpath(root, api_dir).replace(os.sep, "::")
            with open(path) as file:
                text = file.read()
            for match in PATTERN.finditer(text):
                _, group, kind, version, plural, scope = match.groups()
                if scope == "SubResourceScope" or kind in NOT_WATCHABLE:
                    continue
                rows.append((group, version, kind, plural, scope == "NamespaceResourceScope", module))
    rows.sort()
    print("//! Kubernetes' own kinds that a controller can watch, from k8s-openapi's types for the")
    print("//! Kubernetes version rsbuilder targets. Written by `scripts/builtin-kinds.py`: do not edit.")
    print()
    print("/// A kind of Kubernetes itself.")
    print("#[derive(Debug, Clone, Copy, PartialEq, Eq)]")
    print("pub struct Builtin {")
    print("    /// The API group; empty for the core group.")
    print("    pub group: &'static str,")
    print("    /// The version.")
    print("    pub version: &'static str,")
    print("    /// The kind.")
    print("    pub kind: &'static str,")
    print("    /// The resource name.")
    print("    pub plural: &'static str,")
    print("    /// Whether its objects live in namespaces.")
    print("    pub namespaced: bool,")
    print("    /// Its module under `k8s_openapi::api`.")
    print("    pub module: &'static str,")
    print("}")
    print()
    print("/// Every watchable kind, by group, version and kind.")
    print("pub const BUILTINS: &[Builtin] = &[")
    for group, version, kind, plural, namespaced, module in rows:
        print("    Builtin {")
        print(f'        group: "{group}",')
        print(f'        version: "{version}",')
        print(f'        kind: "{kind}",')
        print(f'        plural: "{plural}",')
        print(f"        namespaced: {'true' if namespaced else 'false'},")
        print(f'        module: "{module}",')
        print("    },")
    print("];")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
