//! End-to-end tests against a cluster where the operator runs (`make test-e2e`).
//!
//! `cargo test` skips them: they need the cluster of the current kubeconfig context, with the
//! manager deployed by `make deploy`. They find the manager by the labels of
//! config/manager/manager.yaml, so a `namespace` or `namePrefix` of config/default moves them
//! with it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

/// The project's name: the `app.kubernetes.io/name` label of its objects.
const PROJECT: &str = "myoperator";

#[tokio::test]
#[ignore = "needs a cluster with the operator deployed: run `make test-e2e`"]
async fn the_manager_becomes_available() {
    let client = Client::try_default()
        .await
        .expect("a kubeconfig for the test cluster");
    let deployments: Api<Deployment> = Api::all(client);
    // The labels of the manager's Deployment, whatever its name and namespace.
    let manager = format!("control-plane=controller-manager,app.kubernetes.io/name={PROJECT}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let found = deployments
            .list(&ListParams::default().labels(&manager))
            .await
            .expect("a list of the manager's Deployments");
        assert!(
            found.items.len() <= 1,
            "more than one Deployment is labelled {manager}"
        );
        if let Some(deployment) = found.items.first() {
            let available = deployment
                .status
                .as_ref()
                .and_then(|status| status.available_replicas)
                .unwrap_or(0);
            if available >= 1 {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Deployment labelled {manager} is available after 3 minutes: {:?}",
            found.items.iter().map(|d| d.name_any()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
