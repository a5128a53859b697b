use super::*;
use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

pub(crate) type ApiServer = mock::Handle<Request<Body>, Response<Body>>;

pub(crate) const PATH: &str =
    "/apis/coordination.k8s.io/v1/namespaces/operators/leases/my-operator";
const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/operators/leases";

pub(crate) fn config() -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_name: "my-operator".into(),
        namespace: "operators".into(),
        identity: "me".into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

pub(crate) fn elector() -> (LeaderElector, ApiServer) {
    let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
    (
        LeaderElector::new(Client::new(service, "default"), config()),
        server,
    )
}

/// Takes the next request within a minute of (paused) time and checks its method and path;
/// returns its body and the handle to answer it.
pub(crate) async fn next(
    server: &mut ApiServer,
    method: Method,
    path: &str,
) -> (Value, mock::SendResponse<Response<Body>>) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(60), server.next_request())
        .await
        .unwrap_or_else(|_| panic!("no {method} {path} request within 60 s"))
        .expect("the client is connected");
    assert_eq!((request.method(), request.uri().path()), (&method, path));
    let bytes = request.into_body().collect_bytes().await.unwrap();
    (serde_json::from_slice(&bytes).unwrap_or(Value::Null), send)
}

pub(crate) fn respond(send: mock::SendResponse<Response<Body>>, code: u16, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(body).unwrap()))
            .unwrap(),
    );
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "leases.coordination.k8s.io \"my-operator\" not found", "reason": "NotFound", "code": 404})
}

pub(crate) fn failure(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "etcdserver: request timed out", "reason": "InternalError", "code": code})
}

/// A Lease as the API server returns it.
pub(crate) fn lease(holder: &str, renewed: &str, transitions: i32, version: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "my-operator", "namespace": "operators", "resourceVersion": version},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": renewed,
                 "leaseTransitions": transitions}
    })
}

/// Answers a GET (404) and the create that follows: this replica leads.
pub(crate) async fn grant(server: &mut ApiServer) -> Value {
    let (_, send) = next(server, Method::GET, PATH).await;
    respond(send, 404, &not_found());
    let (body, send) = next(server, Method::POST, COLLECTION).await;
    let mut created = body.clone();
    created["metadata"]["resourceVersion"] = json!("1");
    respond(send, 201, &created);
    body
}

/// The parts of a Lease spec that do not depend on the time.
fn timeless(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for time in ["acquireTime", "renewTime"] {
        assert!(
            spec[time].as_str().is_some_and(|t| t.ends_with('Z')),
            "{time} in {spec}"
        );
        spec.as_object_mut().unwrap().remove(time);
    }
    spec
}

/// The error of `config()` changed by `change`, or `None` when it is valid.
fn refusal(change: impl FnOnce(&mut LeaderElectionConfig)) -> Option<String> {
    let mut config = config();
    change(&mut config);
    config.validate().err().map(|error| error.to_string())
}

#[test]
fn the_identity_is_the_pod_or_host_name_and_a_suffix_of_its_own() {
    let named = |pod: Option<&str>, host: Option<&str>| {
        let identity = identity(pod.map(str::to_owned), host.map(str::to_owned));
        let (name, suffix) = identity.rsplit_once('_').unwrap();
        assert_eq!(suffix.len(), 16, "{identity}");
        assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{identity}");
        name.to_owned()
    };
    assert_eq!(named(Some("pod-1"), Some("host")), "pod-1");
    assert_eq!(named(Some(""), Some("host")), "host");
    assert_eq!(named(None, Some("host")), "host");
    assert_eq!(named(None, Some("")), "manager");
    assert_eq!(named(None, None), "manager");
    assert_ne!(
        identity(Some("pod-1".into()), None),
        identity(Some("pod-1".into()), None),
        "a restarted pod is a new candidate"
    );
}

#[test]
fn client_gos_default_timings_are_valid() {
    assert_eq!(refusal(|_| {}), None);
}

#[test]
fn the_lease_name_and_the_identity_must_be_set() {
    assert_eq!(
        refusal(|c| c.lease_name = String::new()).as_deref(),
        Some("the leader election ID is empty")
    );
    assert_eq!(refusal(|c| c.lease_name = "a".into()), None);
    assert_eq!(
        refusal(|c| c.identity = String::new()).as_deref(),
        Some("the leader election identity is empty")
    );
    assert_eq!(refusal(|c| c.identity = "a".into()), None);
}

