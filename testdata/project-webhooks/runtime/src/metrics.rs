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
