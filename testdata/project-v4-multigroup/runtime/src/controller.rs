//! Helpers for the controllers a project writes: a check of their API before they start, and
//! the logging of what `Controller::run` reports.

use std::fmt::Debug;
use std::time::Duration;

use kube::Resource;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

/// How long the start-up check waits for the API server.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a controller cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API server does not serve the resource: its CRD is not installed (404).
    #[error(
        "the API server does not serve {resource}: its CRD is not installed; run `make install`"
    )]
    NotInstalled {
        /// `<plural>.<group>`, the CRD's name.
        resource: String,
    },
    /// The manager's service account may not list the resource (403).
    #[error(
        "the manager may not list {resource} ({message}): deploy its RBAC role again (`make deploy`)"
    )]
    Forbidden {
        /// `<plural>.<group>`.
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// The API server answered with another error.
    #[error("the API server refused to list {resource}: {message}")]
    Refused {
        /// `<plural>.<group>`.
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// The API server could not be reached, or did not answer within [`CHECK_TIMEOUT`].
    #[error("the API server is unreachable: {message}")]
    Unreachable {
        /// What went wrong.
        message: String,
    },
}

/// Checks, before a controller starts, that the API server serves the resource of `api` and
/// lets the manager list it, so that a missing CRD is reported at once and by name instead of
/// as a watch that fails over and over.
pub async fn check_api<K>(api: &Api<K>) -> Result<(), StartError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let group = K::group(&());
    let plural = K::plural(&());
    let resource = if group.is_empty() {
        plural.into_owned()
    } else {
        format!("{plural}.{group}")
    };
    match tokio::time::timeout(
        CHECK_TIMEOUT,
        api.list_metadata(&ListParams::default().limit(1)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(status))) => Err(match status.code {
            404 => StartError::NotInstalled { resource },
            403 => StartError::Forbidden {
                resource,
                message: status.message.clone(),
            },
            _ => StartError::Refused {
                resource,
                message: status.message.clone(),
            },
        }),
        Ok(Err(error)) => Err(StartError::Unreachable {
            message: error.to_string(),
        }),
        Err(_) => Err(StartError::Unreachable {
            message: format!("no answer within {CHECK_TIMEOUT:?}"),
        }),
    }
}

/// Logs one item of a `Controller::run` stream at the level it deserves: watch and queue
/// failures are warnings (the controller retries them with backoff, but nothing changes until
/// they stop), runner failures are errors, and reconcile failures, which `error_policy` has
/// already logged, are debug lines, as are successful reconciles.
///
/// ```text
/// controller
///     .run(reconcile, error_policy, context)
///     .for_each(|result| async move { rsbuilder_runtime::controller::report(NAME, &result) })
///     .await;
/// ```
pub fn report<K, E>(
    controller: &str,
    result: &Result<(ObjectRef<K>, Action), controller::Error<E, watcher::Error>>,
) where
    K: Resource,
    K::DynamicType: Debug,
    E: std::error::Error,
{
    match result {
        Ok((object, _)) => tracing::debug!(controller, %object, "reconciled"),
        Err(controller::Error::ReconcilerFailed(error, object)) => {
            tracing::debug!(controller, %object, "reconcile failed: {error}")
        }
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(controller, %object, "object is gone from the cache")
        }
        Err(controller::Error::QueueError(error)) => {
            tracing::warn!(controller, "watch failed, retrying: {error}")
        }
        Err(error @ controller::Error::RunnerError(_)) => {
            tracing::error!(controller, "controller failed: {error}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Client;
    use serde_json::json;
    use tower_test::mock;

    type ApiServer =
        mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

    fn mocked<K>() -> (Api<K>, ApiServer)
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        let (service, handle) =
            mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        (
            Api::namespaced(Client::new(service, "default"), "default"),
            handle,
        )
    }

    /// Answers the list request with `status` and `body`, checking its path and query.
    async fn answer(server: &mut ApiServer, path: &str, status: u16, body: serde_json::Value) {
        let (request, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
            .await
            .expect("a list request within 5 s")
            .expect("the client is connected");
        assert_eq!(request.uri().path(), path);
        assert_eq!(request.uri().query(), Some("&limit=1"));
        send.send_response(
            http::Response::builder()
                .status(status)
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap(),
        );
    }

    fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code})
    }

    #[tokio::test]
    async fn a_served_resource_passes() {
        let (api, mut server) = mocked::<ConfigMap>();
        let checking = tokio::spawn(async move { check_api(&api).await });
        answer(&mut server, "/api/v1/namespaces/default/configmaps", 200,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "items": []})).await;
        crate::testing::within(checking).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_missing_crd_is_told_from_an_unreachable_api_server() {
        let (api, mut server) = mocked::<Deployment>();
        let checking = tokio::spawn(async move { check_api(&api).await });
        answer(
            &mut server,
            "/apis/apps/v1/namespaces/default/deployments",
            404,
            status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        )
        .await;
        let error = crate::testing::within(checking).await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the API server does not serve deployments.apps: its CRD is not installed; run `make install`"
        );

        let (api, mut server) = mocked::<Deployment>();
        let checking = tokio::spawn(async move { check_api(&api).await });
        let (_, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
            .await
            .expect("a list request within 5 s")
            .unwrap();
        send.send_error(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        let error = crate::testing::within(checking).await.unwrap().unwrap_err();
        assert!(matches!(error, StartError::Unreachable { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "the API server is unreachable: ServiceError: connection refused"
        );
    }

    #[tokio::test]
    async fn forbidden_names_the_rbac_role() {
        let (api, mut server) = mocked::<ConfigMap>();
        let checking = tokio::spawn(async move { check_api(&api).await });
        answer(
            &mut server,
            "/api/v1/namespaces/default/configmaps",
            403,
            status(
                403,
                "Forbidden",
                "configmaps is forbidden: User \"system:serviceaccount:x:y\" cannot list resource",
            ),
        )
        .await;
        let error = crate::testing::within(checking).await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the manager may not list configmaps (configmaps is forbidden: User \"system:serviceaccount:x:y\" cannot list resource): deploy its RBAC role again (`make deploy`)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_api_server_that_does_not_answer_times_out() {
        let (api, mut server) = mocked::<ConfigMap>();
        let checking = tokio::spawn(async move { check_api(&api).await });
        let _request = tokio::time::timeout(Duration::from_secs(5), server.next_request())
            .await
            .expect("a list request within 5 s");
        let error = tokio::time::timeout(Duration::from_secs(60), checking)
            .await
            .expect("the check gives up")
            .unwrap()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the API server is unreachable: no answer within 10s"
        );
    }
}
