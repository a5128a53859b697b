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
