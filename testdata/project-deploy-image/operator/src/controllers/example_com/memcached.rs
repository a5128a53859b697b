//! The controller of `Memcached` (`example.com.learn.com/v1alpha1`): it runs the image each
//! Memcached describes as a Deployment of the same name, keeps the Deployment in line with the
//! spec, and reports its state in the status.
//!
//! [`deployment`] is the Deployment a Memcached wants, a pure function of it; `reconcile`
//! applies it with server-side apply and an owner reference (so that it goes when the
//! Memcached goes), and sets the `Available`, `Progressing` and `Degraded` conditions from
//! the Deployment's status. The controller also watches the Deployments it owns, so that their
//! changes trigger a reconcile.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1 as appsv1;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use rsbuilder_runtime::conditions::{self, Change};
use rsbuilder_runtime::controller::{Runner, apply_status, recorder};
use rsbuilder_runtime::{ControllerContext, Registration};

/// The kind this controller reconciles.
type Object = ::memcached_operator_api::example_com::v1alpha1::memcached::Memcached;

/// The controller's name: it labels its metrics and logs, and is its field manager.
pub const NAME: &str = "example.com-memcached";

/// The finalizer this controller keeps on every Memcached until it cleaned up after it.
pub const FINALIZER: &str = "example.com.learn.com/finalizer";

/// The image a Memcached runs when its spec names none (`create api --image`); the CRD
/// defaults `spec.image` to it as well.
pub const DEFAULT_IMAGE: &str = "memcached:1.6.26-alpine3.19";

/// The command of the container (`--image-container-command`); empty keeps the image's own.
pub const COMMAND: &[&str] = &["memcached", "--memory-limit=64", "-o", "modern", "-v"];

/// The user the container runs as (`--run-as-user`); `None` keeps the image's own, which
/// must not be root.
pub const RUN_AS_USER: Option<i64> = Some(1001);

/// The name of the container in the pods.
pub const CONTAINER: &str = "memcached";

/// How often a healthy Memcached is reconciled again, to repair drift.
const RESYNC: Duration = Duration::from_secs(300);
/// How soon a Memcached whose Deployment is not available yet is looked at again.
const WAIT: Duration = Duration::from_secs(10);

// The permissions this controller needs; `rsbuilder generate` writes them to
// config/rbac/role.yaml. Add a marker for every other resource it reads or writes.
// +rsbuilder:rbac:groups=example.com.learn.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
// +rsbuilder:rbac:groups=example.com.learn.com,resources=memcacheds/status,verbs=get;update;patch
// +rsbuilder:rbac:groups=example.com.learn.com,resources=memcacheds/finalizers,verbs=update
// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +rsbuilder:rbac:groups=core,resources=pods,verbs=get;list;watch

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
    /// Publishes Kubernetes events about Memcacheds.
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

/// Runs the controller until the manager stops it; a change to a Deployment it owns
/// reconciles its Memcached. The runner checks the CRD is installed, reports readiness,
/// counts reconciles and retries failures with a growing backoff.
pub async fn run(ctx: ControllerContext) -> anyhow::Result<()> {
    let context = Arc::new(Context::new(ctx.client.clone()));
    let deployments: Api<appsv1::Deployment> = ctx.api();
    Runner::new(NAME, ctx.api::<Object>())
        .configure(|controller| {
            controller.owns(deployments, watcher::Config::default().any_semantic())
        })
        .run(ctx, reconcile, context)
        .await
}

/// The labels of the pods of `object`, which select them: the Memcached's identity only. A
/// Deployment's selector cannot change, so it holds neither the image nor its version.
pub fn selector_labels(object: &Object) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), CONTAINER.to_owned()),
        ("app.kubernetes.io/instance".to_owned(), object.name_any()),
    ])
}