#[test]
fn the_lease_duration_must_exceed_the_renew_deadline() {
    assert_eq!(
        refusal(|c| c.renew_deadline = Duration::from_secs(15)).as_deref(),
        Some(
            "the leader election lease duration (15s) must be longer than the renew deadline (15s)"
        )
    );
    // A nanosecond shorter is enough.
    assert_eq!(
        refusal(|c| c.renew_deadline = Duration::from_secs(15) - Duration::from_nanos(1)),
        None
    );
}

#[test]
fn the_renew_deadline_must_exceed_the_retry_period_with_jitter() {
    // 1.2 times the 2 s retry period is 2.4 s.
    assert_eq!(
        refusal(|c| c.renew_deadline = Duration::from_millis(2400)).as_deref(),
        Some(
            "the leader election renew deadline (2.4s) must be longer than 1.2 times the retry period (2s)"
        )
    );
    assert_eq!(
        refusal(|c| c.renew_deadline = Duration::from_millis(2401)),
        None
    );
}

#[test]
fn the_retry_period_must_be_positive() {
    assert_eq!(
        refusal(|c| c.retry_period = Duration::ZERO).as_deref(),
        Some("the leader election retry period must be positive")
    );
    assert_eq!(refusal(|c| c.retry_period = Duration::from_nanos(1)), None);
}

#[test]
fn the_lease_duration_must_be_whole_seconds() {
    assert_eq!(
        refusal(|c| c.lease_duration = Duration::from_millis(10_500)).as_deref(),
        Some(
            "the leader election lease duration (10.5s) must be a whole number of seconds: the Lease records seconds"
        )
    );
    assert_eq!(
        refusal(|c| c.lease_duration = Duration::from_secs(15) + Duration::from_nanos(1))
            .as_deref(),
        Some(
            "the leader election lease duration (15.000000001s) must be a whole number of seconds: the Lease records seconds"
        )
    );
    // Under a second is no whole number of seconds either, even with shorter timings.
    let short = |c: &mut LeaderElectionConfig| {
        c.renew_deadline = Duration::from_millis(500);
        c.retry_period = Duration::from_millis(100);
    };
    assert_eq!(
        refusal(|c| {
            short(c);
            c.lease_duration = Duration::from_millis(999);
        })
        .as_deref(),
        Some(
            "the leader election lease duration (999ms) must be a whole number of seconds: the Lease records seconds"
        )
    );
    assert_eq!(
        refusal(|c| {
            short(c);
            c.lease_duration = Duration::from_secs(1);
        }),
        None
    );
}

#[test]
fn a_lost_leader_stops_before_the_lease_can_expire_for_the_others() {
    // A fifth of the 5 s between the renew deadline and the lease duration: a second.
    let now = Instant::now();
    assert_eq!(config().stop_by(now), now + Duration::from_secs(14));
}

#[test]
fn identities_are_unique_per_process_start() {
    assert_ne!(default_identity(), default_identity());
}

