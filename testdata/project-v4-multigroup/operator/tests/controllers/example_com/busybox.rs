//! Tests of the Busybox controller: the Deployment it wants, the conditions it reads from
//! the Deployment's status, and its reconciles against a mocked API server. Objects are built
//! from JSON, so that the tests keep compiling as the spec grows.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use k8s_openapi::api::apps::v1 as appsv1;
use kube::Resource;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use project_v4_multigroup::controllers::example_com::busybox::COMMAND;
use project_v4_multigroup::controllers::example_com::busybox::Context;
use project_v4_multigroup::controllers::example_com::busybox::DEFAULT_IMAGE;
use project_v4_multigroup::controllers::example_com::busybox::FINALIZER;
use project_v4_multigroup::controllers::example_com::busybox::NAME;
use project_v4_multigroup::controllers::example_com::busybox::RUN_AS_USER;
use project_v4_multigroup::controllers::example_com::busybox::deployment;
use project_v4_multigroup::controllers::example_com::busybox::observe;
use project_v4_multigroup::controllers::example_com::busybox::reconcile;

use crate::support::{ApiServer, expect, expect_no_more, mocked_client, within};

type Object = ::project_v4_multigroup_api::example_com::v1alpha1::busybox::Busybox;

/// A transition time in the past, for conditions that are already set.
const EARLIER: &str = "2026-01-01T00:00:00Z";

fn context() -> (Arc<Context>, ApiServer) {
    let (client, server) = mocked_client();
    (Arc::new(Context::new(client)), server)
}

/// The test object with `spec`, at `generation`, with `finalizers`.
fn object(spec: Value, finalizers: &[&str], generation: i64) -> Object {
    serde_json::from_value(json!({
        "apiVersion": Object::api_version(&()),
        "kind": Object::kind(&()),
        "metadata": {
            "name": "test",
            "namespace": "default",
            "uid": "6a0e7a5e-0000-4000-8000-000000000001",
            "generation": generation,
            "finalizers": finalizers,
        },
        "spec": spec,
    }))
    .expect("a valid object")
}

/// A spec with every field set.
fn full_spec() -> Value {
    json!({
        "size": 3,
        "image": "registry.example.com/app:2.0",
        "env": [{"name": "LOG_LEVEL", "value": "debug"}],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "10m"}},
    })
}

/// The Deployment as the API server returns it after an apply, with `available` of its pods
/// available.
fn applied(desired: &appsv1::Deployment, replicas: i32, available: i32) -> Value {
    let mut deployment = serde_json::to_value(desired).unwrap();
    deployment["metadata"]["generation"] = json!(1);
    deployment["status"] = json!({
        "observedGeneration": 1,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": available,
        "availableReplicas": available,
    });
    deployment
}

fn deployments_path() -> String {
    "/apis/apps/v1/namespaces/default/deployments/test".into()
}

fn path() -> String {
    format!("{}/test", Object::url_path(&(), Some("default")))
}

#[test]
fn the_deployment_carries_every_field_of_the_spec() {
    let object = object(full_spec(), &[FINALIZER], 1);
    let deployment = serde_json::to_value(deployment(&object)).unwrap();
    assert_eq!(deployment["metadata"]["name"], "test");
    assert_eq!(deployment["metadata"]["namespace"], "default");
    assert_eq!(
        deployment["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": Object::api_version(&()),
            "kind": Object::kind(&()),
            "name": "test",
            "uid": "6a0e7a5e-0000-4000-8000-000000000001",
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 3);
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "registry.example.com/app:2.0");
    assert_eq!(container["env"], full_spec()["env"]);
    assert_eq!(container["ports"], full_spec()["ports"]);
    assert_eq!(container["resources"], full_spec()["resources"]);
    let command: Vec<&str> = COMMAND.to_vec();
    if command.is_empty() {
        assert!(container.get("command").is_none());
    } else {
        assert_eq!(container["command"], json!(command));
    }
    // The restricted Pod Security Standard.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        security.get("runAsUser").and_then(Value::as_i64),
        RUN_AS_USER
    );
    // The pods are the ones the selector selects.
    for (key, value) in spec["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&spec["template"]["metadata"]["labels"][key], value);
    }
}

#[test]
fn an_empty_spec_runs_one_pod_of_the_default_image() {
    let deployment = deployment(&object(json!({}), &[], 1));
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(1));
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));
    assert_eq!(container.env, None);
}

#[test]
fn the_selector_stays_when_the_image_changes() {
    let before = deployment(&object(full_spec(), &[], 1));
    let mut changed = full_spec();
    changed["image"] = json!("registry.example.com/app:3.0");
    let after = deployment(&object(changed, &[], 2));
    assert_eq!(
        before.spec.as_ref().unwrap().selector,
        after.spec.as_ref().unwrap().selector
    );
    assert_ne!(before.spec, after.spec);
}

