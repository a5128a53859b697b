//! Prometheus metrics, served as `/metrics` in the OpenMetrics text format.
//!
//! The reconcile metrics carry controller-runtime's names, so dashboards and alerts written for
//! kubebuilder operators work unchanged. With `--metrics-secure` (the default) a request must
//! carry a bearer token that the API server authenticates (TokenReview) and authorizes for
//! `get` on the non-resource URL `/metrics` (SubjectAccessReview), as controller-runtime's
//! `WithAuthenticationAndAuthorization` filter does; `config/rbac/metrics_reader_role.yaml`
//! grants that.
//!
//! The [`Authorizer`] protects the API server, and with it the controllers' own requests: its
//! answers are cached as controller-runtime caches them (tokens for a minute, allowed requests
//! for five minutes, denied ones for thirty seconds), every review has a timeout, and at most
//! [`MAX_CONCURRENT_REVIEWS`] run at once for unknown tokens. A flood of unknown tokens gets
//! `429 Too Many Requests` rather than a queue of reviews, and cannot lock out the clients
//! that were authenticated before: their tokens stay in a cache of their own, and their
//! reviews have [`RESERVED_REVIEWS`] places of their own.
//!
//! Tokens are never kept: the caches are keyed by an HMAC-SHA256 of the token under a key made
//! at start, as the API server's own token cache is, so an entry costs the same whatever the
//! token's size. A token longer than [`MAX_TOKEN_BYTES`] is refused before any review. Each cache
//! holds at most [`CACHE_CAPACITY`] entries and [`CACHE_BYTES`] bytes.

mod process;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;
use tokio::time::Instant;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long the outcome of a TokenReview is reused.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(60);
/// How long an allowing SubjectAccessReview is reused.
pub const ALLOW_CACHE_TTL: Duration = Duration::from_secs(300);
/// How long a denying SubjectAccessReview is reused.
pub const DENY_CACHE_TTL: Duration = Duration::from_secs(30);
/// How long one review may take before the request is answered `503`.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// How many reviews of unknown tokens may be in flight at once; further requests that need
/// one get `429`.
pub const MAX_CONCURRENT_REVIEWS: usize = 4;
/// Further reviews that only tokens authenticated before may use, so that a flood of unknown
/// tokens cannot lock out Prometheus when its cached answer expires.
pub const RESERVED_REVIEWS: usize = 2;
/// How long an authenticated token counts as known, for [`RESERVED_REVIEWS`].
const KNOWN_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// How many entries each cache holds at most.
pub const CACHE_CAPACITY: usize = 1024;
/// How many bytes the entries of each cache take at most, keys and answers included.
pub const CACHE_BYTES: usize = 4 * 1024 * 1024;
/// The longest bearer token reviewed. Service account tokens take about a kilobyte, and OIDC
/// tokens with many groups a few; a longer one is answered `401` without asking the API server.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Every metric of the manager, registered in one registry.
pub struct Metrics {
    registry: Registry,
    /// Metrics of reconcile loops, labelled by controller.
    pub reconcile: ReconcileMetrics,
    /// Metrics of the controllers' queues, labelled by controller (`name`, as client-go's).
    pub queue: QueueMetrics,
    /// Metrics of the controllers' requests to the API server.
    pub client: crate::client::ClientMetrics,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconcile = ReconcileMetrics::default();
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            reconcile.active.clone(),
        );
        let queue = QueueMetrics::default();
        queue.register(&mut registry);
        let client = crate::client::ClientMetrics::default();
        client.register(&mut registry);
        registry.register_collector(Box::new(process::ProcessCollector));
        let leader = Gauge::default();
        registry.register(
            "leader_election_master_status",
            "1 while this replica holds the leader election lease",
            leader.clone(),
        );
        Self {
            registry,
            reconcile,
            queue,
            client,
            leader,
        }
    }
}

impl Metrics {
    /// Records whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

/// Reconcile counters and timings.
#[derive(Clone)]
pub struct ReconcileMetrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    /// Reconciles in progress.
    active: Family<ControllerLabels, Gauge>,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self {
            total: Family::default(),
            errors: Family::default(),
            active: Family::default(),
            time: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 14))
            }),
        }
    }
}

impl ReconcileMetrics {
    /// Starts timing one reconciliation of `controller`; the time is recorded when the returned
    /// guard is dropped.
    pub fn start(&self, controller: &str) -> ReconcileTimer {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        let active = self.active.get_or_create(&labels).clone();
        active.inc();
        ReconcileTimer {
            histogram: self.time.get_or_create(&labels).clone(),
            active,
            started: std::time::Instant::now(),
        }
    }