#[tokio::test(start_paused = true)]
async fn a_missing_lease_is_created_and_held() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = tokio::spawn(async move {
        let leadership = elector.acquire(&CancellationToken::new()).await;
        (elector, leadership)
    });
    let created = grant(&mut server).await;
    assert_eq!(
        created["metadata"],
        json!({"name": "my-operator", "namespace": "operators"})
    );
    assert_eq!(
        timeless(&created["spec"]),
        json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0})
    );
    let (_, leadership) = crate::testing::within(acquiring).await.unwrap();
    assert!(leadership.is_some());
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn the_leader_renews_every_retry_period() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    // As the manager makes it: open a renew deadline past the acquisition.
    let fence = Fence::new(Instant::now() + Duration::from_secs(10));
    elector.set_fence(fence.clone());
    let holding = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut leadership = elector.acquire(&stop).await.unwrap();
            let start = leadership.renewed;
            let held = elector.hold(&mut leadership, &stop).await;
            (held, leadership.renewed - start)
        })
    };
    grant(&mut server).await;
    let started = Instant::now();
    for (round, version) in ["1", "2", "3"].into_iter().enumerate() {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(2 * (round as u64 + 1))
        );
        respond(
            send,
            200,
            &lease("me", "2026-01-01T00:00:00.000000Z", 0, version),
        );
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert_eq!(
            body["metadata"]["resourceVersion"], version,
            "optimistic concurrency"
        );
        assert_eq!(
            timeless(&body["spec"]),
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0})
        );
        assert_eq!(
            body["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z",
            "kept on renewal"
        );
        let mut renewed = body.clone();
        renewed["metadata"]["resourceVersion"] = json!(format!("{version}0"));
        respond(send, 200, &renewed);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    let (held, renewed_after) = tokio::time::timeout(Duration::from_secs(5), holding)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held, Held::Stopped);
    assert_eq!(renewed_after, Duration::from_secs(6));
    // The last renewal was sent 6 s in: the fence stays open until 16 s, no longer.
    assert!(fence.is_open());
    tokio::time::advance(Duration::from_millis(9800)).await;
    assert!(fence.is_open(), "each renewal extends the fence");
    tokio::time::advance(Duration::from_millis(200)).await;
    assert!(
        !fence.is_open(),
        "a renew deadline after the last renewal, it closes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_closed_fence_keeps_the_requests_in_the_process() {
    let (service, mut server) = mock::pair::<Request<Body>, Response<Body>>();
    let fence = Fence::new(Instant::now() + Duration::from_secs(60));
    let client = fence.client(Client::new(service, "operators"));
    let api: Api<Lease> = Api::namespaced(client, "operators");
    let getting = {
        let api = api.clone();
        tokio::spawn(async move { api.get("my-operator").await })
    };
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &lease("me", "2026-01-01T00:00:00.000000Z", 0, "1"),
    );
    crate::testing::within(getting).await.unwrap().unwrap();

    fence.close();
    let error = crate::testing::within(api.get("my-operator"))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "ServiceError: this replica may no longer lead: the leader election Lease was not renewed within the renew deadline"
    );
    let sent = tokio::time::timeout(Duration::from_millis(100), server.next_request()).await;
    assert!(
        sent.is_err(),
        "a request left the process behind a closed fence"
    );
}

#[test]
fn a_closed_fence_stays_closed() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let fence = Fence::new(Instant::now() + Duration::from_secs(10));
        fence.extend(Instant::now() + Duration::from_secs(20));
        tokio::time::advance(Duration::from_secs(15)).await;
        assert!(fence.is_open(), "extended to 20 s");
        fence.close();
        fence.extend(Instant::now() + Duration::from_secs(60));
        assert!(
            !fence.is_open(),
            "a late renewal does not reopen a closed fence"
        );
    });
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_within_the_deadline_loses() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let holding = tokio::spawn(async move {
        let mut leadership = elector.acquire(&stop).await.unwrap();
        let acquired = leadership.renewed;
        (elector.hold(&mut leadership, &stop).await, acquired)
    });
    grant(&mut server).await;
    let acquired_at = Instant::now();
    // Every renewal fails: the API server answers 500, and the last one not at all.
    let mut failures = 0;
    loop {
        let request = tokio::time::timeout(Duration::from_secs(60), server.next_request()).await;
        let Ok(Some((request, send))) = request else {
            break;
        };
        assert_eq!(request.uri().path(), PATH);
        failures += 1;
        // Renewals are due every 2 s after the acquisition: retried after a retry period,
        // never at once (which would also make this loop spin without end).
        assert_eq!(
            Instant::now() - acquired_at,
            Duration::from_secs(2 * failures),
            "renewal {failures}"
        );
        if failures < 4 {
            respond(send, 500, &failure(500));
        } else {
            // Hang, so that the deadline cuts the request short.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                drop(send);
            });
        }
        if holding.is_finished() {
            break;
        }
    }
    let (held, acquired) = crate::testing::within(holding).await.unwrap();
    assert_eq!(
        held,
        Held::Lost {
            last_renewed: acquired
        }
    );
    assert_eq!(
        Instant::now() - acquired,
        Duration::from_secs(10),
        "gave up exactly at the renew deadline"
    );
    assert_eq!(failures, 4, "retried every retry period until the deadline");
}

