//! Liveness and readiness probes, served as `/healthz` and `/readyz`.
//!
//! `/healthz` answers 200 while the manager works and 500 once something it runs has failed, so
//! that the kubelet restarts the pod. The probes need no authentication, so `/healthz` withholds
//! the reason of a failure, as controller-runtime's does: it is logged when the failure is
//! reported, and [`Health::failure`] returns it. `/readyz` answers 200 once every registered check passed
//! (each controller registers one that passes when its cache has synced) and 503 before.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

/// The name of the liveness check in `/healthz` answers.
const LIVENESS_CHECK: &str = "manager";

/// The shared health state of the manager. Cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<Probes>>,
}

#[derive(Default)]
struct Probes {
    failure: Option<String>,
    checks: BTreeMap<String, bool>,
}

impl Health {
    /// Registers a readiness check named `name` that fails until [`ReadyCheck::ready`] is called.
    pub fn readiness_check(&self, name: &str) -> ReadyCheck {
        self.lock().checks.insert(name.to_owned(), false);
        ReadyCheck {
            health: self.clone(),
            name: name.to_owned(),
        }
    }

    /// Marks the manager as failed: `/healthz` answers 500 from now on. `reason` is logged now,
    /// and kept for [`Health::failure`]; `/healthz` does not show it.
    pub fn fail(&self, reason: impl Into<String>) {
        let reason = reason.into();
        tracing::error!(check = LIVENESS_CHECK, %reason, "liveness check failed: /healthz answers 500 from now on");
        self.lock().failure.get_or_insert(reason);
    }

    /// The reason of the first failure reported with [`Health::fail`], if any.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    /// The `/healthz` answer: `ok`, or controller-runtime's answer to unauthenticated clients,
    /// without the reason.
    pub fn liveness(&self) -> (StatusCode, String) {
        match &self.lock().failure {
            None => (StatusCode::OK, "ok".to_owned()),
            Some(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("[-]{LIVENESS_CHECK} failed: reason withheld\nhealthz check failed"),
            ),
        }
    }

    /// The `/readyz` answer: one `[+]name ok` or `[-]name not ready` line per check, as
    /// controller-runtime prints them.
    pub fn readiness(&self) -> (StatusCode, String) {
        let state = self.lock();
        let mut body = String::new();
        for (name, ready) in &state.checks {
            let mark = if *ready { "[+]" } else { "[-]" };
            let word = if *ready { "ok" } else { "not ready" };
            body.push_str(&format!("{mark}{name} {word}\n"));
        }
        if state.checks.values().all(|ready| *ready) {
            body.push_str("ok");
            (StatusCode::OK, body)
        } else {
            body.push_str("readyz check failed");
            (StatusCode::SERVICE_UNAVAILABLE, body)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Probes> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One readiness check, held by whatever it reports on.
#[derive(Clone)]
pub struct ReadyCheck {
    health: Health,
    name: String,
}

impl ReadyCheck {
    /// Marks this check as passing.
    pub fn ready(&self) {
        self.health.lock().checks.insert(self.name.clone(), true);
    }

    /// Marks this check as failing again, for `reason`, which is logged when it starts failing.
    pub fn not_ready(&self, reason: &str) {
        let was = self.health.lock().checks.insert(self.name.clone(), false);
        if was != Some(false) {
            tracing::warn!(check = %self.name, %reason, "readiness check failing: /readyz answers 503");
        }
    }
}

/// The probe routes.
pub fn router(health: Health) -> Router {
    Router::new()
        .route(
            "/healthz",
            get(|State(h): State<Health>| async move { h.liveness() }),
        )
        .route(
            "/readyz",
            get(|State(h): State<Health>| async move { h.readiness() }),
        )
        .with_state(health)
}

#[cfg(test)]
mod tests {
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
}
