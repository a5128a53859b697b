//! Prometheus metrics, served as `/metrics` in the OpenMetrics text format.
//!
//! The reconcile metrics carry controller-runtime's names, so dashboards and alerts written for
//! kubebuilder operators work unchanged. With `--metrics-secure` (the default) a request must
//! carry a bearer token that the API server authenticates (TokenReview) and authorizes for
//! `get` on the non-resource URL `/metrics` (SubjectAccessReview), as kubebuilder's
//! `WithAuthenticationAndAuthorization` filter does; `config/rbac/metrics_reader_role.yaml`
//! grants that.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric of the manager, registered in one registry.
pub struct Metrics {
    registry: Registry,
    /// Metrics of reconcile loops, labelled by controller.
    pub reconcile: ReconcileMetrics,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconcile = ReconcileMetrics::default();
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile.time.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader_election_master_status",
            "1 while this replica holds the leader election lease",
            leader.clone(),
        );
        Self {
            registry,
            reconcile,
            leader,
        }
    }
}

impl Metrics {
    /// Records whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

/// Reconcile counters and timings.
#[derive(Clone)]
pub struct ReconcileMetrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self {
            total: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 14))
            }),
        }
    }
}

impl ReconcileMetrics {
    /// Starts timing one reconciliation of `controller`; the time is recorded when the returned
    /// guard is dropped.
    pub fn start(&self, controller: &str) -> ReconcileTimer {
        ReconcileTimer {
            histogram: self
                .time
                .get_or_create(&ControllerLabels {
                    controller: controller.to_owned(),
                })
                .clone(),
            started: Instant::now(),
        }
    }

    /// Counts a reconciliation of `controller` that succeeded.
    pub fn success(&self, controller: &str) {
        self.count(controller, "success");
    }

    /// Counts a reconciliation of `controller` that failed.
    pub fn error(&self, controller: &str) {
        self.count(controller, "error");
        self.errors
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .inc();
    }

    fn count(&self, controller: &str, result: &'static str) {
        self.total
            .get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result,
            })
            .inc();
    }
}

/// Records the duration of one reconciliation when dropped.
pub struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// The `/metrics` route; with an authorizer, only for callers the API server lets `get` it.
pub fn router(metrics: Arc<Metrics>, authorizer: Option<Authorizer>) -> Router {
    let router = Router::new().route(
        "/metrics",
        get(|State(metrics): State<Arc<Metrics>>| async move {
            ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode())
        }),
    );
    let router = match authorizer {
        Some(authorizer) => router.layer(middleware::from_fn_with_state(authorizer, authorize)),
        None => router,
    };
    router.with_state(metrics)
}

/// Asks the API server who a bearer token belongs to and whether that user may read `/metrics`.
#[derive(Clone)]
pub struct Authorizer {
    client: Client,
}

impl Authorizer {
    /// An authorizer that asks the API server behind `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// `Ok` when the request may read metrics, else the status to answer with.
    pub async fn check(&self, headers: &HeaderMap, path: &str) -> Result<(), StatusCode> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or(StatusCode::UNAUTHORIZED)?;

        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let review = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| {
                tracing::warn!("TokenReview failed: {error}");
                StatusCode::INTERNAL_SERVER_ERROR
            })?;
        let status = review.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(StatusCode::UNAUTHORIZED);
        }
        let user = status.user.unwrap_or_default();

        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let access = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|error| {
                tracing::warn!("SubjectAccessReview failed: {error}");
                StatusCode::INTERNAL_SERVER_ERROR
            })?;
        match access.status {
            Some(status) if status.allowed => Ok(()),
            _ => Err(StatusCode::FORBIDDEN),
        }
    }
}

