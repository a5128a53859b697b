//! The controller of `Defaulter` (`ops.example.com/v1`): it watches every
//! Defaulter and makes the cluster match it.
//!
//! `reconcile` runs whenever one of them changes, and again every five minutes; it must be
//! idempotent. A finalizer gives it the chance to clean up before one is deleted.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Client, Resource, ResourceExt};

use rsbuilder_runtime::conditions::{self, Change};
use rsbuilder_runtime::controller::{Runner, apply_status, publish_normal, recorder};
use rsbuilder_runtime::{ControllerContext, Registration};

/// The kind this controller reconciles.
type Object = ::names_operator_api::ops::v1::defaulter::Defaulter;

/// The controller's name: it labels its metrics and logs, and is its field manager.
pub const NAME: &str = "ops-defaulter";

/// The finalizer this controller keeps on every Defaulter until it cleaned up after it.
pub const FINALIZER: &str = "ops.example.com/finalizer";

/// The condition this controller reports.
const CONDITION: &str = "Ready";

/// How often a healthy Defaulter is reconciled again, to repair drift.
const RESYNC: Duration = Duration::from_secs(300);

// The permissions this controller needs; `rsbuilder generate` writes them to
// config/rbac/role.yaml. Add a marker for every other resource it reads or writes.
// +rsbuilder:rbac:groups=ops.example.com,resources=defaulters,verbs=get;list;watch;create;update;patch;delete
// +rsbuilder:rbac:groups=ops.example.com,resources=defaulters/status,verbs=get;update;patch
// +rsbuilder:rbac:groups=ops.example.com,resources=defaulters/finalizers,verbs=update

/// What can go wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// Adding or removing the finalizer, or the work it guards, failed.
    #[error("finalizer failed: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

/// State shared by every reconcile of this controller.
pub struct Context {
    /// A client for the API server.
    pub client: Client,
    /// Publishes Kubernetes events about Defaulters.
    pub recorder: Recorder,
}

impl Context {
    /// The context of a controller that talks through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            recorder: recorder(client.clone(), NAME),
            client,
        }
    }
}

/// Registers this controller with the manager; `main.rs` calls it.
pub fn registration() -> Registration {
    Registration::new(NAME, run)
}

/// Runs the controller until the manager stops it. The runner checks the CRD is installed,
/// reports readiness, counts reconciles and retries failures with a growing backoff.
pub async fn run(ctx: ControllerContext) -> anyhow::Result<()> {
    let context = Arc::new(Context::new(ctx.client.clone()));
    let api: Api<Object> = ctx.api();
    Runner::new(NAME, api).run(ctx, reconcile, context).await
}

/// Makes the cluster match one Defaulter object; behind a finalizer, so that deletion runs [`cleanup`].
pub async fn reconcile(object: Arc<Object>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<Object> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, object, |event| async {
        match event {
            finalizer::Event::Apply(object) => apply(&object, &api, &ctx).await,
            finalizer::Event::Cleanup(object) => cleanup(&object, &ctx).await,
        }
    })
    .await
    .map_err(|error| Error::Finalizer(Box::new(error)))
}

/// The work for an object that exists.
async fn apply(object: &Object, api: &Api<Object>, ctx: &Context) -> Result<Action, Error> {
    // TODO(user): Create or update what this object describes here (for owned objects, set
    // `object.controller_owner_ref(&())` and apply them with `PatchParams::apply(NAME)`), and
    // report the outcome in the condition below.
    let generation = object.metadata.generation;
    let message = format!("The {} is reconciled", Object::kind(&()));
    let ready = conditions::new(CONDITION, "True", "Reconciled", message, generation);
    let mut status = object.status.clone().unwrap_or_default();
    let change = conditions::set(&mut status.conditions, ready);
    if change.changed() || status.observed_generation != generation {
        // Server-side apply of the fields this controller owns, the condition and
        // `observedGeneration`: what others set in the status stays theirs.
        let ready = conditions::find(&status.conditions, CONDITION);
        let owned = serde_json::json!({"conditions": [ready], "observedGeneration": generation});
        apply_status(api, &object.name_any(), NAME, owned).await?;
    }
    if change == Change::Transitioned {
        let note = format!("{} {} is ready", Object::kind(&()), object.name_any());
        publish_normal(&ctx.recorder, object, "Reconciled", "Reconcile", note).await?;
    }
    Ok(Action::requeue(RESYNC))
}

/// The work before an object goes away: the finalizer is removed once this succeeds.
async fn cleanup(object: &Object, ctx: &Context) -> Result<Action, Error> {
    // TODO(user): Delete what this object created outside the cluster. Objects it owns
    // through owner references are deleted by Kubernetes.
    let note = format!("{} {} is cleaned up", Object::kind(&()), object.name_any());
    publish_normal(&ctx.recorder, object, "CleanedUp", "Cleanup", note).await?;
    Ok(Action::await_change())
}
