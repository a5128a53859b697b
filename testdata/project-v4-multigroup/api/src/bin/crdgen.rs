//! Prints the CustomResourceDefinitions of this crate as a YAML stream, one document per CRD.
//!
//! `rsbuilder generate` (and `make manifests`) run this and write each CRD to
//! `config/crd/bases/<group>_<plural>.yaml`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let crds = match project_v4_multigroup_api::crds() {
        Ok(crds) => crds,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    for crd in crds {
        match project_v4_multigroup_api::to_yaml(&crd) {
            Ok(yaml) => print!("---\n{yaml}"),
            Err(error) => {
                eprintln!("error: cannot print a CRD as YAML: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