#[tokio::test(start_paused = true)]
async fn renewals_are_due_from_when_the_last_one_was_sent() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let holding = tokio::spawn(async move {
        let mut leadership = elector.acquire(&stop).await.unwrap();
        let acquired = leadership.renewed;
        (elector.hold(&mut leadership, &stop).await, acquired)
    });
    grant(&mut server).await;
    let started = Instant::now();
    // The first renewal is answered after 7 s, within the deadline.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    tokio::time::sleep(Duration::from_secs(7)).await;
    respond(
        send,
        200,
        &lease("me", "2026-01-01T00:00:00.000000Z", 0, "1"),
    );
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    respond(send, 200, &body);
    // The next one was due at 2 + 2 s, which has passed: it is sent at once, and fails.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert_eq!(started.elapsed(), Duration::from_secs(9));
    respond(send, 500, &failure(500));
    let mut failures = 1;
    while let Ok(Some((_, send))) =
        tokio::time::timeout(Duration::from_secs(60), server.next_request()).await
    {
        failures += 1;
        // A bound, so that retries sent without a pause fail the test instead of spinning.
        assert!(failures <= 2, "renewal retried at {:?}", started.elapsed());
        respond(send, 500, &failure(500));
    }
    let (held, acquired) = crate::testing::within(holding).await.unwrap();
    // Lost at the renewal sent at 2 s plus the 10 s deadline, not later.
    assert_eq!(
        held,
        Held::Lost {
            last_renewed: acquired + Duration::from_secs(2)
        }
    );
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    assert_eq!(
        failures, 2,
        "retried at 11 s; the deadline came before another retry"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_sees_another_holder_loses_at_once() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let fence = Fence::new(Instant::now() + Duration::from_secs(3600));
    elector.set_fence(fence.clone());
    let holding = tokio::spawn(async move {
        let mut leadership = elector.acquire(&stop).await.unwrap();
        elector.hold(&mut leadership, &stop).await
    });
    grant(&mut server).await;
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert!(fence.is_open());
    respond(
        send,
        200,
        &lease("other", "2026-01-01T00:00:00.000000Z", 1, "7"),
    );
    let held = tokio::time::timeout(Duration::from_secs(1), holding)
        .await
        .expect("no further renewal")
        .unwrap();
    assert!(matches!(held, Held::Lost { .. }));
    assert!(
        !fence.is_open(),
        "a lost leadership closes the fence at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_follower_takes_over_only_after_a_full_lease_duration_on_its_own_clock() {
    let (mut elector, mut server) = elector();
    let acquiring = tokio::spawn(async move {
        let leadership = elector.acquire(&CancellationToken::new()).await;
        (leadership, elector)
    });
    // The holder's renewTime is a day old: on the holder's skewed clock it is current, so the
    // follower must not trust it and waits 15 s of its own time instead.
    let stale = lease("other", "2025-12-31T00:00:00.000000Z", 3, "5");
    let started = Instant::now();
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(send, 200, &stale);
    for _ in 0..7 {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        respond(send, 200, &stale);
    }
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert_eq!(started.elapsed(), Duration::from_secs(16));
    respond(send, 200, &stale);
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(body["metadata"]["resourceVersion"], "5");
    assert_eq!(
        timeless(&body["spec"]),
        json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 4})
    );
    respond(send, 200, &body);
    let (leadership, _) = crate::testing::within(acquiring).await.unwrap();
    assert!(leadership.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_refused_create_is_a_warning_and_a_lost_race_is_not() {
    let captured = crate::testing::capture();
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = {
        let stop = stop.clone();
        tokio::spawn(async move { elector.acquire(&stop).await })
    };
    for (status, body) in [(403, failure(403)), (409, conflict())] {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 404, &not_found());
        let (_, send) = next(&mut server, Method::POST, COLLECTION).await;
        respond(send, status, &body);
    }
    stop.cancel();
    assert!(crate::testing::within(acquiring).await.unwrap().is_none());
    let said: Vec<String> = captured
        .text()
        .lines()
        .filter(|line| line.contains("rsbuilder_runtime::leader"))
        .map(|line| {
            let (level, rest) = line.trim_start().split_once(' ').unwrap();
            let message = rest.split_once(": ").unwrap().1;
            format!("{level} {}", message.split(" lease=").next().unwrap())
        })
        .collect();
    assert_eq!(said.len(), 2, "{said:#?}");
    assert!(
        said[0].starts_with("WARN failed to acquire the Lease: "),
        "{said:#?}"
    );
    assert_eq!(said[1], "DEBUG another replica updated the Lease first");
    let named = captured
        .text()
        .lines()
        .filter(|line| line.ends_with(" lease=operators/my-operator"))
        .count();
    assert_eq!(named, 2, "each line names the Lease");
}