    /// Makes the series of `controller` at zero, as controller-runtime does when a controller
    /// starts: a dashboard or alert sees `0` before the first reconcile or the first error,
    /// rather than no data.
    pub fn init(&self, controller: &str) {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        for result in ["success", "error"] {
            drop(self.total.get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result,
            }));
        }
        drop(self.errors.get_or_create(&labels));
        drop(self.active.get_or_create(&labels));
        drop(self.time.get_or_create(&labels));
    }

    /// Counts a reconciliation of `controller` that succeeded.
    pub fn success(&self, controller: &str) {
        self.count(controller, "success");
    }

    /// Counts a reconciliation of `controller` that failed.
    pub fn error(&self, controller: &str) {
        self.count(controller, "error");
        self.errors
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .inc();
    }

    fn count(&self, controller: &str, result: &'static str) {
        self.total
            .get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result,
            })
            .inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// The queue of each controller, in client-go's workqueue names: what waits, what was added
/// and what was retried, and how many reconciles may run at once.
#[derive(Clone, Default)]
pub struct QueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    max_concurrent: Family<ControllerLabels, Gauge>,
}

impl QueueMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue: objects waiting for a reconcile",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
    }

    fn labels(controller: &str) -> QueueLabels {
        QueueLabels {
            name: controller.to_owned(),
        }
    }

    /// Makes the series of `controller` at zero, and records its concurrency.
    pub fn init(&self, controller: &str, max_concurrent: u16) {
        let labels = Self::labels(controller);
        drop(self.depth.get_or_create(&labels));
        drop(self.adds.get_or_create(&labels));
        drop(self.retries.get_or_create(&labels));
        self.max_concurrent
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .set(i64::from(max_concurrent));
    }

    /// Counts an object added to `controller`'s queue.
    pub fn add(&self, controller: &str) {
        self.adds.get_or_create(&Self::labels(controller)).inc();
    }

    /// Counts a failed object queued again.
    pub fn retry(&self, controller: &str) {
        self.retries.get_or_create(&Self::labels(controller)).inc();
    }

    /// Sets how many objects of `controller` wait for a reconcile.
    pub fn set_depth(&self, controller: &str, depth: usize) {
        self.depth
            .get_or_create(&Self::labels(controller))
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }
}

/// Counts one reconciliation as active, and records its duration, until dropped.
pub struct ReconcileTimer {
    histogram: Histogram,
    active: Gauge,
    started: std::time::Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
        self.active.dec();
    }
}

/// The `/metrics` route; with an authorizer, only for callers the API server lets `get` it.
/// Other paths answer `404` without asking the API server anything.
pub fn router(metrics: Arc<Metrics>, authorizer: Option<Authorizer>) -> Router {
    let router = Router::new().route(
        "/metrics",
        get(|State(metrics): State<Arc<Metrics>>| async move {
            ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode())
        }),
    );
    let router = match authorizer {
        Some(authorizer) => {
            router.route_layer(middleware::from_fn_with_state(authorizer, authorize))
        }
        None => router,
    };
    router.with_state(metrics)
}

/// Why a request may not read metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No bearer token, or one the API server does not know: `401`.
    Unauthenticated,
    /// The user may not `get` the path: `403`.
    Forbidden,
    /// Too many reviews are in flight: `429`.
    Busy,
    /// The API server failed or did not answer in time: `503`.
    Unavailable(String),
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        match self {
            Self::Unauthenticated => (StatusCode::UNAUTHORIZED, "Unauthorized").into_response(),
            Self::Forbidden => (StatusCode::FORBIDDEN, "Forbidden").into_response(),
            Self::Busy => (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, "1")],
                "too many requests are being authorized; retry later",
            )
                .into_response(),
            Self::Unavailable(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot authorize the request: {reason}"),
            )
                .into_response(),
        }
    }
}

/// Asks the API server who a bearer token belongs to and whether that user may read a path,
/// and remembers the answers for a while. Cheap to clone.
#[derive(Clone)]
pub struct Authorizer {
    inner: Arc<AuthorizerInner>,
}

struct AuthorizerInner {
    client: Client,
    timeout: Duration,
    reviews: Semaphore,
    reserved: Semaphore,
    /// The key of the HMAC that names tokens and users in the caches.
    hmac: ring::hmac::Key,
    /// Authenticated tokens: answers for [`TOKEN_CACHE_TTL`], known for [`KNOWN_TOKEN_TTL`].
    tokens: Mutex<Cache<UserInfo>>,
    /// Rejected tokens, apart from the others so that a flood cannot push those out.
    rejected: Mutex<Cache<()>>,
    /// SubjectAccessReview answers, by user and path.
    access: Mutex<Cache<bool>>,
}

impl Authorizer {
    /// An authorizer that asks the API server behind `client`.
    pub fn new(client: Client) -> Self {
        Self::with_timeout(client, REVIEW_TIMEOUT)
    }

