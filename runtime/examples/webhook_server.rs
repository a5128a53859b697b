//! The webhook and metrics servers of the runtime, alone, for `scripts/bench-webhook.sh`: a
//! defaulting, a validating and a converting webhook of a small kind over HTTPS, and `/metrics`
//! over HTTPS behind TokenReview and SubjectAccessReview, answered by an API server stand-in on
//! loopback that authenticates the tokens starting with `valid` and allows every access.
//!
//! ```text
//! cargo run --release -p rsbuilder-runtime --example webhook_server
//! ```
//!
//! prints `webhooks 127.0.0.1:<port>` and `metrics 127.0.0.1:<port>`, then serves until SIGTERM
//! or Ctrl-C.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::header;
use axum::routing::post;
use kube::CustomResource;
use rsbuilder_runtime::Metrics;
use rsbuilder_runtime::metrics::{self, Authorizer};
use rsbuilder_runtime::server::{self, ServeOptions};
use rsbuilder_runtime::tls::{CertResolver, CertSource};
use rsbuilder_runtime::webhook::{Conversion, Defaulter, Denied, Validator, Verdict, Webhooks};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// A kind of the size of a typical custom resource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Application",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
struct ApplicationSpec {
    #[serde(default)]
    replicas: i32,
    #[serde(default)]
    image: String,
    #[serde(default)]
    env: Vec<EnvVar>,
    #[serde(default)]
    values: Vec<i64>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default)]
struct EnvVar {
    name: String,
    value: String,
}

mod v2 {
    use super::*;

    #[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default)]
    #[kube(
        group = "example.com",
        version = "v2",
        kind = "Application",
        namespaced,
        schema = "disabled"
    )]
    #[serde(rename_all = "camelCase")]
    pub(crate) struct ApplicationSpec {
        #[serde(default)]
        pub(crate) scale: String,
        #[serde(default)]
        pub(crate) image: String,
        #[serde(default)]
        pub(crate) env: Vec<EnvVar>,
        #[serde(default)]
        pub(crate) values: Vec<i64>,
    }
}

struct Defaults;

impl Defaulter<Application> for Defaults {
    async fn default(&self, app: &mut Application) -> Result<(), Denied> {
        if app.spec.replicas == 0 {
            app.spec.replicas = 1;
        }
        if app.spec.image.is_empty() {
            app.spec.image = "nginx:1.27".into();
        }
        Ok(())
    }
}

struct Rules;

impl Validator<Application> for Rules {
    async fn validate_create(&self, app: &Application) -> Verdict {
        if app.spec.replicas < 0 {
            return Err(Denied::invalid("replicas must not be negative"));
        }
        Ok(Vec::new())
    }
    async fn validate_update(&self, _: &Application, new: &Application) -> Verdict {
        self.validate_create(new).await
    }
    async fn validate_delete(&self, _: &Application) -> Verdict {
        Ok(Vec::new())
    }
}

fn webhooks() -> Webhooks {
    let mut conversion = Conversion::hub::<Application>();
    conversion.spoke(
        |spoke: v2::Application| {
            Ok(Application {
                metadata: spoke.metadata,
                spec: ApplicationSpec {
                    replicas: spoke.spec.scale.parse().unwrap_or_default(),
                    image: spoke.spec.image,
                    env: spoke.spec.env,
                    values: spoke.spec.values,
                },
            })
        },
        |hub: Application| {
            Ok(v2::Application {
                metadata: hub.metadata,
                spec: v2::ApplicationSpec {
                    scale: hub.spec.replicas.to_string(),
                    image: hub.spec.image,
                    env: hub.spec.env,
                    values: hub.spec.values,
                },
            })
        },
    );
    let mut webhooks = Webhooks::new();
    webhooks
        .defaulting("/mutate", Defaults)
        .validating("/validate", Rules)
        .conversion(conversion);
    webhooks
}

/// A JSON answer.
fn json(value: &serde_json::Value) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(value).expect("JSON"),
    )
        .into_response()
}

/// The API server's answers to TokenReview and SubjectAccessReview.
fn api_server() -> axum::Router {
    axum::Router::new()
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            post(|body: Bytes| async move {
                let review: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                let token = review["spec"]["token"].as_str().unwrap_or_default();
                json(&serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {},
                    "status": {
                        "authenticated": token.starts_with("valid"),
                        "user": {
                            "username": "system:serviceaccount:monitoring:prometheus",
                            "groups": ["system:serviceaccounts"]
                        }
                    }
                }))
            }),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(|| async {
                json(&serde_json::json!({
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {},
                    "status": {"allowed": true}
                }))
            }),
        )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let local = std::net::SocketAddr::from(([127, 0, 0, 1], 0));

    let api = server::bind(local)?;
    let api_url = format!("http://{}", api.local_addr()?);
    let api_task = tokio::spawn(server::serve(
        api,
        api_server(),
        ServeOptions::default(),
        shutdown.clone(),
    ));
    let config = kube::Config::new(api_url.parse()?);
    let client = kube::Client::try_from(config)?;

    let resolver = CertResolver::new(CertSource::SelfSigned)?;
    let tls = resolver.server_config(false)?;

    let webhook_listener = server::bind(local)?;
    println!("webhooks {}", webhook_listener.local_addr()?);
    let webhook_task = tokio::spawn(server::serve(
        webhook_listener,
        webhooks().router(),
        ServeOptions {
            tls: Some(tls.clone()),
            ..ServeOptions::default()
        },
        shutdown.clone(),
    ));

    let metrics_listener = server::bind(local)?;
    println!("metrics {}", metrics_listener.local_addr()?);
    let registry = Arc::new(Metrics::default());
    registry.reconcile.success("application");
    let metrics_task = tokio::spawn(server::serve(
        metrics_listener,
        metrics::router(registry, Some(Authorizer::new(client))),
        ServeOptions {
            tls: Some(tls),
            ..ServeOptions::default()
        },
        shutdown.clone(),
    ));

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    shutdown.cancel();
    for task in [webhook_task, metrics_task, api_task] {
        task.await??;
    }
    Ok(())
}
