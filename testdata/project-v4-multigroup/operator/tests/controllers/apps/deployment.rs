//! Reconcile tests of the controller of Kubernetes' own Deployment.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;

use project_v4_multigroup::controllers::apps::deployment::Context;
use project_v4_multigroup::controllers::apps::deployment::Error;
use project_v4_multigroup::controllers::apps::deployment::error_policy;
use project_v4_multigroup::controllers::apps::deployment::reconcile;

use crate::support::{ApiServer, expect_no_more, mocked_client, within};

type Object = k8s_openapi::api::apps::v1::Deployment;

fn context() -> (Arc<Context>, ApiServer) {
    let (client, server) = mocked_client();
    (Arc::new(Context::new(client, Arc::default())), server)
}

fn object() -> Object {
    let mut object = Object::default();
    object.metadata.name = Some("test".into());
    object.metadata.namespace = Some("default".into());
    object
}

#[tokio::test]
async fn an_object_is_reconciled_without_writing_to_it() {
    let (ctx, server) = context();
    let action = within(reconcile(Arc::new(object()), ctx)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    // No status, no finalizer: the object is not this controller's.
    expect_no_more(server).await;
}

#[tokio::test]
async fn failures_are_retried_with_a_growing_backoff() {
    let (ctx, _server) = context();
    let object = Arc::new(object());
    let error = Error::Kube(kube::Error::Service("the API server is down".into()));
    let delays: Vec<Action> = (0..3)
        .map(|_| error_policy(object.clone(), &error, ctx.clone()))
        .collect();
    assert_eq!(
        delays,
        [500, 1000, 2000].map(|ms| Action::requeue(Duration::from_millis(ms)))
    );
}
