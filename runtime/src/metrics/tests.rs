use super::*;

/// A reconcile counts as an active worker from its start until its timer is dropped, and
/// the process metrics of the dashboards are served beside the reconcile metrics.
#[test]
fn active_workers_and_process_metrics_are_encoded() {
    let metrics = Metrics::default();
    metrics.reconcile.init("apps");
    let started = metrics.encode();
    for line in [
        "controller_runtime_reconcile_total{controller=\"apps\",result=\"error\"} 0",
        "controller_runtime_reconcile_total{controller=\"apps\",result=\"success\"} 0",
        "controller_runtime_reconcile_errors_total{controller=\"apps\"} 0",
        "controller_runtime_active_workers{controller=\"apps\"} 0",
        "controller_runtime_reconcile_time_seconds_count{controller=\"apps\"} 0",
    ] {
        assert!(
            started.lines().any(|l| l == line),
            "no `{line}` in\n{started}"
        );
    }
    let first = metrics.reconcile.start("apps");
    let second = metrics.reconcile.start("apps");
    assert_eq!(
        metric_line(&metrics.encode(), "controller_runtime_active_workers{").as_deref(),
        Some("controller_runtime_active_workers{controller=\"apps\"} 2")
    );
    drop(first);
    drop(second);
    let encoded = metrics.encode();
    assert_eq!(
        metric_line(&encoded, "controller_runtime_active_workers{").as_deref(),
        Some("controller_runtime_active_workers{controller=\"apps\"} 0")
    );
    for name in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ",
        "process_start_time_seconds ",
        "process_open_fds ",
        "process_max_fds ",
    ] {
        assert!(
            metric_line(&encoded, name).is_some(),
            "no {name}in\n{encoded}"
        );
    }
}

/// The first line of the exposition that starts with `prefix`.
fn metric_line(encoded: &str, prefix: &str) -> Option<String> {
    encoded
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(str::to_owned)
}

#[test]
fn the_leader_gauge_follows_the_election() {
    let metrics = Metrics::default();
    let gauge =
        |metrics: &Metrics| metric_line(&metrics.encode(), "leader_election_master_status ");
    assert_eq!(
        gauge(&metrics).as_deref(),
        Some("leader_election_master_status 0")
    );
    metrics.set_leader(true);
    assert_eq!(
        gauge(&metrics).as_deref(),
        Some("leader_election_master_status 1")
    );
    metrics.set_leader(false);
    assert_eq!(
        gauge(&metrics).as_deref(),
        Some("leader_election_master_status 0")
    );
}

use axum::body::{Body, to_bytes};
use http::Request;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use tower::ServiceExt;
use tower_test::mock;

type ApiServer =
    mock::Handle<http::Request<kube::client::Body>, http::Response<kube::client::Body>>;

fn mocked_client() -> (Client, ApiServer) {
    let (service, handle) =
        mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
    (Client::new(service, "default"), handle)
}

/// Answers the next API request with `response`; returns the request's path and body.
async fn answer(server: &mut ApiServer, response: Value) -> (String, Value) {
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
        .await
        .expect("an API request within 5 s")
        .expect("the client is connected");
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect_bytes().await.unwrap();
    send.send_response(
        http::Response::builder()
            .body(kube::client::Body::from(
                serde_json::to_vec(&response).unwrap(),
            ))
            .unwrap(),
    );
    (path, serde_json::from_slice(&body).unwrap())
}

/// Fails if the API server gets a request.
async fn expect_no_request(server: &mut ApiServer) {
    if let Ok(Some((request, _))) =
        tokio::time::timeout(Duration::from_millis(100), server.next_request()).await
    {
        panic!(
            "unexpected API request {} {}",
            request.method(),
            request.uri()
        );
    }
}

fn authenticated(user: &str) -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
        "status": {"authenticated": true, "user": {"username": user, "groups": ["system:serviceaccounts"]}}
    })
}

fn unauthenticated() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}, "status": {"authenticated": false}})
}

