//! The webhooks of project-v4-multigroup, one module per API group and version.
//!
//! `main.rs` hands them to the manager of `rsbuilder-runtime`, which serves them over HTTPS on
//! `--webhook-port` on every replica. `rsbuilder generate` (`make manifests`) writes
//! `config/webhook/manifests.yaml` from their `+rsbuilder:webhook` markers.

use rsbuilder_runtime::Webhooks;

pub mod crew;

pub mod ship;

pub mod k8s_core;

pub mod k8s_apps;

pub mod example_com;
// +rsbuilder:scaffold:modules

/// Every webhook of the operator.
pub fn all() -> Webhooks {
    let mut webhooks = Webhooks::new();
    crew::v1::captain::register(&mut webhooks);
    ship::v1::destroyer::register(&mut webhooks);
    ship::v2alpha1::cruiser::register(&mut webhooks);
    k8s_core::v1::pod::register(&mut webhooks);
    k8s_apps::v1::deployment::register(&mut webhooks);
    example_com::v1alpha1::memcached::register(&mut webhooks);
    example_com::v1::wordpress::register(&mut webhooks);
    // +rsbuilder:scaffold:webhooks
    webhooks
}
