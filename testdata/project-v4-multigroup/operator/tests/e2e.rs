//! End-to-end tests against a cluster where the operator runs (`make test-e2e`).
//!
//! `cargo test` skips them: they need the cluster of the current kubeconfig context, with the
//! manager deployed by `make deploy`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};

const NAMESPACE: &str = "project-v4-multigroup-system";
const DEPLOYMENT: &str = "project-v4-multigroup-controller-manager";

#[tokio::test]
#[ignore = "needs a cluster with the operator deployed: run `make test-e2e`"]
async fn the_manager_becomes_available() {
    let client = Client::try_default()
        .await
        .expect("a kubeconfig for the test cluster");
    let deployments: Api<Deployment> = Api::namespaced(client, NAMESPACE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let deployment = deployments
            .get(DEPLOYMENT)
            .await
            .expect("the manager Deployment");
        let available = deployment
            .status
            .and_then(|status| status.available_replicas)
            .unwrap_or(0);
        if available >= 1 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{DEPLOYMENT} is not available after 3 minutes"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