fn access(allowed: bool) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}, "status": {"allowed": allowed}})
}

async fn scrape_path(
    router: &Router,
    path: &str,
    authorization: Option<&str>,
) -> (StatusCode, String) {
    let mut request = Request::get(path);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    // Bounded: an authorizer waiting on an API server that never answers fails the test.
    let response =
        crate::testing::within(router.clone().oneshot(request.body(Body::empty()).unwrap()))
            .await
            .unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

async fn scrape(router: &Router, token: Option<&str>) -> (StatusCode, String) {
    let authorization = token.map(|token| format!("Bearer {token}"));
    scrape_path(router, "/metrics", authorization.as_deref()).await
}

fn secure() -> (Router, ApiServer) {
    let (client, server) = mocked_client();
    (
        router(Arc::default(), Some(Authorizer::new(client))),
        server,
    )
}

#[tokio::test]
async fn reconcile_metrics_use_controller_runtime_names() {
    let metrics = Metrics::default();
    metrics.reconcile.success("appotp");
    metrics.reconcile.error("appotp");
    drop(metrics.reconcile.start("appotp"));
    metrics.set_leader(true);
    let text = metrics.encode();
    for line in [
        r#"controller_runtime_reconcile_total{controller="appotp",result="success"} 1"#,
        r#"controller_runtime_reconcile_total{controller="appotp",result="error"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="appotp"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="appotp"} 1"#,
        "leader_election_master_status 1",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[tokio::test]
async fn insecure_metrics_need_no_token() {
    let (status, body) = scrape(&router(Arc::default(), None), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.ends_with("# EOF\n"), "{body}");
}

#[tokio::test]
async fn requests_without_a_bearer_token_are_refused_without_asking() {
    let (router, mut server) = secure();
    for authorization in [
        None,
        Some("Basic dXNlcjpwYXNz"),
        Some("Bearer "),
        Some("Bearer"),
    ] {
        let (status, _) = scrape_path(&router, "/metrics", authorization).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{authorization:?}");
    }
    expect_no_request(&mut server).await;
}

#[tokio::test]
async fn unknown_paths_are_not_found_without_asking() {
    let (router, mut server) = secure();
    assert_eq!(
        scrape_path(&router, "/debug", None).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        scrape_path(&router, "/metrics/x", Some("Bearer t0ken"))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    expect_no_request(&mut server).await;
}

#[tokio::test]
async fn secure_metrics_ask_the_api_server_once_and_remember() {
    let (router, mut server) = secure();
    let api = tokio::spawn(async move {
        let (path, body) = answer(
            &mut server,
            authenticated("system:serviceaccount:monitoring:prometheus"),
        )
        .await;
        assert_eq!(path, "/apis/authentication.k8s.io/v1/tokenreviews");
        assert_eq!(
            body,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {}, "spec": {"token": "t0ken"}})
        );
        let (path, body) = answer(&mut server, access(true)).await;
        assert_eq!(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
        assert_eq!(
            body,
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
                "spec": {
                    "user": "system:serviceaccount:monitoring:prometheus",
                    "groups": ["system:serviceaccounts"],
                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
                }
            })
        );
        server
    });
    // The scheme is case-insensitive, as RFC 9110 has it.
    let (status, _) = scrape_path(&router, "/metrics", Some("bearer t0ken")).await;
    assert_eq!(status, StatusCode::OK);
    let mut server = crate::testing::within(api).await.unwrap();
    assert_eq!(scrape(&router, Some("t0ken")).await.0, StatusCode::OK);
    expect_no_request(&mut server).await;
}

#[tokio::test(start_paused = true)]
async fn answers_expire_as_in_controller_runtime() {
    let (router, mut server) = secure();
    let scraping = {
        let router = router.clone();
        tokio::spawn(async move { scrape(&router, Some("t0ken")).await.0 })
    };
    answer(&mut server, authenticated("prometheus")).await;
    answer(&mut server, access(true)).await;
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );

    // After a minute the token is reviewed again; the access answer still holds.
    tokio::time::advance(TOKEN_CACHE_TTL + Duration::from_secs(1)).await;
    let scraping = {
        let router = router.clone();
        tokio::spawn(async move { scrape(&router, Some("t0ken")).await.0 })
    };
    let (path, _) = answer(&mut server, authenticated("prometheus")).await;
    assert_eq!(path, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );
    expect_no_request(&mut server).await;

    // A denial is remembered for 30 seconds only.
    let scraping = {
        let router = router.clone();
        tokio::spawn(async move { scrape(&router, Some("alice")).await.0 })
    };
    answer(&mut server, authenticated("alice")).await;
    answer(&mut server, access(false)).await;
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        scrape(&router, Some("alice")).await.0,
        StatusCode::FORBIDDEN
    );
    tokio::time::advance(DENY_CACHE_TTL + Duration::from_secs(1)).await;
    let scraping = {
        let router = router.clone();
        tokio::spawn(async move { scrape(&router, Some("alice")).await.0 })
    };
    let (path, _) = answer(&mut server, access(true)).await;
    assert_eq!(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );
}