    /// An authorizer whose reviews time out after `timeout`.
    pub fn with_timeout(client: Client, timeout: Duration) -> Self {
        Self {
            inner: Arc::new(AuthorizerInner {
                client,
                timeout,
                reviews: Semaphore::new(MAX_CONCURRENT_REVIEWS),
                reserved: Semaphore::new(RESERVED_REVIEWS),
                hmac: ring::hmac::Key::generate(
                    ring::hmac::HMAC_SHA256,
                    &ring::rand::SystemRandom::new(),
                )
                .expect("the system's random number generator works"),
                tokens: Mutex::new(Cache::new(CACHE_CAPACITY, CACHE_BYTES)),
                rejected: Mutex::new(Cache::new(CACHE_CAPACITY, CACHE_BYTES)),
                access: Mutex::new(Cache::new(CACHE_CAPACITY, CACHE_BYTES)),
            }),
        }
    }

    /// `Ok` when the request may `get` `path`.
    pub async fn check(&self, headers: &HeaderMap, path: &str) -> Result<(), Denied> {
        let token = bearer_token(headers).ok_or(Denied::Unauthenticated)?;
        if token.len() > MAX_TOKEN_BYTES {
            tracing::debug!(
                bytes = token.len(),
                "refused a bearer token longer than {MAX_TOKEN_BYTES} bytes"
            );
            return Err(Denied::Unauthenticated);
        }
        let user = self.authenticate(token).await?;
        self.authorize(user, path).await
    }

    /// The name of `parts` in the caches: their keyed hash.
    fn digest(&self, parts: &[&[u8]]) -> Digest {
        let mut context = ring::hmac::Context::with_key(&self.inner.hmac);
        for part in parts {
            // Each part's length first, so that no two lists of parts hash alike.
            context.update(&(part.len() as u64).to_be_bytes());
            context.update(part);
        }
        let mut digest = [0; 32];
        digest.copy_from_slice(context.sign().as_ref());
        digest
    }

    async fn authenticate(&self, token: &str) -> Result<UserInfo, Denied> {
        let key = self.digest(&[token.as_bytes()]);
        let known = match lock(&self.inner.tokens).get(&key) {
            Lookup::Fresh(user) => return Ok(user),
            Lookup::Expired => true,
            Lookup::Missing => false,
        };
        if !known && matches!(lock(&self.inner.rejected).get(&key), Lookup::Fresh(())) {
            return Err(Denied::Unauthenticated);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let review = self.review("TokenReview", review, known).await?;
        let status = review.status.unwrap_or_default();
        if status.authenticated == Some(true) {
            let user = status.user.unwrap_or_default();
            lock(&self.inner.tokens).insert(key, user.clone(), TOKEN_CACHE_TTL, KNOWN_TOKEN_TTL);
            Ok(user)
        } else {
            lock(&self.inner.tokens).remove(&key);
            lock(&self.inner.rejected).insert(key, (), TOKEN_CACHE_TTL, TOKEN_CACHE_TTL);
            Err(Denied::Unauthenticated)
        }
    }

    async fn authorize(&self, user: UserInfo, path: &str) -> Result<(), Denied> {
        let identity = format!(
            "{:?}\0{:?}\0{:?}\0{:?}",
            user.username, user.uid, user.groups, user.extra
        );
        let key = self.digest(&[identity.as_bytes(), path.as_bytes()]);
        let cached = lock(&self.inner.access).get(&key);
        let allowed = match cached {
            Lookup::Fresh(allowed) => allowed,
            Lookup::Expired | Lookup::Missing => {
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        user: user.username,
                        uid: user.uid,
                        groups: user.groups,
                        extra: user.extra,
                        non_resource_attributes: Some(NonResourceAttributes {
                            path: Some(path.to_owned()),
                            verb: Some("get".to_owned()),
                        }),
                        ..SubjectAccessReviewSpec::default()
                    },
                    ..SubjectAccessReview::default()
                };
                // The user is authenticated: not part of a flood of unknown tokens.
                let review = self.review("SubjectAccessReview", review, true).await?;
                let allowed = review.status.is_some_and(|status| status.allowed);
                let ttl = if allowed {
                    ALLOW_CACHE_TTL
                } else {
                    DENY_CACHE_TTL
                };
                lock(&self.inner.access).insert(key, allowed, ttl, ttl);
                allowed
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(Denied::Forbidden)
        }
    }

