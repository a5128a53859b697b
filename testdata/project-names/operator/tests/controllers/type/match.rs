//! Reconcile tests of the Match controller. They build their objects from
//! `Spec::default()` and JSON, never from the spec's fields, so they keep compiling and passing
//! as the types change.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::Resource;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use ::names_operator_api::r#type::v1::r#match as types;
use names_operator::controllers::r#type::r#match::Context;
use names_operator::controllers::r#type::r#match::FINALIZER;
use names_operator::controllers::r#type::r#match::NAME;
use names_operator::controllers::r#type::r#match::reconcile;

use crate::support::{ApiServer, expect, expect_no_more, mocked_client, within};

type Object = types::Match;
type Spec = types::MatchSpec;
type Status = types::MatchStatus;

/// A transition time in the past, for conditions that are already set.
const EARLIER: &str = "2026-01-01T00:00:00Z";

fn context() -> (Arc<Context>, ApiServer) {
    let (client, server) = mocked_client();
    (Arc::new(Context::new(client)), server)
}

/// The test object at `generation`, with `finalizers`.
fn object(finalizers: &[&str], generation: i64) -> Object {
    let mut object = Object::new("test", Spec::default());
    object.metadata.namespace = Some("default".into());
    object.metadata.uid = Some("6a0e7a5e-0000-4000-8000-000000000001".into());
    object.metadata.generation = Some(generation);
    object.metadata.finalizers =
        (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect());
    object
}

/// The `Ready` condition the controller sets for `generation`, transitioned at `time`.
fn ready(generation: i64, time: &str) -> Value {
    json!({
        "type": "Ready",
        "status": "True",
        "reason": "Reconciled",
        "message": format!("The {} is reconciled", Object::kind(&())),
        "observedGeneration": generation,
        "lastTransitionTime": time,
    })
}

/// A status as the controller leaves it at `generation`; the fields it does not own keep
/// their defaults.
fn reconciled(generation: i64) -> Status {
    serde_json::from_value(json!({
        "conditions": [ready(generation, EARLIER)],
        "observedGeneration": generation,
    }))
    .expect("a status with the fields the controller owns")
}

/// The URL path of the test object.
fn path() -> String {
    format!("{}/test", Object::url_path(&(), Some("default")))
}

/// The server-side apply body of a status update at `generation`.
fn status_apply(generation: i64, time: &str) -> Value {
    json!({
        "apiVersion": Object::api_version(&()),
        "kind": Object::kind(&()),
        "status": {
            "conditions": [ready(generation, time)],
            "observedGeneration": generation,
        },
    })
}

/// Answers a status apply with the object as the API server would return it.
fn applied(object: &Object, patch: &Value) -> Value {
    let mut object = serde_json::to_value(object).unwrap();
    object["status"] = patch["status"].clone();
    object
}

#[tokio::test]
async fn a_new_resource_gets_the_finalizer_first() {
    let (ctx, mut server) = context();
    let reconciling = tokio::spawn(reconcile(Arc::new(object(&[], 1)), ctx));
    let with_finalizer = serde_json::to_value(object(&[FINALIZER], 1)).unwrap();
    let (_, patch) = expect(&mut server, Method::PATCH, &path(), |_| with_finalizer).await;
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ])
    );
    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::await_change()
    );
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_new_resource_gets_a_ready_status_and_an_event() {
    let (ctx, mut server) = context();
    let new = object(&[FINALIZER], 1);
    let reconciling = tokio::spawn(reconcile(Arc::new(new.clone()), ctx));

    let (query, mut body) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| applied(&new, patch),
    )
    .await;
    assert!(query.contains(&format!("fieldManager={NAME}")), "{query}");
    assert!(query.contains("force=true"), "{query}");
    // The transition time is now: check its form, then the whole body.
    let time = body["status"]["conditions"][0]["lastTransitionTime"].take();
    assert!(time.as_str().is_some_and(|t| t.ends_with('Z')), "{time}");
    let mut want = status_apply(1, "");
    want["status"]["conditions"][0]["lastTransitionTime"] = Value::Null;
    assert_eq!(body, want);

    let (_, event) = expect(
        &mut server,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Value::clone,
    )
    .await;
    assert_eq!(
        (&event["reason"], &event["action"], &event["type"]),
        (&json!("Reconciled"), &json!("Reconcile"), &json!("Normal"))
    );
    assert_eq!(event["regarding"]["name"], "test");
    assert_eq!(event["reportingController"], NAME);

    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
    expect_no_more(server).await;
}

#[tokio::test]
async fn an_unchanged_resource_needs_no_request() {
    let (ctx, server) = context();
    let mut ready = object(&[FINALIZER], 1);
    ready.status = Some(reconciled(1));
    let action = within(reconcile(Arc::new(ready), ctx)).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_spec_change_is_observed_in_the_status_and_the_ready_condition() {
    let (ctx, mut server) = context();
    // The spec changed: the generation went from 1 to 2.
    let mut changed = object(&[FINALIZER], 2);
    changed.status = Some(reconciled(1));
    let reconciling = tokio::spawn(reconcile(Arc::new(changed.clone()), ctx));

    let (_, body) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| applied(&changed, patch),
    )
    .await;
    // Still ready: the transition time stays, and no event is published.
    assert_eq!(body, status_apply(2, EARLIER));
    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_deleted_resource_is_cleaned_up_then_released() {
    let (ctx, mut server) = context();
    let mut deleted = object(&[FINALIZER], 1);
    deleted.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!(EARLIER)).expect("a timestamp"));
    let released = {
        let mut released = deleted.clone();
        released.metadata.finalizers = None;
        serde_json::to_value(released).unwrap()
    };
    let reconciling = tokio::spawn(reconcile(Arc::new(deleted), ctx));

    let (_, event) = expect(
        &mut server,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Value::clone,
    )
    .await;
    assert_eq!(event["reason"], "CleanedUp");
    let (_, patch) = expect(&mut server, Method::PATCH, &path(), |_| released).await;
    assert_eq!(
        patch,
        json!([
            {"op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ])
    );

    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::await_change()
    );
    expect_no_more(server).await;
}
