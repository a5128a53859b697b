//! Reconcile tests of the controller of Kubernetes' own ClusterRole.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;

use memcached_operator::controllers::k8s_rbac::cluster_role::Context;
use memcached_operator::controllers::k8s_rbac::cluster_role::reconcile;

use crate::support::{ApiServer, expect_no_more, mocked_client, within};

type Object = k8s_openapi::api::rbac::v1::ClusterRole;

fn context() -> (Arc<Context>, ApiServer) {
    let (client, server) = mocked_client();
    (Arc::new(Context::new(client)), server)
}

fn object() -> Object {
    let mut object = Object::default();
    object.metadata.name = Some("test".into());
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