async fn authorize(State(authorizer): State<Authorizer>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    match authorizer.check(request.headers(), &path).await {
        Ok(()) => next.run(request).await,
        Err(status) => (status, status.canonical_reason().unwrap_or_default()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{Body, to_bytes};
    use http::Request;
    use serde_json::{Value, json};
    use tower::ServiceExt;
    use tower_test::mock;

    type ApiServer =
        mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

    fn mocked_client() -> (Client, ApiServer) {
        let (service, handle) =
            mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        (Client::new(service, "default"), handle)
    }

    /// Answers the next API request with `response` and returns the request's path and body.
    async fn answer(server: &mut ApiServer, response: Value) -> (String, Value) {
        let (request, send) = server.next_request().await.expect("an API request");
        let path = request.uri().path().to_owned();
        let body = request.into_body().collect_bytes().await.unwrap();
        send.send_response(
            http::Response::builder()
                .body(kube::client::Body::from(
                    serde_json::to_vec(&response).unwrap(),
                ))
                .unwrap(),
        );
        (path, serde_json::from_slice(&body).unwrap())
    }

    async fn scrape(router: Router, token: Option<&str>) -> (StatusCode, String) {
        let mut request = Request::get("/metrics");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let response = router
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn reconcile_metrics_use_controller_runtime_names() {
        let metrics = Metrics::default();
        metrics.reconcile.success("appotp");
        metrics.reconcile.error("appotp");
        drop(metrics.reconcile.start("appotp"));
        metrics.set_leader(true);
        let text = metrics.encode();
        for line in [
            r#"controller_runtime_reconcile_total{controller="appotp",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="appotp",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="appotp"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="appotp"} 1"#,
            "leader_election_master_status 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[tokio::test]
    async fn insecure_metrics_need_no_token() {
        let (status, body) = scrape(router(Arc::default(), None), None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[tokio::test]
    async fn secure_metrics_refuse_requests_without_a_token() {
        let (client, _server) = mocked_client();
        let router = router(Arc::default(), Some(Authorizer::new(client)));
        assert_eq!(scrape(router, None).await.0, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn secure_metrics_ask_the_api_server() {
        let (client, mut server) = mocked_client();
        let router = router(Arc::default(), Some(Authorizer::new(client)));
        let api = tokio::spawn(async move {
            let (path, body) = answer(
                &mut server,
                json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": {"token": "t0ken"},
                    "status": {"authenticated": true, "user": {"username": "system:serviceaccount:monitoring:prometheus", "groups": ["system:serviceaccounts"]}}
                }),
            )
            .await;
            assert_eq!(path, "/apis/authentication.k8s.io/v1/tokenreviews");
            assert_eq!(body["spec"]["token"], "t0ken");

            let (path, body) = answer(
                &mut server,
                json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {}, "status": {"allowed": true}
                }),
            )
            .await;
            assert_eq!(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
            assert_eq!(
                body["spec"]["user"],
                "system:serviceaccount:monitoring:prometheus"
            );
            assert_eq!(
                body["spec"]["nonResourceAttributes"],
                json!({"path": "/metrics", "verb": "get"})
            );
        });
        let (status, _) = scrape(router, Some("t0ken")).await;
        api.await.unwrap();
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn secure_metrics_forbid_users_without_the_role() {
        let (client, mut server) = mocked_client();
        let router = router(Arc::default(), Some(Authorizer::new(client)));
        let api = tokio::spawn(async move {
            answer(&mut server, json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}, "status": {"authenticated": true, "user": {"username": "alice"}}})).await;
            answer(&mut server, json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}, "status": {"allowed": false}})).await;
        });
        let (status, _) = scrape(router, Some("t0ken")).await;
        api.await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn secure_metrics_reject_unknown_tokens() {
        let (client, mut server) = mocked_client();
        let router = router(Arc::default(), Some(Authorizer::new(client)));
        let api = tokio::spawn(async move {
            answer(&mut server, json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}, "status": {"authenticated": false}})).await;
        });
        let (status, _) = scrape(router, Some("forged")).await;
        api.await.unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
}
