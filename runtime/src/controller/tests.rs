use super::*;
use hyper::body::Bytes;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use serde_json::json;
use std::convert::Infallible;
use tower_test::mock;

type ApiServer =
    mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

fn mocked<K>() -> (Api<K>, ApiServer)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    let (service, handle) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    (
        Api::namespaced(Client::new(service, "default"), "default"),
        handle,
    )
}

/// Answers the list request with `status` and `body`, checking its path and query.
async fn answer(server: &mut ApiServer, path: &str, status: u16, body: serde_json::Value) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("a list request within 5 s")
        .expect("the client is connected");
    assert_eq!(request.uri().path(), path);
    assert_eq!(request.uri().query(), Some("&limit=1"));
    send.send_response(
        http::Response::builder()
            .status(status)
            .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap(),
    );
}

fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code})
}

#[tokio::test]
async fn a_served_resource_passes() {
    let (api, mut server) = mocked::<ConfigMap>();
    let checking = tokio::spawn(async move { check_api(&api).await });
    answer(&mut server, "/api/v1/namespaces/default/configmaps", 200,
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "items": []})).await;
    crate::testing::within(checking).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_missing_crd_is_told_from_an_unreachable_api_server() {
    let (api, mut server) = mocked::<Deployment>();
    let checking = tokio::spawn(async move { check_api(&api).await });
    answer(
        &mut server,
        "/apis/apps/v1/namespaces/default/deployments",
        404,
        status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    )
    .await;
    let error = crate::testing::within(checking).await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "the API server does not serve deployments.apps: its CRD is not installed; run `make install`"
    );

    let (api, mut server) = mocked::<Deployment>();
    let checking = tokio::spawn(async move { check_api(&api).await });
    let (_, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("a list request within 5 s")
        .unwrap();
    send.send_error(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    ));
    let error = crate::testing::within(checking).await.unwrap().unwrap_err();
    assert!(matches!(error, StartError::Unreachable { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the API server is unreachable: ServiceError: connection refused"
    );
}

#[tokio::test]
async fn forbidden_names_the_rbac_role() {
    let (api, mut server) = mocked::<ConfigMap>();
    let checking = tokio::spawn(async move { check_api(&api).await });
    answer(
        &mut server,
        "/api/v1/namespaces/default/configmaps",
        403,
        status(
            403,
            "Forbidden",
            "configmaps is forbidden: User \"system:serviceaccount:x:y\" cannot list resource",
        ),
    )
    .await;
    let error = crate::testing::within(checking).await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "the manager may not list configmaps (configmaps is forbidden: User \"system:serviceaccount:x:y\" cannot list resource): deploy its RBAC role again (`make deploy`)"
    );
}

#[tokio::test(start_paused = true)]
async fn an_api_server_that_does_not_answer_times_out() {
    let (api, mut server) = mocked::<ConfigMap>();
    let checking = tokio::spawn(async move { check_api(&api).await });
    let _request = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("a list request within 5 s");
    let error = tokio::time::timeout(Duration::from_secs(60), checking)
        .await
        .expect("the check gives up")
        .unwrap()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the API server is unreachable: no answer within 10s"
    );
}

/// Answers every request of a controller of ConfigMaps in `default`: lists with one
/// ConfigMap, and watches with nothing, kept open until the server is dropped.
async fn serve_one_config_map(mut server: ApiServer) {
    let mut watches = Vec::new();
    while let Ok(Some((request, send))) =
        tokio::time::timeout(Duration::from_secs(30), server.next_request()).await
    {
        assert_eq!(
            request.uri().path(),
            "/api/v1/namespaces/default/configmaps"
        );
        if request
            .uri()
            .query()
            .unwrap_or_default()
            .contains("watch=true")
        {
            watches.push(send);
            continue;
        }
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "7"},
                "items": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "default", "resourceVersion": "7"}}]});
        send.send_response(
            http::Response::builder()
                .body(kube::client::Body::from(serde_json::to_vec(&list).unwrap()))
                .unwrap(),
        );
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the test fails this reconcile")]
struct Failed;