#[tokio::test(start_paused = true)]
async fn a_waiting_replica_says_once_who_holds_the_lease() {
    let captured = crate::testing::capture();
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = {
        let stop = stop.clone();
        tokio::spawn(async move { elector.acquire(&stop).await })
    };
    for (round, holder) in ["other", "other", "other", "third", "third"]
        .into_iter()
        .enumerate()
    {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        let renewed = format!("2026-01-01T00:00:{:02}.000000Z", round * 2);
        respond(send, 200, &lease(holder, &renewed, 0, &round.to_string()));
    }
    stop.cancel();
    assert!(crate::testing::within(acquiring).await.unwrap().is_none());
    let said: Vec<String> = captured
        .text()
        .lines()
        .filter(|line| line.contains("the Lease is held by another replica"))
        .map(|line| line.rsplit_once("holder=").unwrap().1.to_owned())
        .collect();
    assert_eq!(said, ["other", "third"]);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_by_the_holder_restarts_the_followers_clock() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = {
        let stop = stop.clone();
        tokio::spawn(async move { elector.acquire(&stop).await })
    };
    let started = Instant::now();
    // The holder renews every 2 s for 30 s: the follower never takes over.
    for round in 0..16 {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        let renewed = format!("2026-01-01T00:00:{:02}.000000Z", round * 2);
        respond(send, 200, &lease("other", &renewed, 0, &round.to_string()));
    }
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    stop.cancel();
    let leadership = tokio::time::timeout(Duration::from_secs(5), acquiring)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(leadership, None);
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let (mut elector, mut server) = elector();
    let acquiring = tokio::spawn(async move { elector.acquire(&CancellationToken::new()).await });
    let mut released = lease("", "2026-01-01T00:00:00.000000Z", 2, "9");
    released["spec"]
        .as_object_mut()
        .unwrap()
        .remove("holderIdentity");
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(send, 200, &released);
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(body["spec"]["holderIdentity"], "me");
    assert_eq!(body["spec"]["leaseTransitions"], 3);
    respond(send, 200, &body);
    assert!(crate::testing::within(acquiring).await.unwrap().is_some());
}

fn already_exists() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "leases.coordination.k8s.io \"my-operator\" already exists",
               "reason": "AlreadyExists", "code": 409})
}

fn conflict() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Operation cannot be fulfilled on leases.coordination.k8s.io \"my-operator\": the object has been modified; please apply your changes to the latest version and try again",
               "reason": "Conflict", "code": 409})
}

/// A Lease that its last holder released.
fn released_lease(version: &str) -> Value {
    let mut released = lease("", "2026-01-01T00:00:00.000000Z", 2, version);
    released["spec"]
        .as_object_mut()
        .unwrap()
        .remove("holderIdentity");
    released
}

/// One `try_acquire_or_renew`, while `answer` plays the API server; its result, with
/// errors as text.
async fn one_attempt(answer: impl AsyncFnOnce(&mut ApiServer)) -> Result<Attempt, String> {
    let (mut elector, mut server) = elector();
    let attempt = tokio::spawn(async move {
        elector
            .try_acquire_or_renew()
            .await
            .map_err(|error| error.to_string())
    });
    answer(&mut server).await;
    crate::testing::within(attempt).await.unwrap()
}

