//! The CRDs in `config/crd/bases/` must be what the types in this crate describe: after
//! editing the types, `make manifests` (`rsbuilder generate`) brings them up to date.

use std::collections::BTreeSet;
use std::path::Path;

use ns_operator_api as api;

#[test]
fn crd_manifests_match_the_types() {
    let bases = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd/bases");
    let crds = api::crds().expect("the versions of every kind merge");
    let mut expected = BTreeSet::new();
    for crd in &crds {
        let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
        let want = format!("---\n{}", api::to_yaml(crd).unwrap());
        let have = std::fs::read_to_string(bases.join(&file)).unwrap_or_default();
        assert!(
            have == want,
            "config/crd/bases/{file} does not match the types: run `make manifests`"
        );
        expected.insert(file);
    }
    let stale: Vec<String> = std::fs::read_dir(&bases)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml") && !expected.contains(name))
        .collect();
    assert!(
        stale.is_empty(),
        "config/crd/bases holds CRDs of no kind in this crate: {stale:?}"
    );
}