#[tokio::test(start_paused = true)]
async fn the_runner_reconciles_counts_retries_with_backoff_and_stops() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let serving = tokio::spawn(serve_one_config_map(server));
    let health = crate::health::Health::default();
    let metrics = Arc::new(Metrics::default());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let manager = ControllerContext {
        name: "test",
        client: Client::new(service, "default"),
        metrics: metrics.clone(),
        ready: health.readiness_check("test"),
        shutdown: shutdown.clone(),
        watch_namespace: Some("default".into()),
        max_concurrent_reconciles: crate::args::DEFAULT_MAX_CONCURRENT_RECONCILES,
        cache_sync_timeout: Duration::from_secs(120),
        watches: Arc::default(),
    };
    assert_eq!(
        health.readiness().0,
        503,
        "not ready before the cache synced"
    );
    let api: Api<ConfigMap> = manager.api();
    // Two failures, a success that asks to come back in 50 ms, a failure, a success.
    type Calls = Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>;
    let calls: Calls = Arc::default();
    let reconcile = |object: Arc<ConfigMap>, calls: Calls| async move {
        assert_eq!(object.metadata.name.as_deref(), Some("cm"));
        let mut calls = calls.lock().unwrap();
        calls.push(tokio::time::Instant::now());
        match calls.len() {
            3 => Ok(Action::requeue(Duration::from_millis(50))),
            5.. => Ok(Action::await_change()),
            _ => Err(Failed),
        }
    };
    let context = calls.clone();
    let running = tokio::spawn(async move {
        Runner::new("test", api)
            .backoff(Duration::from_millis(200), Duration::from_secs(5))
            .run(manager, reconcile, context)
            .await
    });
    crate::testing::within(async {
        while calls.lock().unwrap().len() < 5 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let times = calls.lock().unwrap().clone();
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    // The retries wait 200 ms, then 400 ms; the success forgets the failures, so the
    // next failure waits 200 ms again.
    for (gap, want) in gaps.iter().zip([200, 400, 50, 200]) {
        assert!((want..want + 20).contains(gap), "{gaps:?}");
    }
    assert_eq!(health.readiness().0, 200, "ready once the cache synced");
    let encoded = metrics.encode();
    for line in [
        "controller_runtime_reconcile_total{controller=\"test\",result=\"error\"} 3",
        "controller_runtime_reconcile_total{controller=\"test\",result=\"success\"} 2",
        "controller_runtime_reconcile_errors_total{controller=\"test\"} 3",
        "controller_runtime_reconcile_time_seconds_count{controller=\"test\"} 5",
        "controller_runtime_active_workers{controller=\"test\"} 0",
    ] {
        assert!(
            encoded.lines().any(|l| l == line),
            "no `{line}` in\n{encoded}"
        );
    }

    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_before_the_cache_synced_stops_the_runner_at_once() {
    let (api, mut server) = mocked::<ConfigMap>();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let manager = ControllerContext {
        name: "test",
        client: Client::new(
            tower::service_fn(|_: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "unused",
                ))
            }),
            "default",
        ),
        metrics: Arc::default(),
        ready: crate::health::Health::default().readiness_check("test"),
        shutdown: shutdown.clone(),
        watch_namespace: None,
        max_concurrent_reconciles: crate::args::DEFAULT_MAX_CONCURRENT_RECONCILES,
        cache_sync_timeout: Duration::from_secs(120),
        watches: Arc::default(),
    };
    let running = tokio::spawn(async move {
        let reconcile =
            |_: Arc<ConfigMap>, _: Arc<()>| async { Ok::<_, Failed>(Action::await_change()) };
        Runner::new("test", api)
            .run(manager, reconcile, Arc::new(()))
            .await
    });
    answer(&mut server, "/api/v1/namespaces/default/configmaps", 200,
            json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []})).await;
    // The watch's first list is sent, and never answered: the cache does not sync.
    let (_list, _pending) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("the first list within 5 s")
        .unwrap();
    shutdown.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(1), running).await;
    stopped
        .expect("stopped within 1 s of shutdown")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_runner_refuses_to_start_without_its_crd() {
    let (api, mut server) = mocked::<ConfigMap>();
    let manager = ControllerContext {
        name: "test",
        client: Client::new(
            tower::service_fn(|_: http::Request<kube::client::Body>| async {
                Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other(
                    "unused",
                ))
            }),
            "default",
        ),
        metrics: Arc::default(),
        ready: crate::health::Health::default().readiness_check("test"),
        shutdown: tokio_util::sync::CancellationToken::new(),
        watch_namespace: None,
        max_concurrent_reconciles: crate::args::DEFAULT_MAX_CONCURRENT_RECONCILES,
        cache_sync_timeout: Duration::from_secs(120),
        watches: Arc::default(),
    };
    let running = tokio::spawn(async move {
        let reconcile =
            |_: Arc<ConfigMap>, _: Arc<()>| async { Ok::<_, Failed>(Action::await_change()) };
        Runner::new("test", api)
            .run(manager, reconcile, Arc::new(()))
            .await
    });
    answer(
        &mut server,
        "/api/v1/namespaces/default/configmaps",
        404,
        status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    )
    .await;
    let error = crate::testing::within(running).await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        "the API server does not serve configmaps: its CRD is not installed; run `make install`"
    );
}