/// The Deployment that runs `object`, as this controller applies it.
pub fn deployment(object: &Object) -> appsv1::Deployment {
    let spec = &object.spec;
    let selector = selector_labels(object);
    let mut labels = selector.clone();
    labels.insert("app.kubernetes.io/managed-by".into(), NAME.into());
    let container = corev1::Container {
        name: CONTAINER.into(),
        image: Some(spec.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into())),
        image_pull_policy: Some("IfNotPresent".into()),
        command: (!COMMAND.is_empty()).then(|| COMMAND.iter().map(|s| (*s).to_owned()).collect()),
        ports: (!spec.ports.is_empty()).then(|| spec.ports.clone()),
        env: (!spec.env.is_empty()).then(|| spec.env.clone()),
        resources: spec.resources.clone(),
        // The restricted Pod Security Standard.
        security_context: Some(corev1::SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: RUN_AS_USER,
            allow_privilege_escalation: Some(false),
            capabilities: Some(corev1::Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    appsv1::Deployment {
        metadata: metav1::ObjectMeta {
            name: Some(object.name_any()),
            namespace: object.namespace(),
            labels: Some(labels.clone()),
            // Deleting the Memcached deletes the Deployment; in a foreground deletion, only
            // once the Deployment is gone.
            owner_references: object.controller_owner_ref(&()).map(|mut owner| {
                owner.block_owner_deletion = Some(true);
                vec![owner]
            }),
            ..Default::default()
        },
        spec: Some(appsv1::DeploymentSpec {
            replicas: Some(spec.size.unwrap_or(1)),
            selector: metav1::LabelSelector {
                match_labels: Some(selector),
                ..Default::default()
            },
            template: corev1::PodTemplateSpec {
                metadata: Some(metav1::ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(corev1::PodSpec {
                    security_context: Some(corev1::PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(corev1::SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A condition of the Memcached, before its transition time is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `Available`, `Progressing` or `Degraded`.
    pub type_: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// Why, for programs.
    pub reason: &'static str,
    /// Why, for people.
    pub message: String,
}

/// The `Available`, `Progressing` and `Degraded` conditions of a Memcached whose Deployment
/// is `deployment`, as the API server returned it, and which wants `replicas` pods.
pub fn observe(deployment: &appsv1::Deployment, replicas: i32) -> [Observed; 3] {
    let status = deployment.status.clone().unwrap_or_default();
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .cloned()
    };
    let available_replicas = status.available_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let current = status.observed_generation >= deployment.metadata.generation;
    let stalled = condition("Progressing").is_some_and(|c| {
        c.status == "False" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    let failing = condition("ReplicaFailure").filter(|c| c.status == "True");

    let available = if available_replicas >= replicas {
        Observed {
            type_: "Available",
            status: "True",
            reason: "MinimumReplicasAvailable",
            message: format!("{available_replicas} of {replicas} pods are available"),
        }
    } else {
        Observed {
            type_: "Available",
            status: "False",
            reason: "ReplicasUnavailable",
            message: format!("{available_replicas} of {replicas} pods are available"),
        }
    };
    let progressing = if current && updated >= replicas && available_replicas >= replicas {
        Observed {
            type_: "Progressing",
            status: "False",
            reason: "RolloutComplete",
            message: "the Deployment runs the current spec".into(),
        }
    } else {
        Observed {
            type_: "Progressing",
            status: "True",
            reason: "RollingOut",
            message: format!("{updated} of {replicas} pods run the current spec"),
        }
    };
    let degraded = match (stalled, failing) {
        (true, _) => Observed {
            type_: "Degraded",
            status: "True",
            reason: "ProgressDeadlineExceeded",
            message: "the rollout made no progress within the Deployment's deadline".into(),
        },
        (false, Some(failure)) => Observed {
            type_: "Degraded",
            status: "True",
            reason: "ReplicaFailure",
            message: failure
                .message
                .unwrap_or_else(|| "pods cannot be created".into()),
        },
        (false, None) => Observed {
            type_: "Degraded",
            status: "False",
            reason: "AsExpected",
            message: "the Deployment reports no failure".into(),
        },
    };
    [available, progressing, degraded]
}

/// Makes the cluster match one Memcached object; behind a finalizer, so that deletion runs [`cleanup`].
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

/// Applies the Deployment, then reports its state.
async fn apply(object: &Object, api: &Api<Object>, ctx: &Context) -> Result<Action, Error> {
    if object
        .status
        .as_ref()
        .is_none_or(|s| s.conditions.is_empty())
    {
        // A new Memcached shows at once that it is being reconciled, before the Deployment
        // exists: `Available=Unknown`, until the state of the Deployment replaces it.
        let starting = conditions::new(
            "Available",
            "Unknown",
            "Reconciling",
            "Starting reconciliation",
            object.metadata.generation,
        );
        let owned = serde_json::json!({ "conditions": [starting] });
        apply_status(api, &object.name_any(), NAME, owned).await?;
    }
    let namespace = object.namespace().unwrap_or_default();
    let deployments: Api<appsv1::Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let desired = deployment(object);
    let applied = match deployments
        .patch(
            &object.name_any(),
            &PatchParams::apply(NAME).force(),
            &Patch::Apply(&desired),
        )
        .await
    {
        Ok(applied) => applied,
        Err(error) => {
            not_applied(object, api, ctx, &error).await;
            return Err(error.into());
        }
    };

    let replicas = object.spec.size.unwrap_or(1);
    let observed = observe(&applied, replicas);
    let generation = object.metadata.generation;
    let deployed = applied.status.clone().unwrap_or_default();
    let ready_replicas = deployed.ready_replicas.unwrap_or(0);
    let available_replicas = deployed.available_replicas.unwrap_or(0);

    // The fields this controller owns, set on a copy of the current status.
    let current = object.status.clone().unwrap_or_default();
    let mut status = current.clone();
    let mut transitions = Vec::new();
    for observation in &observed {
        let condition = conditions::new(
            observation.type_,
            observation.status,
            observation.reason,
            observation.message.clone(),
            generation,
        );
        if conditions::set(&mut status.conditions, condition) == Change::Transitioned {
            transitions.push(observation.clone());
        }
    }
    status.observed_generation = generation;
    status.ready_replicas = Some(ready_replicas);
    status.available_replicas = Some(available_replicas);
    if status != current {
        // Server-side apply of the owned fields alone: this field manager owns these
        // conditions, `observedGeneration` and the replica counts, and nothing else.
        let owned: Vec<&metav1::Condition> = observed
            .iter()
            .filter_map(|observation| conditions::find(&status.conditions, observation.type_))
            .collect();
        let owned = serde_json::json!({
            "conditions": owned,
            "observedGeneration": generation,
            "readyReplicas": ready_replicas,
            "availableReplicas": available_replicas,
        });
        apply_status(api, &object.name_any(), NAME, owned).await?;
    }
    // An event when the application becomes available or not, or degraded or not; rollouts
    // come and go too often to be worth one.
    for transition in transitions.into_iter().filter(|t| t.type_ != "Progressing") {
        let trouble = (transition.type_ == "Available") == (transition.status == "False");
        ctx.recorder
            .publish(
                &Event {
                    type_: if trouble {
                        EventType::Warning
                    } else {
                        EventType::Normal
                    },
                    reason: transition.reason.into(),
                    note: Some(transition.message),
                    action: "Reconcile".into(),
                    secondary: None,
                },
                &object.object_ref(&()),
            )
            .await?;
    }
    let available = observed[0].status == "True";
    Ok(Action::requeue(if available { RESYNC } else { WAIT }))
}

/// Reports a Deployment the API server refused (an admission webhook, a quota, a missing
/// permission) where the user looks: `Available=False` and `Degraded=True` with the error, and
/// a Warning event. The reconcile still fails, and is retried with backoff; a failure to
/// report is logged, not returned, so that the error the user needs is the one retried.
async fn not_applied(object: &Object, api: &Api<Object>, ctx: &Context, error: &kube::Error) {
    let generation = object.metadata.generation;
    let message = format!("the Deployment could not be applied: {error}");
    let current = object.status.clone().unwrap_or_default();
    let mut status = current.clone();
    // A Deployment that was applied before keeps serving with its old spec: it stays as
    // available as last observed. One that never was is not available.
    let mut failed = vec![("Degraded", "True")];
    if conditions::find(&current.conditions, "Available").is_none() {
        failed.insert(0, ("Available", "False"));
    }
    for (type_, value) in failed {
        let condition = conditions::new(
            type_,
            value,
            "DeploymentNotApplied",
            message.clone(),
            generation,
        );
        conditions::set(&mut status.conditions, condition);
    }
    if status != current {
        // Server-side apply drops what this field manager owned and leaves out: the apply
        // carries every field it owns, as `apply` writes them.
        let owned: Vec<&metav1::Condition> = ["Available", "Progressing", "Degraded"]
            .into_iter()
            .filter_map(|type_| conditions::find(&status.conditions, type_))
            .collect();
        let mut owned = serde_json::json!({ "conditions": owned });
        if let Some(observed) = current.observed_generation {
            owned["observedGeneration"] = observed.into();
        }
        if let Some(ready) = current.ready_replicas {
            owned["readyReplicas"] = ready.into();
        }
        if let Some(available) = current.available_replicas {
            owned["availableReplicas"] = available.into();
        }
        if let Err(report) = apply_status(api, &object.name_any(), NAME, owned).await {
            tracing::warn!(%report, "cannot report the failed apply in the status");
        }
    }
    let event = Event {
        type_: EventType::Warning,
        reason: "DeploymentNotApplied".into(),
        note: Some(message),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(report) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        tracing::warn!(%report, "cannot publish the failed apply");
    }
}

/// The work before an object goes away: the finalizer is removed once this succeeds. The
/// Deployment goes with the Memcached: Kubernetes deletes what it owns.
async fn cleanup(object: &Object, ctx: &Context) -> Result<Action, Error> {
    // TODO(user): Delete what this object created outside the cluster.
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
