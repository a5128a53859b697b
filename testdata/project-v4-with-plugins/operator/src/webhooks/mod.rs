//! The webhooks of project-v4-with-plugins, one module per API group and version.
//!
//! `main.rs` hands them to the manager of `rsbuilder-runtime`, which serves them over HTTPS on
//! `--webhook-port` on every replica. `rsbuilder generate` (`make manifests`) writes
//! `config/webhook/manifests.yaml` from their `+rsbuilder:webhook` markers.

use rsbuilder_runtime::Webhooks;

pub mod example_com;
// +rsbuilder:scaffold:modules

/// Every webhook of the operator.
pub fn all() -> Webhooks {
    let mut webhooks = Webhooks::new();
    example_com::v1alpha1::memcached::register(&mut webhooks);
    example_com::v1::wordpress::register(&mut webhooks);
    // +rsbuilder:scaffold:webhooks
    webhooks
}