#[tokio::test]
async fn apply_status_sends_the_status_alone_as_its_field_manager() {
    let (api, mut server) = mocked::<ConfigMap>();
    let applying = tokio::spawn(async move {
        apply_status(&api, "cm", "the-controller", json!({"phase": "Ready"})).await
    });
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("a patch within 5 s")
        .unwrap();
    assert_eq!(request.method(), http::Method::PATCH);
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/default/configmaps/cm/status"
    );
    let query = request.uri().query().unwrap_or_default().to_owned();
    assert!(
        query.contains("fieldManager=the-controller") && query.contains("force=true"),
        "{query}"
    );
    assert_eq!(
        request.headers()["content-type"],
        "application/apply-patch+yaml"
    );
    let body = request.into_body().collect_bytes().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "status": {"phase": "Ready"}})
    );
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}});
    send.send_response(
        http::Response::builder()
            .body(kube::client::Body::from(
                serde_json::to_vec(&object).unwrap(),
            ))
            .unwrap(),
    );
    let applied = crate::testing::within(applying).await.unwrap().unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("cm"));
}

#[test]
fn report_logs_each_outcome_at_its_level() {
    let object = ObjectRef::<ConfigMap>::new("cm").within("default");
    let results: [Result<_, controller::Error<Failed, watcher::Error>>; 4] = [
        Ok((object.clone(), Action::await_change())),
        Err(controller::Error::ReconcilerFailed(
            Failed,
            Box::new(object.clone().erase()),
        )),
        Err(controller::Error::ObjectNotFound(Box::new(
            object.clone().erase(),
        ))),
        Err(controller::Error::QueueError(
            watcher::Error::NoResourceVersion,
        )),
    ];
    let logged = crate::testing::logged(|| {
        for result in &results {
            report("test", result);
        }
    });
    let lines: Vec<&str> = logged.lines().collect();
    let object = "object=ConfigMap.v1./cm.default";
    assert_eq!(
            lines,
            [
                format!(r#"DEBUG rsbuilder_runtime::controller: reconciled controller="test" {object}"#),
                format!(
                    r#"DEBUG rsbuilder_runtime::controller: reconcile failed: the test fails this reconcile controller="test" {object}"#
                ),
                format!(
                    r#"DEBUG rsbuilder_runtime::controller: object is gone from the cache controller="test" {object}"#
                ),
                r#" WARN rsbuilder_runtime::controller: watch failed, retrying: no metadata.resourceVersion in watch result (does resource support watch?) controller="test""#.to_owned(),
            ]
        );
}

#[tokio::test(start_paused = true)]
async fn run_with_policy_retries_when_the_policy_says_and_still_counts() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let serving = tokio::spawn(serve_one_config_map(server));
    let metrics = Arc::new(Metrics::default());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let manager = ControllerContext {
        name: "test",
        client: Client::new(service, "default"),
        metrics: metrics.clone(),
        ready: crate::health::Health::default().readiness_check("test"),
        shutdown: shutdown.clone(),
        watch_namespace: Some("default".into()),
        max_concurrent_reconciles: crate::args::DEFAULT_MAX_CONCURRENT_RECONCILES,
        cache_sync_timeout: Duration::from_secs(120),
        watches: Arc::default(),
    };
    let api: Api<ConfigMap> = manager.api();
    type Calls = Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>;
    let calls: Calls = Arc::default();
    let reconcile = |_: Arc<ConfigMap>, calls: Calls| async move {
        let mut calls = calls.lock().unwrap();
        calls.push(tokio::time::Instant::now());
        match calls.len() {
            1 => Err(Failed),
            _ => Ok(Action::await_change()),
        }
    };
    let asked: Arc<std::sync::Mutex<Vec<(String, String, usize)>>> = Arc::default();
    let policy = {
        let asked = asked.clone();
        move |object: Arc<ConfigMap>, error: &Failed, calls: Calls| {
            asked.lock().unwrap().push((
                object.metadata.name.clone().unwrap_or_default(),
                error.to_string(),
                calls.lock().unwrap().len(),
            ));
            Action::requeue(Duration::from_millis(75))
        }
    };
    let context = calls.clone();
    let running = tokio::spawn(async move {
        Runner::new("test", api)
            .run_with_policy(manager, reconcile, policy, context)
            .await
    });
    crate::testing::within(async {
        while calls.lock().unwrap().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let times = calls.lock().unwrap().clone();
    let gap = (times[1] - times[0]).as_millis();
    assert!((75..90).contains(&gap), "retried after {gap} ms, not 75 ms");
    assert_eq!(
        *asked.lock().unwrap(),
        [(
            "cm".to_owned(),
            "the test fails this reconcile".to_owned(),
            1
        )],
        "the policy is asked once, with the object, the error and the context"
    );
    let encoded = metrics.encode();
    for line in [
        "controller_runtime_reconcile_total{controller=\"test\",result=\"error\"} 1",
        "controller_runtime_reconcile_total{controller=\"test\",result=\"success\"} 1",
        "controller_runtime_reconcile_time_seconds_count{controller=\"test\"} 2",
        "workqueue_retries_total{name=\"test\"} 1",
    ] {
        assert!(
            encoded.lines().any(|l| l == line),
            "no `{line}` in\n{encoded}"
        );
    }
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

#[tokio::test]
async fn publish_normal_creates_a_normal_event_about_the_object() {
    let (api, mut server) = mocked::<ConfigMap>();
    let recorder = recorder(api.clone().into_client(), "the-controller");
    let object: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default", "uid": "u-1"}}))
    .unwrap();
    let publishing = tokio::spawn(async move {
        publish_normal(&recorder, &object, "Reconciled", "Reconcile", "all is well").await
    });
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("an event within 5 s")
        .unwrap();
    assert_eq!(request.method(), http::Method::POST);
    assert_eq!(
        request.uri().path(),
        "/apis/events.k8s.io/v1/namespaces/default/events"
    );
    let body = request.into_body().collect_bytes().await.unwrap();
    let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["reason"], "Reconciled");
    assert_eq!(event["action"], "Reconcile");
    assert_eq!(event["note"], "all is well");
    assert_eq!(event["reportingController"], "the-controller");
    assert_eq!(event["regarding"]["name"], "cm");
    assert_eq!(event["regarding"]["uid"], "u-1");
    send.send_response(
        http::Response::builder()
            .body(kube::client::Body::from(
                serde_json::to_vec(&event).unwrap(),
            ))
            .unwrap(),
    );
    crate::testing::within(publishing).await.unwrap().unwrap();
}

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A ConfigMap as the API server lists it.
fn config_map(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "resourceVersion": "7"}})
}

