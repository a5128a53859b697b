//! A controller of Kubernetes' own `Deployment` (`apps/v1`): it watches
//! every Deployment and reacts to its changes.
//!
//! The objects belong to Kubernetes and to whoever created them: this controller writes no
//! status and adds no finalizer until you decide it should. `reconcile` runs whenever one of
//! them changes, and again every five minutes; it must be idempotent.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use rsbuilder_runtime::controller::{check_api, report};
use rsbuilder_runtime::{Backoff, ControllerContext, Metrics, Registration};

/// The kind this controller reconciles.
type Object = k8s_openapi::api::apps::v1::Deployment;

/// The controller's name: it labels its metrics and logs, and is its field manager.
pub const NAME: &str = "apps-deployment";

/// How often an object is reconciled again, to repair drift.
const RESYNC: Duration = Duration::from_secs(300);
/// The first retry after a failure; each further failure doubles it, up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

// The permissions this controller needs; `rsbuilder generate` writes them to
// config/rbac/role.yaml. Add the verbs your reconcile uses (`update`, `patch`, ...).
// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch

/// What can go wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
}

/// State shared by every reconcile of this controller.
pub struct Context {
    /// A client for the API server.
    pub client: Client,
    /// The manager's metrics.
    pub metrics: Arc<Metrics>,
    /// Retry delays of failed objects.
    backoff: Backoff<Object>,
}

impl Context {
    /// The context of a controller that talks through `client`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        Self {
            client,
            metrics,
            backoff: Backoff::new(BASE_BACKOFF, MAX_BACKOFF),
        }
    }
}

/// Registers this controller with the manager; `main.rs` calls it.
pub fn registration() -> Registration {
    Registration::new(NAME, run)
}

/// Runs the controller until the manager stops it.
pub async fn run(ctx: ControllerContext) -> anyhow::Result<()> {
    let api: Api<Object> = match &ctx.watch_namespace {
        Some(namespace) => Api::namespaced(ctx.client.clone(), namespace),
        None => Api::all(ctx.client.clone()),
    };

    check_api(&api).await?;

    // TODO(user): Watch fewer objects with a label or field selector
    // (`watcher::Config::default().labels("app=web")`): every one of them is cached.
    let controller = Controller::new(api, watcher::Config::default().any_semantic());
    let store = controller.store();
    let ready = ctx.ready.clone();
    tokio::spawn(async move {
        if store.wait_until_ready().await.is_ok() {
            ready.ready();
        }
    });

    let context = Arc::new(Context::new(ctx.client.clone(), ctx.metrics.clone()));
    controller
        .graceful_shutdown_on(ctx.shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move { report(NAME, &result) })
        .await;
    Ok(())
}

/// Reacts to one Deployment.
pub async fn reconcile(object: Arc<Object>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile.start(NAME);
    // TODO(user): Act on the object: read it, and create, update or delete what it needs
    // through `ctx.client`, with `PatchParams::apply(NAME)`. Objects you create for it can carry
    // `object.controller_owner_ref(&())`, so that they go when it goes.
    tracing::info!(
        name = %object.name_any(),
        namespace = object.namespace().as_deref().unwrap_or_default(),
        "reconciling"
    );
    ctx.metrics.reconcile.success(NAME);
    ctx.backoff.succeeded(&ObjectRef::from_obj(&*object));
    Ok(Action::requeue(RESYNC))
}

/// Decides when a failed object is retried: after [`BASE_BACKOFF`], doubled for every
/// consecutive failure, at most [`MAX_BACKOFF`].
pub fn error_policy(object: Arc<Object>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.failed(&object);
    tracing::warn!(object = %object.name_any(), ?delay, "reconcile failed: {error}");
    Action::requeue(delay)
}