/// Scrapes with `token` in the background; the status.
fn scrape_later(router: &Router, token: &str) -> tokio::task::JoinHandle<StatusCode> {
    let router = router.clone();
    let token = token.to_owned();
    tokio::spawn(async move { scrape(&router, Some(&token)).await.0 })
}

/// Pins controller-runtime's times with literal numbers, not the constants: a token review
/// holds one minute, an allowing access review five minutes (not an hour), a denying one 30 s.
#[tokio::test(start_paused = true)]
async fn an_allowed_access_review_is_reused_for_five_minutes_and_no_longer() {
    assert_eq!(
        (TOKEN_CACHE_TTL, ALLOW_CACHE_TTL, DENY_CACHE_TTL),
        (
            Duration::from_secs(60),
            Duration::from_secs(300),
            Duration::from_secs(30)
        )
    );
    let (router, mut server) = secure();
    let scraping = scrape_later(&router, "t0ken");
    answer(&mut server, authenticated("prometheus")).await;
    answer(&mut server, access(true)).await;
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );
    // At 4 min 59 s the token is reviewed again (its minute is over), the access is not.
    tokio::time::advance(Duration::from_secs(299)).await;
    let scraping = scrape_later(&router, "t0ken");
    let (path, _) = answer(&mut server, authenticated("prometheus")).await;
    assert_eq!(path, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );
    expect_no_request(&mut server).await;
    // At 5 min 1 s the access is reviewed again.
    tokio::time::advance(Duration::from_secs(2)).await;
    let scraping = scrape_later(&router, "t0ken");
    let (path, _) = answer(&mut server, access(true)).await;
    assert_eq!(path, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_token_over_the_limit_is_refused_without_a_review() {
    let (router, mut server) = secure();
    assert_eq!(MAX_TOKEN_BYTES, 16 * 1024);
    for length in [MAX_TOKEN_BYTES + 1, 400 * 1024] {
        let token = "a".repeat(length);
        assert_eq!(
            scrape(&router, Some(&token)).await.0,
            StatusCode::UNAUTHORIZED
        );
        expect_no_request(&mut server).await;
    }
    // A token of exactly the limit is reviewed.
    let scraping = scrape_later(&router, &"b".repeat(MAX_TOKEN_BYTES));
    let (path, body) = answer(&mut server, unauthenticated()).await;
    assert_eq!(path, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(
        body["spec"]["token"].as_str().map(str::len),
        Some(MAX_TOKEN_BYTES)
    );
    assert_eq!(
        crate::testing::within(scraping).await.unwrap(),
        StatusCode::UNAUTHORIZED
    );
}

/// 2,000 distinct tokens of the largest size (32 MB of tokens) leave at most
/// [`CACHE_CAPACITY`] entries of a few dozen bytes: the caches keep keyed hashes, never the
/// tokens.
#[tokio::test]
async fn a_flood_of_large_distinct_tokens_keeps_the_caches_small() {
    let (client, mut server) = mocked_client();
    let authorizer = Authorizer::new(client);
    let router = router(Arc::default(), Some(authorizer.clone()));
    let api = tokio::spawn(async move {
        for _ in 0..2000 {
            answer(&mut server, unauthenticated()).await;
        }
    });
    for index in 0..2000 {
        let token = format!("{index:05}{}", "t".repeat(MAX_TOKEN_BYTES - 5));
        assert_eq!(
            scrape(&router, Some(&token)).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    crate::testing::within(api).await.unwrap();
    let rejected = lock(&authorizer.inner.rejected);
    assert_eq!(rejected.entries.len(), CACHE_CAPACITY);
    assert!(
        rejected.bytes <= CACHE_CAPACITY * 64 && rejected.bytes > 0,
        "the rejected-token cache takes {} bytes",
        rejected.bytes
    );
    assert_eq!(lock(&authorizer.inner.tokens).entries.len(), 0);
}

/// A key is the HMAC of the token under this authorizer's own random key: two authorizers
/// name one token differently, and distinct lists of parts never share a name.
#[tokio::test]
async fn cache_keys_are_keyed_hashes() {
    let (first, _) = mocked_client();
    let (second, _) = mocked_client();
    let (first, second) = (Authorizer::new(first), Authorizer::new(second));
    assert_eq!(first.digest(&[b"token"]), first.digest(&[b"token"]));
    assert_ne!(first.digest(&[b"token"]), second.digest(&[b"token"]));
    assert_ne!(first.digest(&[b"ab", b"c"]), first.digest(&[b"a", b"bc"]));
}

fn user(groups: usize) -> UserInfo {
    UserInfo {
        username: Some("system:serviceaccount:monitoring:prometheus".into()),
        groups: Some((0..groups).map(|g| format!("group-{g:06}")).collect()),
        ..UserInfo::default()
    }
}

#[test]
fn the_caches_hold_their_bytes_and_entries_at_most() {
    let ttl = Duration::from_secs(60);
    // The bounds the documentation gives: 1024 entries and 4 MiB a cache.
    assert_eq!((CACHE_CAPACITY, CACHE_BYTES), (1024, 4 * 1024 * 1024));
    // Bounded by bytes: answers of about 36 KB each, in a cache of 1 MB.
    let mut cache = Cache::new(1024, 1024 * 1024);
    let big = user(1000);
    let cost = Cache::cost(&big);
    assert!(cost > 30_000, "{cost}");
    for key in 0..100u8 {
        cache.insert([key; 32], big.clone(), ttl, ttl);
        assert!(cache.bytes <= 1024 * 1024, "{} bytes", cache.bytes);
    }
    assert_eq!(cache.entries.len(), 1024 * 1024 / cost);
    assert_eq!(cache.bytes, cache.entries.len() * cost);
    // The newest stays; the ones that expire first went.
    assert!(matches!(cache.get(&[99; 32]), Lookup::Fresh(_)));
    assert!(matches!(cache.get(&[0; 32]), Lookup::Missing));
    // An answer larger than the whole cache is not kept, and pushes nothing out.
    let before = cache.entries.len();
    cache.insert([200; 32], user(100_000), ttl, ttl);
    assert!(matches!(cache.get(&[200; 32]), Lookup::Missing));
    assert_eq!(cache.entries.len(), before);
    // Replacing an entry does not count it twice; removing gives its bytes back.
    cache.insert([99; 32], user(1), ttl, ttl);
    assert_eq!(cache.bytes, (before - 1) * cost + Cache::cost(&user(1)));
    cache.remove(&[99; 32]);
    assert_eq!(cache.bytes, (before - 1) * cost);
    // Bounded by entries.
    let mut cache = Cache::new(3, usize::MAX);
    for key in 0..10u8 {
        cache.insert([key; 32], true, ttl, ttl);
    }
    assert_eq!(cache.entries.len(), 3);
    assert_eq!(cache.bytes, 3 * Cache::cost(&true));
}

#[test]
fn a_user_weighs_its_strings_and_their_holders() {
    let user = UserInfo {
        username: Some("ab".into()),
        uid: Some("c".into()),
        groups: Some(vec!["de".into(), "f".into()]),
        extra: Some([("k".to_owned(), vec!["v".to_owned()])].into()),
    };
    // 2 + 1, groups (2 + 24) + (1 + 24), extra 1 + 48 + (1 + 24).
    assert_eq!(user.weight(), 128);
    assert_eq!(UserInfo::default().weight(), 0);
    assert_eq!(true.weight(), 0);
}

/// Pins the instants at which an answer stops being fresh and its key is forgotten.
#[tokio::test(start_paused = true)]
async fn an_answer_expires_and_its_key_is_forgotten_at_their_instants() {
    let mut cache = Cache::new(8, usize::MAX);
    cache.insert(
        [1; 32],
        true,
        Duration::from_secs(60),
        Duration::from_secs(120),
    );
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(matches!(cache.get(&[1; 32]), Lookup::Fresh(true)));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(matches!(cache.get(&[1; 32]), Lookup::Expired));
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(matches!(cache.get(&[1; 32]), Lookup::Expired));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(matches!(cache.get(&[1; 32]), Lookup::Missing));
    assert_eq!((cache.entries.len(), cache.bytes), (0, 0));
}

#[test]
fn answers_that_fill_the_cache_exactly_are_all_kept() {
    let ttl = Duration::from_secs(60);
    let cost = Cache::<bool>::cost(&true);
    let mut cache = Cache::new(8, cost);
    cache.insert([1; 32], true, ttl, ttl);
    assert!(matches!(cache.get(&[1; 32]), Lookup::Fresh(true)));
    let mut cache = Cache::new(8, 2 * cost);
    cache.insert([1; 32], true, ttl, ttl);
    cache.insert([2; 32], false, ttl, ttl);
    assert!(matches!(cache.get(&[1; 32]), Lookup::Fresh(true)));
    assert!(matches!(cache.get(&[2; 32]), Lookup::Fresh(false)));
    assert_eq!(cache.bytes, 2 * cost);
}

/// The access review asks for the identity the token review gave, whole: a policy may
/// depend on the user's uid or extra fields, as with `kubectl auth can-i --as`.
#[tokio::test]
async fn the_access_review_carries_the_whole_identity() {
    let (router, mut server) = secure();
    let api = tokio::spawn(async move {
        answer(
            &mut server,
            json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
                "status": {"authenticated": true, "user": {
                    "username": "system:serviceaccount:monitoring:prometheus",
                    "uid": "0b9c4e5e-1d1a-4d6e-9f0e-6f3a2c1b0a99",
                    "groups": ["system:serviceaccounts"],
                    "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]}
                }}
            }),
        )
        .await;
        let (_, body) = answer(&mut server, access(true)).await;
        assert_eq!(
            body["spec"],
            json!({
                "user": "system:serviceaccount:monitoring:prometheus",
                "uid": "0b9c4e5e-1d1a-4d6e-9f0e-6f3a2c1b0a99",
                "groups": ["system:serviceaccounts"],
                "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
            })
        );
    });
    let (status, _) = scrape_path(&router, "/metrics", Some("Bearer t0ken")).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(5), api)
        .await
        .expect("the API server task ends")
        .unwrap();
}

#[tokio::test]
async fn unknown_tokens_are_rejected() {
    let (router, mut server) = secure();
    let api = tokio::spawn(async move {
        answer(&mut server, unauthenticated()).await;
        server
    });
    assert_eq!(
        scrape(&router, Some("forged")).await.0,
        StatusCode::UNAUTHORIZED
    );
    let mut server = crate::testing::within(api).await.unwrap();
    assert_eq!(
        scrape(&router, Some("forged")).await.0,
        StatusCode::UNAUTHORIZED
    );
    expect_no_request(&mut server).await;
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_random_tokens_takes_few_api_requests_and_locks_nobody_out() {
    let (router, mut server) = secure();
    // The API server takes a second per review; it knows one token, Prometheus'. Count
    // how many reviews are in flight at once.
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let unknown_reviewed = Arc::new(AtomicUsize::new(0));
    let api = {
        let (in_flight, most, unknown_reviewed) =
            (in_flight.clone(), most.clone(), unknown_reviewed.clone());
        tokio::spawn(async move {
            while let Ok(Some((request, send))) =
                tokio::time::timeout(Duration::from_secs(600), server.next_request()).await
            {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let path = request.uri().path().to_owned();
                let body: Value =
                    serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                        .unwrap();
                let answer = if path.ends_with("/subjectaccessreviews") {
                    access(true)
                } else if body["spec"]["token"] == "prometheus" {
                    authenticated("prometheus")
                } else {
                    unknown_reviewed.fetch_add(1, Ordering::SeqCst);
                    unauthenticated()
                };
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    send.send_response(
                        http::Response::builder()
                            .body(kube::client::Body::from(
                                serde_json::to_vec(&answer).unwrap(),
                            ))
                            .unwrap(),
                    );
                });
            }
        })
    };
    assert_eq!(scrape(&router, Some("prometheus")).await.0, StatusCode::OK);

    // Two floods: while Prometheus' answer is cached, and after it expired.
    for round in 0..2 {
        if round == 1 {
            tokio::time::advance(TOKEN_CACHE_TTL + Duration::from_secs(1)).await;
        }
        let before = unknown_reviewed.load(Ordering::SeqCst);
        let flood: Vec<_> = (0..200)
            .map(|i| {
                let router = router.clone();
                tokio::spawn(async move {
                    scrape(&router, Some(&format!("random-{round}-{i}")))
                        .await
                        .0
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            scrape(&router, Some("prometheus")).await.0,
            StatusCode::OK,
            "round {round}: Prometheus is served during the flood"
        );
        let mut statuses = HashMap::new();
        for request in flood {
            *statuses.entry(request.await.unwrap()).or_insert(0) += 1;
        }
        let reviewed = unknown_reviewed.load(Ordering::SeqCst) - before;
        assert_eq!(
            statuses.get(&StatusCode::UNAUTHORIZED),
            Some(&reviewed),
            "{statuses:?}"
        );
        assert_eq!(
            statuses.get(&StatusCode::TOO_MANY_REQUESTS),
            Some(&(200 - reviewed)),
            "{statuses:?}"
        );
        assert!(
            reviewed <= MAX_CONCURRENT_REVIEWS,
            "{reviewed} unknown tokens reviewed"
        );
    }
    api.abort();
    assert!(
        most.load(Ordering::SeqCst) <= MAX_CONCURRENT_REVIEWS + RESERVED_REVIEWS,
        "{} reviews were in flight at once",
        most.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn an_api_server_error_is_a_clean_503() {
    let (router, mut server) = secure();
    let api = tokio::spawn(async move {
        let (_, send) = tokio::time::timeout(Duration::from_secs(5), server.next_request())
            .await
            .unwrap()
            .unwrap();
        send.send_error(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
    });
    let (status, body) = scrape(&router, Some("t0ken")).await;
    crate::testing::within(api).await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "cannot authorize the request: TokenReview failed");
}

#[tokio::test(start_paused = true)]
async fn an_api_server_that_does_not_answer_is_a_clean_503() {
    let (router, mut server) = secure();
    let api = tokio::spawn(async move {
        // Take the request and never answer it.
        let request = tokio::time::timeout(Duration::from_secs(5), server.next_request())
            .await
            .expect("a TokenReview within 5 s");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop(request);
    });
    let started = Instant::now();
    let (status, body) = scrape(&router, Some("t0ken")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "cannot authorize the request: TokenReview timed out after 10s"
    );
    assert_eq!(started.elapsed(), REVIEW_TIMEOUT);
    api.abort();
}