fn respond(
    send: mock::SendResponse<http::Response<kube::client::Body>>,
    code: u16,
    body: &serde_json::Value,
) {
    send.send_response(
        http::Response::builder()
            .status(code)
            .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

/// Answers the controller of ConfigMaps in `default`: the check and each list with
/// `list(n)` for the n-th list (from 0, the check not counted), watches with `watch(n)`
/// for the n-th watch, or kept open when that gives `None`. Ends when the server is dropped.
async fn serve(
    mut server: ApiServer,
    list: impl Fn(usize) -> (u16, serde_json::Value),
    watch: impl Fn(usize) -> Option<Vec<u8>>,
) {
    let (mut lists, mut watches, mut open) = (0, 0, Vec::new());
    while let Ok(Some((request, send))) =
        tokio::time::timeout(Duration::from_secs(3600), server.next_request()).await
    {
        assert_eq!(request.uri().path(), CONFIG_MAPS);
        let query = request.uri().query().unwrap_or_default().to_owned();
        if query.contains("watch=true") {
            match watch(watches) {
                Some(events) => send.send_response(
                    http::Response::builder()
                        .body(kube::client::Body::from(events))
                        .unwrap(),
                ),
                None => open.push(send),
            }
            watches += 1;
        } else if query == "&limit=1" {
            respond(
                send,
                200,
                &json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": []}),
            );
        } else {
            let (code, body) = list(lists);
            lists += 1;
            respond(send, code, &body);
        }
    }
}

fn listed(items: Vec<serde_json::Value>) -> (u16, serde_json::Value) {
    (
        200,
        json!({"kind": "ConfigMapList", "apiVersion": "v1",
                     "metadata": {"resourceVersion": "7"}, "items": items}),
    )
}

/// A ConfigMap whose `data` is not a map: the list does not decode into the type.
fn undecodable() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "data": 42,
               "metadata": {"name": "bad", "namespace": "default", "resourceVersion": "7"}})
}