    /// Creates one review, within the concurrency limit and the timeout. `known` reviews may
    /// also use the reserved places.
    async fn review<K>(&self, what: &str, review: K, known: bool) -> Result<K, Denied>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let _permit = match self.inner.reviews.try_acquire() {
            Ok(permit) => permit,
            Err(_) if known => self
                .inner
                .reserved
                .try_acquire()
                .map_err(|_| Denied::Busy)?,
            Err(_) => return Err(Denied::Busy),
        };
        let api = Api::<K>::all(self.inner.client.clone());
        match tokio::time::timeout(
            self.inner.timeout,
            api.create(&PostParams::default(), &review),
        )
        .await
        {
            Ok(Ok(review)) => Ok(review),
            Ok(Err(error)) => {
                tracing::warn!("{what} failed: {error}");
                Err(Denied::Unavailable(format!("{what} failed")))
            }
            Err(_) => {
                tracing::warn!("{what} timed out after {:?}", self.inner.timeout);
                Err(Denied::Unavailable(format!(
                    "{what} timed out after {:?}",
                    self.inner.timeout
                )))
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

async fn authorize(State(authorizer): State<Authorizer>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    match authorizer.check(request.headers(), &path).await {
        Ok(()) => next.run(request).await,
        Err(denied) => denied.into_response(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a cache knows of a key.
enum Lookup<V> {
    /// An answer still valid.
    Fresh(V),
    /// An answer that expired, for a key still remembered.
    Expired,
    /// Nothing.
    Missing,
}

/// A keyed hash: how the caches name tokens and users.
type Digest = [u8; 32];

/// What an answer costs beyond the entry that holds it: the bytes it points to.
trait Weigh {
    /// The heap bytes of the answer; the entry's own size counts the rest.
    fn weight(&self) -> usize {
        0
    }
}

impl Weigh for () {}

impl Weigh for bool {}

impl Weigh for UserInfo {
    /// Its strings, and per list item or map entry the `String` or `Vec` that holds it.
    fn weight(&self) -> usize {
        let text = |value: &Option<String>| value.as_ref().map_or(0, String::len);
        let list = |values: &[String]| values.iter().map(|v| v.len() + 24).sum::<usize>();
        text(&self.username)
            + text(&self.uid)
            + self.groups.as_deref().map_or(0, list)
            + self.extra.as_ref().map_or(0, |extra| {
                extra
                    .iter()
                    .map(|(key, values)| key.len() + 48 + list(values))
                    .sum()
            })
    }
}

/// Answers that expire, and keys remembered for a while after. Bounded in entries and in bytes:
/// when full, forgotten entries go first, then those that expire first.
struct Cache<V> {
    entries: HashMap<Digest, Entry<V>>,
    capacity: usize,
    max_bytes: usize,
    bytes: usize,
}

struct Entry<V> {
    value: V,
    expires: Instant,
    forgotten: Instant,
}

impl<V: Clone + Weigh> Cache<V> {
    fn new(capacity: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
            max_bytes,
            bytes: 0,
        }
    }

    /// What an entry holding `value` costs.
    fn cost(value: &V) -> usize {
        std::mem::size_of::<(Digest, Entry<V>)>() + value.weight()
    }

    fn get(&mut self, key: &Digest) -> Lookup<V> {
        let now = Instant::now();
        match self.entries.get(key) {
            Some(entry) if entry.expires > now => Lookup::Fresh(entry.value.clone()),
            Some(entry) if entry.forgotten > now => Lookup::Expired,
            Some(_) => {
                self.remove(key);
                Lookup::Missing
            }
            None => Lookup::Missing,
        }
    }

    /// Removes the entry of `key`, and gives back what it held.
    fn remove(&mut self, key: &Digest) -> Option<V> {
        let entry = self.entries.remove(key)?;
        self.bytes -= Self::cost(&entry.value);
        Some(entry.value)
    }

    /// Stores `value` for `ttl`, and remembers the key for `keep` (at least `ttl`). A value
    /// larger than the whole cache is not stored.
    fn insert(&mut self, key: Digest, value: V, ttl: Duration, keep: Duration) {
        let now = Instant::now();
        let cost = Self::cost(&value);
        self.remove(&key);
        if cost > self.max_bytes {
            return;
        }
        let full = |cache: &Self| {
            cache.entries.len() >= cache.capacity || cache.bytes + cost > cache.max_bytes
        };
        if full(self) {
            let forgotten: Vec<Digest> = self
                .entries
                .iter()
                .filter(|(_, entry)| entry.forgotten <= now)
                .map(|(key, _)| *key)
                .collect();
            for key in forgotten {
                self.remove(&key);
            }
        }
        while full(self) {
            let first = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.expires)
                .map(|(key, _)| *key);
            // Stop when nothing is left, or nothing could be removed.
            if first.and_then(|first| self.remove(&first)).is_none() {
                break;
            }
        }
        self.bytes += cost;
        self.entries.insert(
            key,
            Entry {
                value,
                expires: now + ttl,
                forgotten: now + keep.max(ttl),
            },
        );
    }
}

#[cfg(test)]
mod tests {
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
}
