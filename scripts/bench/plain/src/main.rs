//! AppOTP's reconcile with kube alone: read the object, hold a finalizer, write the `Ready`
//! condition by server-side apply only when it changes, and publish one event when it turns
//! ready. No leader election, no metrics, no probes: the lower bound a manager is measured
//! against.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};

const NAME: &str = "plain-kube";
const FINALIZER: &str = "appotp.learn.com/finalizer";

/// The AppOTP kind of a scaffolded project, as far as the reconcile reads it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default)]
#[kube(
    group = "appotp.learn.com",
    version = "v1",
    kind = "AppOTP",
    plural = "appotps",
    namespaced,
    status = "AppOTPStatus",
    schema = "disabled"
)]
pub struct AppOTPSpec {
    #[serde(default)]
    pub size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AppOTPStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

struct Context {
    client: Client,
    recorder: Recorder,
}

#[derive(Debug)]
struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(error: kube::Error) -> Self {
        Error(error.to_string())
    }
}

async fn reconcile(object: Arc<AppOTP>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api: Api<AppOTP> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, object, |event| async {
        match event {
            finalizer::Event::Apply(object) => apply(&object, &api, &ctx).await,
            finalizer::Event::Cleanup(_) => Ok(Action::await_change()),
        }
    })
    .await
    .map_err(|error| Error(error.to_string()))
}

async fn apply(object: &AppOTP, api: &Api<AppOTP>, ctx: &Context) -> Result<Action, Error> {
    let generation = object.metadata.generation;
    let status = object.status.clone().unwrap_or_default();
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let was_ready = ready.is_some_and(|c| c.status == "True");
    if !was_ready || status.observed_generation != generation {
        let since = match ready {
            Some(c) if c.status == "True" => c.last_transition_time.clone(),
            _ => Time(k8s_openapi::jiff::Timestamp::now()),
        };
        let condition = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Reconciled".into(),
            message: "The AppOTP is reconciled".into(),
            observed_generation: generation,
            last_transition_time: since,
        };
        let patch = serde_json::json!({
            "apiVersion": "appotp.learn.com/v1",
            "kind": "AppOTP",
            "status": {"conditions": [condition], "observedGeneration": generation},
        });
        api.patch_status(
            &object.name_any(),
            &PatchParams::apply(NAME).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    }
    if !was_ready {
        let event = Event {
            type_: EventType::Normal,
            reason: "Reconciled".into(),
            note: Some(format!("AppOTP {} is ready", object.name_any())),
            action: "Reconcile".into(),
            secondary: None,
        };
        ctx.recorder.publish(&event, &object.object_ref(&())).await?;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_: Arc<AppOTP>, _: &Error, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let reporter = Reporter {
        controller: NAME.into(),
        instance: None,
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
    });
    let api: Api<AppOTP> = match std::env::var("WATCH_NAMESPACE") {
        Ok(namespace) if !namespace.is_empty() => Api::namespaced(client, &namespace),
        _ => Api::all(client),
    };
    Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
    Ok(())
}