fn context_of(
    service: mock::Mock<http::Request<kube::client::Body>, http::Response<kube::client::Body>>,
    health: &crate::health::Health,
    shutdown: &tokio_util::sync::CancellationToken,
) -> ControllerContext {
    context_with(Client::new(service, "default"), health, shutdown)
}

fn context_with(
    client: Client,
    health: &crate::health::Health,
    shutdown: &tokio_util::sync::CancellationToken,
) -> ControllerContext {
    ControllerContext {
        name: "test",
        client,
        metrics: Arc::default(),
        ready: health.readiness_check("test"),
        shutdown: shutdown.clone(),
        watch_namespace: Some("default".into()),
        max_concurrent_reconciles: crate::args::DEFAULT_MAX_CONCURRENT_RECONCILES,
        cache_sync_timeout: Duration::from_secs(120),
        watches: Arc::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn at_most_the_concurrency_reconciles_run_at_once_and_the_queue_is_counted() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let names: Vec<_> = (0..20).map(|i| config_map(&format!("cm-{i}"))).collect();
    let serving = tokio::spawn(serve(server, move |_| listed(names.clone()), |_| None));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let manager = context_of(service, &health, &shutdown);
    let metrics = manager.metrics.clone();
    let api: Api<ConfigMap> = manager.api();
    // (in flight, most in flight, done)
    let counts = Arc::new(std::sync::Mutex::new((0, 0, 0)));
    let reconcile = |_: Arc<ConfigMap>, counts: Arc<std::sync::Mutex<(usize, usize, usize)>>| async move {
        {
            let mut counts = counts.lock().unwrap();
            counts.0 += 1;
            counts.1 = counts.1.max(counts.0);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut counts = counts.lock().unwrap();
        counts.0 -= 1;
        counts.2 += 1;
        Ok::<_, Failed>(Action::await_change())
    };
    let context = counts.clone();
    let running = tokio::spawn(async move {
        Runner::new("test", api)
            .concurrency(3)
            .run(manager, reconcile, context)
            .await
    });
    let mut depths = std::collections::BTreeSet::new();
    crate::testing::within(async {
        while counts.lock().unwrap().2 < 20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let encoded = metrics.encode();
            let depth = encoded
                .lines()
                .find_map(|l| l.strip_prefix("workqueue_depth{name=\"test\"} "))
                .map(|d| d.parse::<u32>().unwrap());
            depths.extend(depth);
        }
    })
    .await;
    assert_eq!(counts.lock().unwrap().1, 3, "at most 3 reconciles at once");
    // 20 queued, 3 at a time: the queue empties by threes.
    assert!(
        depths.is_superset(&[17, 14, 11, 8, 5, 2].into()),
        "the depths seen: {depths:?}"
    );
    let encoded = metrics.encode();
    for line in [
        "workqueue_adds_total{name=\"test\"} 20",
        "workqueue_depth{name=\"test\"} 0",
        "workqueue_retries_total{name=\"test\"} 0",
        "controller_runtime_max_concurrent_reconciles{controller=\"test\"} 3",
    ] {
        assert!(
            encoded.lines().any(|l| l == line),
            "no `{line}` in\n{encoded}"
        );
    }
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn the_managers_concurrency_is_the_default() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let names: Vec<_> = (0..40).map(|i| config_map(&format!("cm-{i}"))).collect();
    let serving = tokio::spawn(serve(server, move |_| listed(names.clone()), |_| None));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let mut manager = context_of(service, &health, &shutdown);
    manager.max_concurrent_reconciles = 7;
    let api: Api<ConfigMap> = manager.api();
    let counts = Arc::new(std::sync::Mutex::new((0, 0, 0)));
    let reconcile = |_: Arc<ConfigMap>, counts: Arc<std::sync::Mutex<(usize, usize, usize)>>| async move {
        {
            let mut counts = counts.lock().unwrap();
            counts.0 += 1;
            counts.1 = counts.1.max(counts.0);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut counts = counts.lock().unwrap();
        counts.0 -= 1;
        counts.2 += 1;
        Ok::<_, Failed>(Action::await_change())
    };
    let context = counts.clone();
    let running = tokio::spawn(async move {
        Runner::new("test", api)
            .run(manager, reconcile, context)
            .await
    });
    crate::testing::within(async {
        while counts.lock().unwrap().2 < 40 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(counts.lock().unwrap().1, 7);
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

async fn never(_: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, Failed> {
    Ok(Action::await_change())
}

#[tokio::test(start_paused = true)]
async fn a_cache_that_never_syncs_fails_the_runner_with_the_kind_and_the_decode_error() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let serving = tokio::spawn(serve(
        server,
        |_| listed(vec![config_map("good"), undecodable()]),
        |_| None,
    ));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let mut manager = context_of(service, &health, &shutdown);
    manager.cache_sync_timeout = Duration::from_secs(30);
    let api: Api<ConfigMap> = manager.api();
    let started = Instant::now();
    let error = crate::testing::within(Runner::new("test", api).run(manager, never, Arc::new(())))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        started.elapsed() >= Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() <= Duration::from_secs(32),
        "{:?}",
        started.elapsed()
    );
    assert!(
        error.starts_with(&format!(
            "the cache of ConfigMap ({CONFIG_MAPS}) did not sync within 30s at start: "
        )),
        "{error}"
    );
    assert!(error.contains("invalid type: integer `42`"), "{error}");
    assert_eq!(health.readiness().0, 503);
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn a_relist_that_keeps_failing_makes_the_controller_unready_then_fails_it() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    // The first list syncs; the watch says 410 Gone; every relist holds an object that
    // does not decode.
    let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}
"#.to_vec();
    let serving = tokio::spawn(serve(
        server,
        |n| {
            if n == 0 {
                listed(vec![config_map("good")])
            } else {
                listed(vec![undecodable()])
            }
        },
        move |n| (n == 0).then(|| gone.clone()),
    ));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let mut manager = context_of(service, &health, &shutdown);
    manager.cache_sync_timeout = Duration::from_secs(30);
    let api: Api<ConfigMap> = manager.api();
    let running = tokio::spawn(Runner::new("test", api).run(manager, never, Arc::new(())));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        health.readiness().0,
        200,
        "a short relist keeps the controller ready"
    );
    tokio::time::sleep(NOT_READY_AFTER).await;
    assert_eq!(
        health.readiness().0,
        503,
        "not ready while the relist fails"
    );
    let error = crate::testing::within(running)
        .await
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("did not sync within 30s after a relist"),
        "{error}"
    );
    assert!(error.contains("invalid type: integer `42`"), "{error}");
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_the_watch_of_the_controllers_resource() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let serving = tokio::spawn(serve(
        server,
        |_| listed(vec![config_map("good")]),
        |_| None,
    ));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let manager = context_of(service, &health, &shutdown);
    let watches = manager.watches.clone();
    let api: Api<ConfigMap> = manager.api();
    let running = tokio::spawn(Runner::new("test", api).run(manager, never, Arc::new(())));
    crate::testing::within(async {
        while health.readiness().0 != 200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let key = Watches::key(CONFIG_MAPS, None, None);
    watches.failed(&key, "connection reset".into());
    tokio::time::sleep(WATCH_CHECK_INTERVAL * 2).await;
    assert_eq!(
        health.readiness().0,
        200,
        "a blip keeps the controller ready"
    );
    tokio::time::sleep(NOT_READY_AFTER).await;
    let (code, body) = health.readiness();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("[-]test not ready"), "{body}");
    watches.failed(
        &Watches::key(CONFIG_MAPS, Some("app=other"), None),
        "another watch".into(),
    );
    watches.established(&key);
    tokio::time::sleep(WATCH_CHECK_INTERVAL * 2).await;
    assert_eq!(
        health.readiness().0,
        200,
        "ready again once its watch is back"
    );
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn a_short_cache_sync_timeout_shortens_the_grace_before_unready() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let serving = tokio::spawn(serve(
        server,
        |_| listed(vec![config_map("good")]),
        |_| None,
    ));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let mut manager = context_of(service, &health, &shutdown);
    // Half of it, 3 s, is shorter than NOT_READY_AFTER.
    manager.cache_sync_timeout = Duration::from_secs(6);
    let watches = manager.watches.clone();
    let api: Api<ConfigMap> = manager.api();
    let running = tokio::spawn(Runner::new("test", api).run(manager, never, Arc::new(())));
    crate::testing::within(async {
        while health.readiness().0 != 200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    watches.failed(
        &Watches::key(CONFIG_MAPS, None, None),
        "connection reset".into(),
    );
    tokio::time::sleep(WATCH_CHECK_INTERVAL).await;
    assert_eq!(
        health.readiness().0,
        200,
        "a blip keeps the controller ready"
    );
    tokio::time::sleep(WATCH_CHECK_INTERVAL * 4).await;
    assert_eq!(
        health.readiness().0,
        503,
        "not ready after 3 s of a failed watch"
    );
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_goes_silent_is_reopened_after_its_idle_timeout() {
    // Answered, then silent with its connection alive: the request timeout does not cut
    // a watch that was answered; the watcher's idle timeout (the server's 290 s, and 5 s)
    // reopens it.
    type Frames = futures::channel::mpsc::Sender<Result<http_body::Frame<Bytes>, Infallible>>;
    type Streamed = http_body_util::StreamBody<
        futures::channel::mpsc::Receiver<Result<http_body::Frame<Bytes>, Infallible>>,
    >;
    let (service, mut server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<Streamed>>();
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let manager = context_with(Client::new(service, "default"), &health, &shutdown);
    let api: Api<ConfigMap> = manager.api();
    let running = tokio::spawn(Runner::new("test", api).run(manager, never, Arc::new(())));
    let (mut watches, mut silent): (Vec<Duration>, Vec<Frames>) = (Vec::new(), Vec::new());
    let started = tokio::time::Instant::now();
    while watches.len() < 2 {
        let (request, send) = tokio::time::timeout(Duration::from_secs(600), server.next_request())
            .await
            .expect("a request within 600 s")
            .unwrap();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let (mut frames, body) = futures::channel::mpsc::channel(1);
        if query.contains("watch=true") {
            watches.push(started.elapsed());
            silent.push(frames);
        } else {
            let items = if query == "&limit=1" {
                Vec::new()
            } else {
                vec![config_map("good")]
            };
            let (_, list) = listed(items);
            let bytes = Bytes::from(serde_json::to_vec(&list).unwrap());
            frames.try_send(Ok(http_body::Frame::data(bytes))).unwrap();
        }
        send.send_response(http::Response::new(http_body_util::StreamBody::new(body)));
    }
    let silence = watches[1] - watches[0];
    assert!(
        silence >= Duration::from_secs(295) && silence < Duration::from_secs(300),
        "the silent watch was reopened after {silence:?}"
    );
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_before_its_turn_leaves_the_queue() {
    let (service, server) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    // Both are deleted while the first reconcile runs (which one is first is the
    // scheduler's choice): the other is gone from the cache before its turn.
    let mut event = Vec::new();
    for (name, version) in [("a", "8"), ("b", "9")] {
        let mut deleted = config_map(name);
        deleted["metadata"]["resourceVersion"] = json!(version);
        event.extend(format!("{}\n", json!({"type": "DELETED", "object": deleted})).into_bytes());
    }
    let sent = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let told = sent.clone();
    let serving = tokio::spawn(serve(
        server,
        |_| listed(vec![config_map("a"), config_map("b")]),
        move |n| {
            (n == 0).then(|| {
                told.store(true, std::sync::atomic::Ordering::SeqCst);
                event.clone()
            })
        },
    ));
    let (health, shutdown) = (
        crate::health::Health::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let manager = context_of(service, &health, &shutdown);
    let metrics = manager.metrics.clone();
    let api: Api<ConfigMap> = manager.api();
    type Seen = Arc<(
        std::sync::Mutex<Vec<String>>,
        Arc<std::sync::atomic::AtomicBool>,
    )>;
    let seen: Seen = Arc::new((std::sync::Mutex::default(), sent));
    // The first reconcile lasts until the deletions were sent, and 2 s more.
    let reconcile = |object: Arc<ConfigMap>, seen: Seen| async move {
        seen.0
            .lock()
            .unwrap()
            .push(object.metadata.name.clone().unwrap());
        while !seen.1.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok::<_, Failed>(Action::await_change())
    };
    let context = seen.clone();
    let running = tokio::spawn(async move {
        Runner::new("test", api)
            .concurrency(1)
            .run(manager, reconcile, context)
            .await
    });
    crate::testing::within(async {
        while !metrics
            .encode()
            .lines()
            .any(|l| l == "workqueue_adds_total{name=\"test\"} 2")
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    })
    .await;
    let reconciled = seen.0.lock().unwrap().clone();
    assert_eq!(reconciled.len(), 1, "{reconciled:?}");
    let encoded = metrics.encode();
    assert!(
        encoded
            .lines()
            .any(|l| l == "workqueue_depth{name=\"test\"} 0"),
        "{encoded}"
    );
    shutdown.cancel();
    crate::testing::within(running).await.unwrap().unwrap();
    serving.abort();
}
