//! Prints the CustomResourceDefinitions of this crate as a YAML stream, one document per CRD.
//!
//! `rsbuilder generate` (and `make manifests`) run this and write each CRD to
//! `config/crd/bases/<group>_<plural>.yaml`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
// +rsbuilder:scaffold:imports

fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        // +rsbuilder:scaffold:crds
    ]
}

fn main() -> Result<(), serde_yaml::Error> {
    for crd in crds() {
        print!("---\n{}", serde_yaml::to_string(&crd)?);
    }
    Ok(())
}
