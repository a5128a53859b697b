//! The controller of `HealthCheckPolicy` (`foo.policy.testproject.org/v1`): it watches every
//! HealthCheckPolicy and makes the cluster match it.
//!
//! `reconcile` runs whenever one of them changes, and again every five minutes; it must be
//! idempotent. A finalizer gives it the chance to clean up before one is deleted.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use project_v4_multigroup_api::foo_policy::v1::health_check_policy::HealthCheckPolicy;
use project_v4_multigroup_api::foo_policy::v1::health_check_policy::HealthCheckPolicyStatus;

use rsbuilder_runtime::controller::{check_api, report};
use rsbuilder_runtime::{Backoff, ControllerContext, Metrics, Registration};

/// The kind this controller reconciles.
type Object = HealthCheckPolicy;
/// Its status.
type Status = HealthCheckPolicyStatus;

/// The controller's name: it labels its metrics and logs, and is its field manager.
pub const NAME: &str = "foo.policy-healthcheckpolicy";

/// The finalizer this controller keeps on every HealthCheckPolicy until it cleaned up after it.
pub const FINALIZER: &str = "foo.policy.testproject.org/finalizer";

/// How often a healthy HealthCheckPolicy is reconciled again, to repair drift.
const RESYNC: Duration = Duration::from_secs(300);
/// The first retry after a failure; each further failure doubles it, up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

// The permissions this controller needs; `rsbuilder generate` writes them to
// config/rbac/role.yaml. Add a marker for every other resource it reads or writes.
// +rsbuilder:rbac:groups=foo.policy.testproject.org,resources=healthcheckpolicies,verbs=get;list;watch;create;update;patch;delete
// +rsbuilder:rbac:groups=foo.policy.testproject.org,resources=healthcheckpolicies/status,verbs=get;update;patch
// +rsbuilder:rbac:groups=foo.policy.testproject.org,resources=healthcheckpolicies/finalizers,verbs=update

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
    /// Publishes Kubernetes events about HealthCheckPolicys.
    pub recorder: Recorder,
    /// The manager's metrics.
    pub metrics: Arc<Metrics>,
    /// Retry delays of failed HealthCheckPolicys.
    backoff: Backoff<Object>,
}

impl Context {
    /// The context of a controller that talks through `client`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: NAME.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
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

/// Makes the cluster match one HealthCheckPolicy object; behind a finalizer, so that deletion runs [`cleanup`].
pub async fn reconcile(object: Arc<Object>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile.start(NAME);
    let api: Api<Object> = match object.namespace() {
        Some(namespace) => Api::namespaced(ctx.client.clone(), &namespace),
        None => Api::all(ctx.client.clone()),
    };

    let key = ObjectRef::from_obj(&*object);
    let result = finalizer(&api, FINALIZER, object, |event| async {
        match event {
            finalizer::Event::Apply(object) => apply(&object, &api, &ctx).await,
            finalizer::Event::Cleanup(object) => cleanup(&object, &ctx).await,
        }
    })
    .await
    .map_err(|error| Error::Finalizer(Box::new(error)));
    match &result {
        Ok(_) => {
            ctx.metrics.reconcile.success(NAME);
            ctx.backoff.succeeded(&key);
        }
        Err(_) => ctx.metrics.reconcile.error(NAME),
    }
    result
}

/// The work for an object that exists.
async fn apply(object: &Object, api: &Api<Object>, ctx: &Context) -> Result<Action, Error> {
    // TODO(user): Create or update what this object describes here (for owned objects, set
    // `object.controller_owner_ref(&())` and apply them with `PatchParams::apply(NAME)`), and
    // report the outcome in the conditions below.
    let generation = object.metadata.generation;
    let current = object.status.clone().unwrap_or_default();
    let previous = ready_condition(&current);
    let ready = metav1::Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Reconciled".into(),
        message: format!("The {} is reconciled", Object::kind(&())),
        observed_generation: generation,
        // Keep the transition time while the status stays the same, so that an unchanged
        // status patches to nothing and does not trigger another reconcile.
        last_transition_time: match previous {
            Some(condition) if condition.status == "True" => condition.last_transition_time.clone(),
            _ => metav1::Time(k8s_openapi::jiff::Timestamp::now()),
        },
    };
    let transitioned = previous.is_none_or(|condition| condition.status != ready.status);

    // The fields this controller owns, set on a copy of the current status: the others stay as
    // they are, whoever sets them.
    let mut status = current.clone();
    set_condition(&mut status.conditions, ready.clone());
    status.observed_generation = generation;
    if status != current {
        // Server-side apply of the owned fields alone, so that this field manager owns the
        // `Ready` condition and `observedGeneration`, and nothing else.
        let patch = serde_json::json!({
            "apiVersion": Object::api_version(&()),
            "kind": Object::kind(&()),
            "status": {
                "conditions": [ready],
                "observedGeneration": generation,
            },
        });
        api.patch_status(
            &object.name_any(),
            &PatchParams::apply(NAME).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    }
    if transitioned {
        ctx.recorder
            .publish(
                &Event {
                    type_: EventType::Normal,
                    reason: "Reconciled".into(),
                    note: Some(format!(
                        "{} {} is ready",
                        Object::kind(&()),
                        object.name_any()
                    )),
                    action: "Reconcile".into(),
                    secondary: None,
                },
                &object.object_ref(&()),
            )
            .await?;
    }
    Ok(Action::requeue(RESYNC))
}

/// The work before an object goes away: the finalizer is removed once this succeeds.
async fn cleanup(object: &Object, ctx: &Context) -> Result<Action, Error> {
    // TODO(user): Delete what this object created outside the cluster. Objects it owns
    // through owner references are deleted by Kubernetes.
    ctx.recorder
        .publish(
            &Event {
                type_: EventType::Normal,
                reason: "CleanedUp".into(),
                note: Some(format!(
                    "{} {} is cleaned up",
                    Object::kind(&()),
                    object.name_any()
                )),
                action: "Cleanup".into(),
                secondary: None,
            },
            &object.object_ref(&()),
        )
        .await?;
    Ok(Action::await_change())
}

fn ready_condition(status: &Status) -> Option<&metav1::Condition> {
    status
        .conditions
        .iter()
        .find(|condition| condition.type_ == "Ready")
}

/// Puts `condition` in place of the one of its type, or adds it.
fn set_condition(conditions: &mut Vec<metav1::Condition>, condition: metav1::Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// Decides when a failed object is retried: after [`BASE_BACKOFF`], doubled for every
/// consecutive failure, at most [`MAX_BACKOFF`].
pub fn error_policy(object: Arc<Object>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.failed(&object);
    tracing::warn!(object = %object.name_any(), ?delay, "reconcile failed: {error}");
    Action::requeue(delay)
}
