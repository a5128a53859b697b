//! A controller of Kubernetes' own `Deployment` (`apps/v1`): it watches
//! every Deployment and reacts to its changes.
//!
//! The objects belong to Kubernetes and to whoever created them: this controller writes no
//! status and adds no finalizer until you decide it should. `reconcile` runs whenever one of
//! them changes, and again every five minutes; it must be idempotent.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use rsbuilder_runtime::controller::Runner;
use rsbuilder_runtime::{ControllerContext, Registration};

/// The kind this controller reconciles.
type Object = k8s_openapi::api::apps::v1::Deployment;

/// The controller's name: it labels its metrics and logs, and is its field manager.
pub const NAME: &str = "apps-deployment";

/// How often an object is reconciled again, to repair drift.
const RESYNC: Duration = Duration::from_secs(300);

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
}

impl Context {
    /// The context of a controller that talks through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// Registers this controller with the manager; `main.rs` calls it.
pub fn registration() -> Registration {
    Registration::new(NAME, run)
}

/// Runs the controller until the manager stops it. The runner checks the API is served,
/// reports readiness, counts reconciles and retries failures with a growing backoff.
pub async fn run(ctx: ControllerContext) -> anyhow::Result<()> {
    let context = Arc::new(Context::new(ctx.client.clone()));
    let api: Api<Object> = ctx.api();
    // TODO(user): Watch fewer objects with a label or field selector
    // (`watcher::Config::default().labels("app=web")`): every one of them is cached.
    Runner::new(NAME, api)
        .watcher(watcher::Config::default().any_semantic())
        .run(ctx, reconcile, context)
        .await
}

/// Reacts to one Deployment.
pub async fn reconcile(object: Arc<Object>, _ctx: Arc<Context>) -> Result<Action, Error> {
    // TODO(user): Act on the object: read it, and create, update or delete what it needs
    // through the context's client, with `PatchParams::apply(NAME)`. Objects you create for it
    // can carry `object.controller_owner_ref(&())`, so that they go when it goes.
    tracing::info!(
        name = %object.name_any(),
        namespace = object.namespace().as_deref().unwrap_or_default(),
        "reconciling"
    );
    Ok(Action::requeue(RESYNC))
}