/// A 409 on the create, on a takeover or on a renewal means that another replica wrote the
/// Lease first: a lost race (`Contended`), neither leadership nor an error.
#[tokio::test(start_paused = true)]
async fn a_conflict_on_create_takeover_or_renewal_is_a_lost_race_not_an_error() {
    let create = one_attempt(async |server: &mut ApiServer| {
        let (_, send) = next(server, Method::GET, PATH).await;
        respond(send, 404, &not_found());
        let (_, send) = next(server, Method::POST, COLLECTION).await;
        respond(send, 409, &already_exists());
    })
    .await;
    assert_eq!(create, Ok(Attempt::Contended), "create");

    let takeover = one_attempt(async |server: &mut ApiServer| {
        let (_, send) = next(server, Method::GET, PATH).await;
        respond(send, 200, &released_lease("9"));
        let (body, send) = next(server, Method::PUT, PATH).await;
        assert_eq!(body["spec"]["holderIdentity"], "me");
        respond(send, 409, &conflict());
    })
    .await;
    assert_eq!(takeover, Ok(Attempt::Contended), "takeover");

    let renewal = one_attempt(async |server: &mut ApiServer| {
        let (_, send) = next(server, Method::GET, PATH).await;
        respond(
            send,
            200,
            &lease("me", "2026-01-01T00:00:00.000000Z", 0, "4"),
        );
        let (body, send) = next(server, Method::PUT, PATH).await;
        assert_eq!(body["metadata"]["resourceVersion"], "4");
        respond(send, 409, &conflict());
    })
    .await;
    assert_eq!(renewal, Ok(Attempt::Contended), "renewal");

    // Other failures stay errors.
    let failed = one_attempt(async |server: &mut ApiServer| {
        let (_, send) = next(server, Method::GET, PATH).await;
        respond(send, 200, &released_lease("9"));
        let (_, send) = next(server, Method::PUT, PATH).await;
        respond(send, 500, &failure(500));
    })
    .await;
    assert!(failed.is_err(), "{failed:?}");
}

/// A replica that loses the race to create the Lease, and then the race to take it over, is
/// no leader: `acquire` goes on trying.
#[tokio::test(start_paused = true)]
async fn a_conflicting_create_or_update_is_not_leadership() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = {
        let stop = stop.clone();
        tokio::spawn(async move { elector.acquire(&stop).await })
    };
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(send, 404, &not_found());
    let (_, send) = next(&mut server, Method::POST, COLLECTION).await;
    respond(send, 409, &already_exists());
    // Another replica created it, and released it since; this one loses the takeover.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(send, 200, &released_lease("9"));
    let (_, send) = next(&mut server, Method::PUT, PATH).await;
    respond(send, 409, &conflict());
    // The other replica won: its Lease is fresh.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &lease("other", "2026-01-01T00:00:00.000000Z", 3, "10"),
    );
    stop.cancel();
    assert_eq!(crate::testing::within(acquiring).await.unwrap(), None);
}

/// A renewal that conflicts is no renewal: the leader retries, and loses at the renew
/// deadline counted from the last renewal that succeeded.
#[tokio::test(start_paused = true)]
async fn a_conflicting_renewal_does_not_extend_leadership() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let holding = tokio::spawn(async move {
        let mut leadership = elector.acquire(&stop).await.unwrap();
        let acquired = leadership.renewed;
        (elector.hold(&mut leadership, &stop).await, acquired)
    });
    grant(&mut server).await;
    let acquired_at = Instant::now();
    // Renewals at 2, 4, 6 and 8 s all conflict; at 10 s the deadline has come.
    for (round, version) in ["2", "3", "4", "5"].into_iter().enumerate() {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(
            Instant::now() - acquired_at,
            Duration::from_secs(2 * (round as u64 + 1))
        );
        respond(
            send,
            200,
            &lease("me", "2026-01-01T00:00:00.000000Z", 0, version),
        );
        let (_, send) = next(&mut server, Method::PUT, PATH).await;
        respond(send, 409, &conflict());
    }
    let (held, acquired) = crate::testing::within(holding).await.unwrap();
    assert_eq!(
        held,
        Held::Lost {
            last_renewed: acquired
        }
    );
    assert_eq!(Instant::now() - acquired, Duration::from_secs(10));
}

