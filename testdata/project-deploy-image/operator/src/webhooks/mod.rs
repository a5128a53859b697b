//! The webhooks of memcached-operator, one module per API group and version.
//!
//! `main.rs` hands them to the manager of `rsbuilder-runtime`, which serves them over HTTPS on
//! `--webhook-port` on every replica. `rsbuilder generate` (`make manifests`) writes
//! `config/webhook/manifests.yaml` from their `+rsbuilder:webhook` markers.

use rsbuilder_runtime::Webhooks;

pub mod k8s_core;

pub mod k8s_apps;
// +rsbuilder:scaffold:modules

/// Every webhook of the operator.
pub fn all() -> Webhooks {
    let mut webhooks = Webhooks::new();
    k8s_core::v1::pod::register(&mut webhooks);
    k8s_apps::v1::deployment::register(&mut webhooks);
    // +rsbuilder:scaffold:webhooks
    webhooks
}