#[test]
fn conditions_follow_the_deployment_status() {
    let desired = deployment(&object(json!({"size": 2}), &[], 1));
    let summary = |deployment: &Value| {
        let deployment: appsv1::Deployment = serde_json::from_value(deployment.clone()).unwrap();
        observe(&deployment, 2).map(|c| (c.type_, c.status, c.reason))
    };

    assert_eq!(
        summary(&applied(&desired, 2, 2)),
        [
            ("Available", "True", "MinimumReplicasAvailable"),
            ("Progressing", "False", "RolloutComplete"),
            ("Degraded", "False", "AsExpected"),
        ]
    );
    let mut rolling = applied(&desired, 2, 1);
    rolling["status"]["updatedReplicas"] = json!(1);
    assert_eq!(
        summary(&rolling),
        [
            ("Available", "False", "ReplicasUnavailable"),
            ("Progressing", "True", "RollingOut"),
            ("Degraded", "False", "AsExpected"),
        ]
    );
    let mut stalled = rolling.clone();
    stalled["status"]["conditions"] = json!([{
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
    }]);
    assert_eq!(
        summary(&stalled)[2],
        ("Degraded", "True", "ProgressDeadlineExceeded")
    );
}

#[tokio::test]
async fn a_new_resource_gets_the_finalizer_first() {
    let (ctx, mut server) = context();
    let reconciling = tokio::spawn(reconcile(Arc::new(object(json!({}), &[], 1)), ctx));
    let with_finalizer = serde_json::to_value(object(json!({}), &[FINALIZER], 1)).unwrap();
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

/// Answers the status apply a new object gets first, and checks it: `Available=Unknown`
/// while the reconcile starts.
async fn expect_starting(server: &mut ApiServer, new: &Object) {
    let (query, status) = expect(
        server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(new).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    assert!(query.contains(&format!("fieldManager={NAME}")), "{query}");
    let conditions = status["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1, "{status}");
    assert_eq!(
        (
            &conditions[0]["type"],
            &conditions[0]["status"],
            &conditions[0]["reason"]
        ),
        (
            &json!("Available"),
            &json!("Unknown"),
            &json!("Reconciling")
        )
    );
    assert_eq!(conditions[0]["message"], "Starting reconciliation");
    assert_eq!(conditions[0]["observedGeneration"], 1);
}

#[tokio::test]
async fn a_missing_deployment_is_created_and_its_state_reported() {
    let (ctx, mut server) = context();
    let new = object(full_spec(), &[FINALIZER], 1);
    let desired = deployment(&new);
    let reconciling = tokio::spawn(reconcile(Arc::new(new.clone()), ctx));
    expect_starting(&mut server, &new).await;

    let (query, body) = expect(&mut server, Method::PATCH, &deployments_path(), |_| {
        applied(&desired, 3, 3)
    })
    .await;
    assert!(query.contains(&format!("fieldManager={NAME}")), "{query}");
    assert!(query.contains("force=true"), "{query}");
    assert_eq!(body, serde_json::to_value(&desired).unwrap());

    let (_, mut status) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(&new).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    for condition in status["status"]["conditions"].as_array_mut().unwrap() {
        let time = condition["lastTransitionTime"].take();
        assert!(time.as_str().is_some_and(|t| t.ends_with('Z')), "{time}");
    }
    let conditions: Vec<(&str, &str)> = status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Available", "True"),
            ("Progressing", "False"),
            ("Degraded", "False")
        ]
    );
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(status["status"]["readyReplicas"], 3);
    assert_eq!(status["status"]["availableReplicas"], 3);

    for reason in ["MinimumReplicasAvailable", "AsExpected"] {
        let (_, event) = expect(
            &mut server,
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
            Value::clone,
        )
        .await;
        assert_eq!(
            (&event["reason"], &event["type"]),
            (&json!(reason), &json!("Normal"))
        );
        assert_eq!(event["regarding"]["name"], "test");
    }
    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
    expect_no_more(server).await;
}

/// Answers the next request, which must be `method` `path`, with a `Failure` status of `code`,
/// as the API server refuses a request.
async fn refuse(server: &mut ApiServer, method: Method, path: &str, code: u16, message: &str) {
    let (request, send) = within(server.next_request())
        .await
        .expect("the client is still connected");
    assert_eq!((request.method(), request.uri().path()), (&method, path));
    let status = json!({
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "code": code,
    });
    send.send_response(
        http::Response::builder()
            .status(code)
            .body(kube::client::Body::from(
                serde_json::to_vec(&status).unwrap(),
            ))
            .unwrap(),
    );
}

#[tokio::test]
async fn a_deployment_the_api_server_refuses_is_reported_in_the_status_and_retried() {
    let (ctx, mut server) = context();
    let new = object(full_spec(), &[FINALIZER], 1);
    let reconciling = tokio::spawn(reconcile(Arc::new(new.clone()), ctx));
    expect_starting(&mut server, &new).await;
    let refusal = "deployments.apps \"test\" is forbidden: exceeded quota";
    refuse(
        &mut server,
        Method::PATCH,
        &deployments_path(),
        403,
        refusal,
    )
    .await;

    let (_, status) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(&new).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    let conditions: Vec<(&str, &str, &str)> = status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let message = c["message"].as_str().unwrap();
            assert!(message.contains(refusal), "{message}");
            (
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            ("Available", "False", "DeploymentNotApplied"),
            ("Degraded", "True", "DeploymentNotApplied")
        ]
    );

    let (_, event) = expect(
        &mut server,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Value::clone,
    )
    .await;
    assert_eq!(
        (&event["reason"], &event["type"]),
        (&json!("DeploymentNotApplied"), &json!("Warning"))
    );
    assert!(event["note"].as_str().unwrap().contains(refusal), "{event}");
    // The reconcile fails, so that the runner retries it with backoff.
    let error = within(reconciling).await.unwrap().unwrap_err();
    assert!(error.to_string().contains(refusal), "{error}");
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_refused_update_keeps_the_status_it_owns_and_reports_degraded() {
    let (ctx, mut server) = context();
    let mut changed = object(full_spec(), &[FINALIZER], 2);
    changed.status = Some(
        serde_json::from_value(json!({
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "3 of 3 pods are available", "lastTransitionTime": EARLIER},
                {"type": "Progressing", "status": "False", "reason": "RolloutComplete",
                 "message": "the Deployment runs the current spec", "lastTransitionTime": EARLIER},
                {"type": "Degraded", "status": "False", "reason": "AsExpected",
                 "message": "the Deployment reports no failure", "lastTransitionTime": EARLIER},
            ],
            "observedGeneration": 1,
            "readyReplicas": 3,
            "availableReplicas": 3,
        }))
        .unwrap(),
    );
    let reconciling = tokio::spawn(reconcile(Arc::new(changed.clone()), ctx));
    let refusal = "admission webhook \"policy.example.com\" denied the request";
    refuse(
        &mut server,
        Method::PATCH,
        &deployments_path(),
        403,
        refusal,
    )
    .await;

    // The status is applied with every field this controller owns, or server-side apply would
    // drop the ones left out; the old pods still serve, so `Available` stays as it was.
    let (_, status) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(&changed).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    let conditions: Vec<(&str, &str, &str)> = status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            ("Available", "True", "MinimumReplicasAvailable"),
            ("Progressing", "False", "RolloutComplete"),
            ("Degraded", "True", "DeploymentNotApplied")
        ]
    );
    assert_eq!(status["status"]["observedGeneration"], 1);
    assert_eq!(status["status"]["readyReplicas"], 3);
    assert_eq!(status["status"]["availableReplicas"], 3);
    let (_, event) = expect(
        &mut server,
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Value::clone,
    )
    .await;
    assert_eq!(event["type"], "Warning");
    within(reconciling).await.unwrap().unwrap_err();
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_spec_change_is_rolled_out() {
    let (ctx, mut server) = context();
    let mut spec = full_spec();
    spec["image"] = json!("registry.example.com/app:3.0");
    let mut changed = object(spec, &[FINALIZER], 2);
    changed.status = Some(
        serde_json::from_value(json!({
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "3 of 3 pods are available", "lastTransitionTime": EARLIER},
                {"type": "Progressing", "status": "False", "reason": "RolloutComplete",
                 "message": "the Deployment runs the current spec", "lastTransitionTime": EARLIER},
                {"type": "Degraded", "status": "False", "reason": "AsExpected",
                 "message": "the Deployment reports no failure", "lastTransitionTime": EARLIER},
            ],
            "observedGeneration": 1,
            "readyReplicas": 3,
            "availableReplicas": 3,
        }))
        .unwrap(),
    );
    let desired = deployment(&changed);
    let reconciling = tokio::spawn(reconcile(Arc::new(changed.clone()), ctx));

    let (_, body) = expect(&mut server, Method::PATCH, &deployments_path(), |_| {
        applied(&desired, 3, 3)
    })
    .await;
    assert_eq!(
        body["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/app:3.0"
    );
    let (_, status) = expect(
        &mut server,
        Method::PATCH,
        &format!("{}/status", path()),
        |patch| {
            let mut object = serde_json::to_value(&changed).unwrap();
            object["status"] = patch["status"].clone();
            object
        },
    )
    .await;
    // The generation is observed; nothing transitioned, so the times stay and no event comes.
    assert_eq!(status["status"]["observedGeneration"], 2);
    for condition in status["status"]["conditions"].as_array().unwrap() {
        assert_eq!(condition["lastTransitionTime"], EARLIER);
        assert_eq!(condition["observedGeneration"], 2);
    }
    assert_eq!(
        within(reconciling).await.unwrap().unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
    expect_no_more(server).await;
}

#[tokio::test]
async fn a_deleted_resource_is_cleaned_up_then_released() {
    let (ctx, mut server) = context();
    let mut deleted = object(json!({}), &[FINALIZER], 1);
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