/// The boundary of the lease expiry: a follower that has seen the Lease unchanged for
/// exactly the lease duration, on its own clock, takes it over.
#[tokio::test(start_paused = true)]
async fn a_follower_takes_over_exactly_when_the_lease_duration_has_passed() {
    let (mut elector, mut server) = elector();
    let acquiring = tokio::spawn(async move { elector.acquire(&CancellationToken::new()).await });
    let held = lease("other", "2026-01-01T00:00:00.000000Z", 3, "5");
    let started = Instant::now();
    // Seen first at 0 s, then at 2, 4, ..., 12 s.
    for _ in 0..7 {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &held);
    }
    // The answer to the try at 14 s comes at 15 s.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    respond(send, 200, &held);
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(15),
        "taken over at once"
    );
    respond(send, 200, &body);
    assert!(crate::testing::within(acquiring).await.unwrap().is_some());
}

/// The other side of the boundary: a millisecond (tokio's timer resolution) before the lease
/// duration has passed on the follower's clock, the Lease is still the other replica's.
#[tokio::test(start_paused = true)]
async fn a_follower_does_not_take_over_a_moment_before_the_lease_duration_has_passed() {
    let (mut elector, mut server) = elector();
    let acquiring = tokio::spawn(async move { elector.acquire(&CancellationToken::new()).await });
    let held = lease("other", "2026-01-01T00:00:00.000000Z", 3, "5");
    let started = Instant::now();
    for _ in 0..7 {
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &held);
    }
    // The answer to the try at 14 s comes a millisecond before 15 s.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    let early = Duration::from_millis(14_999);
    tokio::time::sleep_until(started + early).await;
    respond(send, 200, &held);
    // No takeover: the next request is the next try, a retry period later.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert_eq!(started.elapsed(), early + Duration::from_secs(2));
    respond(send, 200, &held);
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    respond(send, 200, &body);
    assert!(crate::testing::within(acquiring).await.unwrap().is_some());
}

/// Each try to acquire has a timeout: an API server that never answers delays the next try
/// by the renew deadline, not for ever.
#[tokio::test(start_paused = true)]
async fn a_try_to_acquire_that_gets_no_answer_gives_up_at_the_renew_deadline() {
    let (mut elector, mut server) = elector();
    let stop = CancellationToken::new();
    let acquiring = {
        let stop = stop.clone();
        tokio::spawn(async move { elector.acquire(&stop).await })
    };
    let started = Instant::now();
    let (_, unanswered) = next(&mut server, Method::GET, PATH).await;
    // Given up at 10 s; the next try comes a retry period later.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    assert_eq!(started.elapsed(), Duration::from_secs(12));
    respond(
        send,
        200,
        &lease("other", "2026-01-01T00:00:00.000000Z", 0, "1"),
    );
    stop.cancel();
    assert_eq!(crate::testing::within(acquiring).await.unwrap(), None);
    drop(unanswered);
}

#[tokio::test(start_paused = true)]
async fn the_leader_releases_the_lease_on_shutdown() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        elector.release().await
    });
    grant(&mut server).await;
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(body["metadata"]["resourceVersion"], "1");
    assert_eq!(
        timeless(&body["spec"]),
        json!({"leaseDurationSeconds": 1, "leaseTransitions": 0}),
        "no holder"
    );
    respond(send, 200, &body);
    assert!(crate::testing::within(releasing).await.unwrap().unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_release_refused_for_another_reason_than_a_conflict_is_not_retried() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        elector.release().await.map_err(|error| error.to_string())
    });
    grant(&mut server).await;
    let (_, send) = next(&mut server, Method::PUT, PATH).await;
    respond(send, 500, &failure(500));
    let error = crate::testing::within(releasing)
        .await
        .unwrap()
        .unwrap_err();
    assert!(error.starts_with("ApiError: "), "{error}");
    assert_no_request(&mut server).await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_releases_nothing() {
    let (mut elector, _server) = elector();
    assert!(!elector.release().await.unwrap());
}

/// A leader whose release conflicts with its own renewal, still in flight when the
/// controllers stopped, reads the Lease again and releases it at its new version.
#[tokio::test(start_paused = true)]
async fn a_release_that_conflicts_is_retried_at_the_new_version_while_the_lease_is_ours() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        elector.release().await.map_err(|error| error.to_string())
    });
    grant(&mut server).await;
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(body["metadata"]["resourceVersion"], "1");
    respond(send, 409, &conflict());
    // The renewal in flight made version 2; the Lease is still this replica's.
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &lease("me", "2026-01-01T00:00:02.000000Z", 0, "2"),
    );
    let (body, send) = next(&mut server, Method::PUT, PATH).await;
    assert_eq!(body["metadata"]["resourceVersion"], "2");
    assert_eq!(
        timeless(&body["spec"]),
        json!({"leaseDurationSeconds": 1, "leaseTransitions": 0}),
        "no holder"
    );
    respond(send, 200, &body);
    assert_eq!(crate::testing::within(releasing).await.unwrap(), Ok(true));
    assert_no_request(&mut server).await;
}

