//! Reconcile tests of the Registration controller against a mocked API server: each test scripts the
//! requests that `reconcile` must make, in order, answers them, and fails on any other request.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::Client;
use kube::Resource;
use kube::client::Body;
use kube::runtime::controller::Action;
use serde_json::Value;
use tower_test::mock;

use names_operator::controllers::ops::registration::Context;
use names_operator::controllers::ops::registration::Error;
use names_operator::controllers::ops::registration::FINALIZER;
use names_operator::controllers::ops::registration::NAME;
use names_operator::controllers::ops::registration::error_policy;
use names_operator::controllers::ops::registration::reconcile;
use names_operator_api::ops::v1::registration::Registration as RegistrationKind;
use names_operator_api::ops::v1::registration::RegistrationSpec;
use names_operator_api::ops::v1::registration::RegistrationStatus;

type ApiServer = mock::Handle<Request<Body>, Response<Body>>;
type Object = RegistrationKind;
type Spec = RegistrationSpec;
type Status = RegistrationStatus;

fn context() -> (Arc<Context>, ApiServer) {
    let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    (Arc::new(Context::new(client, Arc::default())), server)
}

fn object(finalizers: &[&str]) -> Object {
    let mut object = Object::new("test", Spec { size: 1 });
    object.metadata.namespace = Some("default".into());
    object.metadata.uid = Some("6a0e7a5e-0000-4000-8000-000000000001".into());
    object.metadata.generation = Some(1);
    object.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    object
}

/// Takes the next request, checks its method and path, answers what `respond` makes of the
/// request's body, and returns the request's query and body.
async fn expect(
    server: &mut ApiServer,
    method: Method,
    path: &str,
    respond: impl FnOnce(&Value) -> Value,
) -> (String, Value) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(1), server.next_request())
        .await
        .unwrap_or_else(|_| panic!("no {method} {path} request within a second"))
        .expect("the client is still connected");
    assert_eq!((request.method(), request.uri().path()), (&method, path));
    let query = request.uri().query().unwrap_or_default().to_owned();
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let response = respond(&body);
    send.send_response(
        Response::builder()
            .body(Body::from(serde_json::to_vec(&response).unwrap()))
            .unwrap(),
    );
    (query, body)
}

/// Fails if reconcile made a request that no test step expected.
async fn expect_no_more(mut server: ApiServer) {
    if let Ok(Some((request, _))) =
        tokio::time::timeout(Duration::from_millis(100), server.next_request()).await
    {
        panic!("unexpected request {} {}", request.method(), request.uri());
    }
}

/// The URL path of the test object.
fn path() -> String {
    format!("{}/test", Object::url_path(&(), Some("default")))
}

#[tokio::test]
async fn a_new_resource_gets_the_finalizer_first() {
    let (ctx, mut server) = context();
    let reconciling = tokio::spawn(reconcile(Arc::new(object(&[])), ctx));
    let with_finalizer = serde_json::to_value(object(&[FINALIZER])).unwrap();
    let (_, patch) = expect(&mut server, Method::PATCH, &path(), |_| with_finalizer).await;
    assert!(
        patch.to_string().contains(FINALIZER),
        "finalizer patch: {patch}"
    );
    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_new_resource_gets_a_ready_status_and_an_event() {
    let (ctx, mut server) = context();
    let reconciling = tokio::spawn(reconcile(Arc::new(object(&[FINALIZER])), ctx));

    let (query, body) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(object(&[FINALIZER])).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    assert!(query.contains(&format!("fieldManager={NAME}")), "{query}");
    assert!(query.contains("force=true"), "{query}");
    assert_eq!(body["kind"], Object::kind(&()).as_ref());
    assert_eq!(body["status"]["observedGeneration"], 1);
    assert_eq!(body["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(body["status"]["conditions"][0]["status"], "True");

    let (_, event) = expect(
        &mut server,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Value::clone,
    )
    .await;
    assert_eq!(event["reason"], "Reconciled");
    assert_eq!(event["regarding"]["name"], "test");

    assert_eq!(
        reconciling.await.unwrap().unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
    expect_no_more(server).await;
}

#[tokio::test]
async fn an_unchanged_resource_needs_no_request() {
    let (ctx, server) = context();
    let mut ready = object(&[FINALIZER]);
    ready.status = Some(Status {
        conditions: vec![metav1::Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Reconciled".into(),
            message: format!("The {} is reconciled", Object::kind(&())),
            observed_generation: Some(1),
            last_transition_time: metav1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }],
        observed_generation: Some(1),
    });
    let action = reconcile(Arc::new(ready), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_deleted_resource_is_cleaned_up_then_released() {
    let (ctx, mut server) = context();
    let mut deleted = object(&[FINALIZER]);
    deleted.metadata.deletion_timestamp =
        Some(metav1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
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
    assert!(
        patch.to_string().contains("remove"),
        "finalizer removal: {patch}"
    );

    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    expect_no_more(server).await;
}

#[tokio::test]
async fn failures_are_retried_with_a_growing_backoff() {
    let (ctx, _server) = context();
    let object = Arc::new(object(&[FINALIZER]));
    let error = kube::Error::Service("the API server is down".into());
    let error = Error::Kube(error);
    let delays: Vec<Action> = (0..4)
        .map(|_| error_policy(object.clone(), &error, ctx.clone()))
        .collect();
    assert_eq!(
        delays,
        [500, 1000, 2000, 4000].map(|ms| Action::requeue(Duration::from_millis(ms)))
    );
}
