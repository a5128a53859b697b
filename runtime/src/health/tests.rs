use super::*;
use axum::body::{Body, to_bytes};
use http::Request;
use tower::ServiceExt;

async fn get(health: &Health, path: &str) -> (StatusCode, String) {
    let response = router(health.clone())
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn ready_only_when_every_check_passed() {
    let health = Health::default();
    assert_eq!(get(&health, "/readyz").await.0, StatusCode::OK);

    let first = health.readiness_check("appotp");
    let second = health.readiness_check("other");
    let (status, body) = get(&health, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[-]appotp not ready\n[-]other not ready\nreadyz check failed"
    );

    first.ready();
    assert_eq!(
        get(&health, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    second.ready();
    let (status, body) = get(&health, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "[+]appotp ok\n[+]other ok\nok");
}

#[tokio::test]
async fn live_until_a_failure_is_reported_whose_reason_is_withheld() {
    let health = Health::default();
    assert_eq!(
        get(&health, "/healthz").await,
        (StatusCode::OK, "ok".into())
    );
    assert_eq!(health.failure(), None);
    health.fail("controller appotp stopped: secret-token-in-error");
    health.fail("a later failure does not hide the first");
    let (status, body) = get(&health, "/healthz").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        "[-]manager failed: reason withheld\nhealthz check failed"
    );
    assert!(!body.contains("secret"), "{body}");
    // The manager's own code still has the reason.
    assert_eq!(
        health.failure().as_deref(),
        Some("controller appotp stopped: secret-token-in-error")
    );
}

#[test]
fn a_failure_is_logged_with_its_reason_when_it_is_reported() {
    let health = Health::default();
    let logged = crate::testing::logged(|| health.fail("controller appotp stopped"));
    assert!(logged.contains("ERROR"), "{logged}");
    assert!(
        logged.contains("reason=controller appotp stopped"),
        "{logged}"
    );
    assert!(logged.contains("liveness check failed"), "{logged}");
}

#[tokio::test]
async fn unknown_paths_are_not_found() {
    assert_eq!(
        get(&Health::default(), "/metrics").await.0,
        StatusCode::NOT_FOUND
    );
}

#[test]
fn a_check_that_starts_failing_is_logged_once_until_it_passes_again() {
    let health = Health::default();
    let check = health.readiness_check("ship");
    let logged = crate::testing::logged(|| {
        check.not_ready("not started: a check starts failing");
        check.ready();
        check.not_ready("the watch is down");
        check.not_ready("the watch is still down");
        check.ready();
        check.not_ready("a relist");
    });
    let lines: Vec<&str> = logged.lines().collect();
    assert_eq!(
        lines,
        [
            r#" WARN rsbuilder_runtime::health: readiness check failing: /readyz answers 503 check=ship reason=the watch is down"#,
            r#" WARN rsbuilder_runtime::health: readiness check failing: /readyz answers 503 check=ship reason=a relist"#,
        ]
    );
}