/// A release that conflicts because another replica took the Lease meanwhile releases
/// nothing: the Lease is no longer this replica's to give up.
#[tokio::test(start_paused = true)]
async fn a_release_that_conflicts_with_another_holder_releases_nothing() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        elector.release().await.map_err(|error| error.to_string())
    });
    grant(&mut server).await;
    let (_, send) = next(&mut server, Method::PUT, PATH).await;
    respond(send, 409, &conflict());
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &lease("other", "2026-01-01T00:00:20.000000Z", 1, "3"),
    );
    assert_eq!(crate::testing::within(releasing).await.unwrap(), Ok(false));
    assert_no_request(&mut server).await;
}

/// A Lease that changes at every try is released a bounded number of times, then the
/// release fails (the others take over after the lease duration).
#[tokio::test(start_paused = true)]
async fn a_release_that_keeps_conflicting_gives_up_after_a_bounded_number_of_attempts() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        elector.release().await.map_err(|error| error.to_string())
    });
    grant(&mut server).await;
    for attempt in 1..=RELEASE_ATTEMPTS {
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert_eq!(body["metadata"]["resourceVersion"], attempt.to_string());
        respond(send, 409, &conflict());
        if attempt < RELEASE_ATTEMPTS {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            let version = (attempt + 1).to_string();
            respond(
                send,
                200,
                &lease("me", "2026-01-01T00:00:00.000000Z", 0, &version),
            );
        }
    }
    let error = crate::testing::within(releasing)
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        error.starts_with("the Lease changed during each of 3 attempts to release it: "),
        "{error}"
    );
    assert_no_request(&mut server).await;
}

/// Releasing has a timeout: an API server that never answers delays shutdown by
/// `RELEASE_TIMEOUT`, not for ever.
#[tokio::test(start_paused = true)]
async fn a_release_that_gets_no_answer_gives_up_at_the_release_timeout() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        let started = Instant::now();
        let released = elector.release().await.map_err(|error| error.to_string());
        (released, started.elapsed())
    });
    grant(&mut server).await;
    let (_, unanswered) = next(&mut server, Method::PUT, PATH).await;
    let (released, took) = crate::testing::within(releasing).await.unwrap();
    assert_eq!(released, Err("no answer within 5s".to_owned()));
    assert_eq!(took, RELEASE_TIMEOUT);
    drop(unanswered);
}

/// The attempts of a release share one `RELEASE_TIMEOUT`: a retry does not get a new one.
#[tokio::test(start_paused = true)]
async fn the_attempts_of_a_release_share_one_timeout() {
    let (mut elector, mut server) = elector();
    let releasing = tokio::spawn(async move {
        elector.acquire(&CancellationToken::new()).await.unwrap();
        let started = Instant::now();
        let released = elector.release().await.map_err(|error| error.to_string());
        (released, started.elapsed())
    });
    grant(&mut server).await;
    let (_, send) = next(&mut server, Method::PUT, PATH).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    respond(send, 409, &conflict());
    let (_, send) = next(&mut server, Method::GET, PATH).await;
    respond(
        send,
        200,
        &lease("me", "2026-01-01T00:00:00.000000Z", 0, "2"),
    );
    let (_, unanswered) = next(&mut server, Method::PUT, PATH).await;
    let (released, took) = crate::testing::within(releasing).await.unwrap();
    assert_eq!(released, Err("no answer within 5s".to_owned()));
    assert_eq!(took, RELEASE_TIMEOUT);
    drop(unanswered);
}

/// Checks that the elector sends no further request.
async fn assert_no_request(server: &mut ApiServer) {
    if let Ok(Some((request, _))) =
        tokio::time::timeout(Duration::from_secs(60), server.next_request()).await
    {
        panic!("unexpected {} {}", request.method(), request.uri().path());
    }
}
