//! The API server client of the manager, and the rules every request of a controller follows.
//!
//! [`transport`] builds the connection to the API server: TCP keepalive, HTTP/2 where the server
//! offers it over TLS (ALPN), a bounded pool of idle connections, and no retries of its own
//! (kube's default client retries 429, 503 and 504 up to 15 times underneath whatever wraps it).
//!
//! [`Guard`] wraps that transport for the controllers, as client-go's `rest.Request` does:
//! - every request has a timeout ([`RequestPolicy::timeout`]): to its answer's headers, and for
//!   everything but a watch to the answer's last byte;
//! - a `429` or `5xx` answer is retried only when it carries `Retry-After` (in seconds), at most
//!   [`RequestPolicy::max_retries`] times, each wait capped at
//!   [`RequestPolicy::max_retry_after`]; any other failure reaches the caller at once, so that
//!   the controller's per-object backoff and error metric see it;
//! - behind a leader's [`Fence`], each attempt, every retry included, passes the fence when it is
//!   sent, and a wait for a retry ends as soon as the fence closes;
//! - a watch that ends within [`MIN_WATCH_DURATION`] without delivering anything is a failure,
//!   and the next watch of that resource waits [`WATCH_BACKOFF_BASE`], doubled for each further
//!   one, at most [`WATCH_BACKOFF_MAX`], as client-go's reflector backs off;
//! - each answer is counted in `rest_client_requests_total{code,method}` ([`ClientMetrics`]).

use std::collections::HashMap;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Bytes;
use kube::Client;
use kube::client::{Body, ConfigExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::time::{Instant, Sleep};

use crate::leader::{Fence, FenceClosed};

/// How long a request may take, to its answer's last byte (to its headers for a watch).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a request answered `429` or `5xx` with `Retry-After` is sent again
/// (client-go's `maxRetries`).
pub const MAX_RETRIES: u32 = 10;
/// The longest `Retry-After` waited for: a longer one is waited for this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);
/// The TCP keepalive of the connections to the API server: a peer that vanished without a
/// reset is noticed by the kernel instead of never.
pub const KEEPALIVE: Duration = Duration::from_secs(30);
/// The wait between the keepalive probes of an idle connection (9 unanswered ones, Linux's
/// default count, end it: a vanished peer is noticed in 2 minutes, not in 11).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long connecting to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per API server; more in use at once are closed once idle.
pub const MAX_IDLE_CONNECTIONS: usize = 16;
/// A watch shorter than this that delivered nothing is a failure (client-go's reflector: 1 s).
pub const MIN_WATCH_DURATION: Duration = Duration::from_secs(1);
/// The wait after the first failed watch of a resource (client-go's reflector: 800 ms).
pub const WATCH_BACKOFF_BASE: Duration = Duration::from_millis(800);
/// The longest wait between failed watches of a resource (client-go's reflector: 30 s).
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The connection to the API server of `config`: keepalive, HTTP/2 when the server offers it
/// over TLS, a bounded idle pool, and no retries underneath the [`Guard`].
///
/// Through a proxy (`config.proxy_url`), kube's own stack is used instead, without its retries;
/// its connections then have no keepalive and speak HTTP/1.1.
pub fn transport(mut config: kube::Config) -> anyhow::Result<Client> {
    config.default_retry = false;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    if config.proxy_url.is_some() {
        tracing::info!("talking to the API server through a proxy: HTTP/1.1 without TCP keepalive");
        return Client::try_from(config).context("failed to set up the Kubernetes client");
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_keepalive(Some(KEEPALIVE));
    http.set_keepalive_interval(Some(KEEPALIVE_INTERVAL));
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    let tls = config
        .rustls_client_config()
        .context("failed to set up TLS for the API server")?;
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone())
            .with_context(|| format!("the TLS server name {name:?} is invalid"))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let https = https.enable_http1().enable_http2().wrap_connector(http);
    let pool = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
        .http2_keep_alive_interval(KEEPALIVE)
        .http2_keep_alive_timeout(Duration::from_secs(10))
        .build(https);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(pool);
    Ok(Client::new(service, config.default_namespace))
}

/// The timeout and retries of the requests a [`Guard`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPolicy {
    /// How long a request may take, to its answer's last byte (to its headers for a watch).
    pub timeout: Duration,
    /// How many times an answer with `Retry-After` is followed.
    pub max_retries: u32,
    /// The longest `Retry-After` waited for.
    pub max_retry_after: Duration,
}

impl Default for RequestPolicy {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: MAX_RETRIES,
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

/// A request that got no complete answer within its timeout.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not answer {method} {path} within {timeout:?}")]
pub struct RequestTimedOut {
    method: String,
    path: String,
    timeout: Duration,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
}

/// The client's metrics, in client-go's names.
#[derive(Clone, Default)]
pub struct ClientMetrics {
    /// `rest_client_requests_total{code,method}`: every answer by status code and method (a
    /// watch counts as `WATCH`); `<error>` for a request that got no answer, `<timeout>` for
    /// one whose answer did not come in time.
    requests: Family<RequestLabels, Counter>,
}

impl ClientMetrics {
    /// Adds the client's metrics to `registry`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code and method",
            self.requests.clone(),
        );
    }

    fn count(&self, method: &str, code: &str) {
        self.requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
            })
            .inc();
    }

    /// How many answers of `method` had `code`.
    pub fn requests(&self, method: &str, code: &str) -> u64 {
        self.requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
            })
            .get()
    }
}

/// What is known of the watches of each resource, by the path they are sent to: when the next
/// one may start, and whether the last one is established.
#[derive(Default)]
pub struct Watches {
    paths: Mutex<HashMap<String, WatchState>>,
}

#[derive(Debug, Default, Clone)]
struct WatchState {
    /// Failures in a row.
    failures: u32,
    /// When the next watch may start.
    next: Option<Instant>,
    /// Whether a watch was answered and has not failed since.
    established: bool,
    /// Why the last one failed.
    error: Option<String>,
}

impl Watches {
    /// The key of the watches of the resource at `path` (an `Api`'s `resource_url`) with these
    /// selectors (a `watcher::Config`'s), for [`Watches::failing`].
    pub fn key(path: &str, label_selector: Option<&str>, field_selector: Option<&str>) -> String {
        format!(
            "{path}?labelSelector={}&fieldSelector={}",
            label_selector.unwrap_or_default(),
            field_selector.unwrap_or_default()
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, WatchState>> {
        self.paths.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the watch of `key` ([`Watches::key`]) is down: its last watch failed and none
    /// was established or lasted since. `None` while it never failed, with the reason of the
    /// failure otherwise.
    pub fn failing(&self, key: &str) -> Option<String> {
        let paths = self.lock();
        let state = paths.get(key)?;
        (!state.established).then(|| state.error.clone().unwrap_or_default())
    }

    /// When the next watch of `path` may start.
    fn next(&self, path: &str) -> Option<Instant> {
        self.lock().get(path).and_then(|state| state.next)
    }

    pub(crate) fn established(&self, path: &str) {
        self.lock().entry(path.to_owned()).or_default().established = true;
    }

    /// A watch of `path` that delivered events, or lasted: the backoff starts again.
    fn lasted(&self, path: &str) {
        let mut paths = self.lock();
        let state = paths.entry(path.to_owned()).or_default();
        state.failures = 0;
        state.next = None;
        state.established = true;
    }

    /// A watch of `path` that failed: the next waits longer.
    pub(crate) fn failed(&self, path: &str, error: String) {
        let mut paths = self.lock();
        let state = paths.entry(path.to_owned()).or_default();
        state.failures = state.failures.saturating_add(1);
        let delay = watch_backoff(state.failures);
        state.next = Some(Instant::now() + delay);
        state.established = false;
        tracing::debug!(path, ?delay, "watch failed: {error}");
        state.error = Some(error);
    }
}

/// The wait before the next watch after `failures` failures in a row.
fn watch_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    WATCH_BACKOFF_BASE
        .saturating_mul(1 << doublings)
        .min(WATCH_BACKOFF_MAX)
}

/// The client of the controllers: a transport behind the request rules of this module.
#[derive(Clone)]
pub struct Guard {
    transport: Client,
    fence: Option<Fence>,
    policy: RequestPolicy,
    watches: Arc<Watches>,
    metrics: ClientMetrics,
}

impl Guard {
    /// `transport` with `policy`, unfenced.
    pub fn new(transport: Client, policy: RequestPolicy) -> Self {
        Self {
            transport,
            fence: None,
            policy,
            watches: Arc::default(),
            metrics: ClientMetrics::default(),
        }
    }

    /// Sends nothing once `fence` is closed; a wait for a retry ends when it closes.
    pub fn fence(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Counts requests in `metrics`.
    pub fn metrics(mut self, metrics: ClientMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keeps the state of watches in `watches`, shared with whoever reads it.
    pub fn watches(mut self, watches: Arc<Watches>) -> Self {
        self.watches = watches;
        self
    }

    /// The client whose every request follows these rules.
    pub fn client(self) -> Client {
        let namespace = self.transport.default_namespace().to_owned();
        let guard = Arc::new(self);
        let service = tower::service_fn(move |request: Request<Body>| {
            let guard = guard.clone();
            async move { guard.send(request).await }
        });
        Client::new(service, namespace)
    }

    /// Waits `delay`, or until the fence closes, which is an error.
    async fn wait(&self, delay: Duration) -> Result<(), tower::BoxError> {
        match &self.fence {
            // The fence first, when both are due: the next attempt would see it closed anyway.
            Some(fence) => tokio::select! {
                biased;
                () = fence.closed() => Err(Box::new(FenceClosed)),
                () = tokio::time::sleep(delay) => Ok(()),
            },
            None => {
                tokio::time::sleep(delay).await;
                Ok(())
            }
        }
    }

    /// How long to wait before sending again after `response`, if it is to be retried:
    /// `429` or `5xx` with `Retry-After` in seconds, capped.
    fn retry_after<B>(&self, response: &Response<B>) -> Option<Duration> {
        let code = response.status().as_u16();
        if code != 429 && !(500..600).contains(&code) {
            return None;
        }
        let seconds: u64 = response
            .headers()
            .get(http::header::RETRY_AFTER)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Duration::from_secs(seconds).min(self.policy.max_retry_after))
    }

    async fn send(&self, mut request: Request<Body>) -> Result<Response<Answer>, tower::BoxError> {
        let watch = is_watch(&request);
        let method = if watch {
            "WATCH".to_owned()
        } else {
            request.method().as_str().to_owned()
        };
        let path = request.uri().path().to_owned();
        let key = watch.then(|| watch_key(&request));
        if let Some(key) = &key
            && let Some(next) = self.watches.next(key)
        {
            let delay = next.saturating_duration_since(Instant::now());
            if !delay.is_zero() {
                self.wait(delay).await?;
            }
        }
        // One deadline for the request, its retries included, as client-go's.
        let deadline = Instant::now() + self.policy.timeout;
        let timed_out = || RequestTimedOut {
            method: method.clone(),
            path: path.clone(),
            timeout: self.policy.timeout,
        };
        let mut retries = 0;
        loop {
            let spare = (retries < self.policy.max_retries)
                .then(|| clone_request(&request))
                .flatten();
            let started = Instant::now();
            let sent = self.attempt(request, deadline).await;
            let response = match sent {
                Attempt::Answered(response) => response,
                Attempt::Failed(error) => {
                    self.metrics.count(&method, "<error>");
                    if let Some(key) = &key {
                        self.watches.failed(key, error.to_string());
                    }
                    return Err(error);
                }
                Attempt::Fenced => return Err(Box::new(FenceClosed)),
                Attempt::TimedOut => {
                    self.metrics.count(&method, "<timeout>");
                    let error = timed_out();
                    if let Some(key) = &key {
                        self.watches.failed(key, error.to_string());
                    }
                    return Err(Box::new(error));
                }
            };
            self.metrics.count(&method, response.status().as_str());
            if let (Some(delay), Some(next)) = (self.retry_after(&response), spare)
                && Instant::now() + delay < deadline
            {
                retries += 1;
                tracing::debug!(
                    %method, path, code = response.status().as_u16(), ?delay, retries,
                    "the API server asked to retry later"
                );
                drop(response);
                self.wait(delay).await?;
                request = next;
                continue;
            }
            let tracker = match &key {
                Some(key) if response.status().is_success() => {
                    self.watches.established(key);
                    Some(WatchTracker {
                        watches: self.watches.clone(),
                        key: key.clone(),
                        started,
                        delivered: false,
                        done: false,
                    })
                }
                Some(key) => {
                    self.watches
                        .failed(key, format!("answered {}", response.status()));
                    None
                }
                None => None,
            };
            let deadline =
                (!watch).then(|| (Box::pin(tokio::time::sleep_until(deadline)), timed_out()));
            return Ok(response.map(|body| Answer {
                body,
                deadline,
                tracker,
            }));
        }
    }

    /// Sends `request` once: the fence must be open when it is sent and until its answer's
    /// headers arrive (a request still being connected when it closes is abandoned), and the
    /// headers must come before `deadline`.
    async fn attempt(&self, request: Request<Body>, deadline: Instant) -> Attempt {
        let sending = tokio::time::timeout_at(deadline, self.transport.send(request));
        let sent = match &self.fence {
            // The fence first: a closed one is seen before the request is handed to the
            // transport (whose buffer also drops a request its caller gave up).
            Some(fence) => tokio::select! {
                biased;
                () = fence.closed() => return Attempt::Fenced,
                sent = sending => sent,
            },
            None => sending.await,
        };
        match sent {
            Ok(Ok(response)) => Attempt::Answered(response),
            Ok(Err(error)) => Attempt::Failed(Box::new(error)),
            Err(_) => Attempt::TimedOut,
        }
    }
}

/// How one attempt of a request ended.
enum Attempt {
    Answered(Response<Body>),
    Failed(tower::BoxError),
    Fenced,
    TimedOut,
}

/// What tells the watches of one resource from others: the path, and the label and field
/// selectors, decoded.
fn watch_key<B>(request: &Request<B>) -> String {
    let query = request.uri().query().unwrap_or_default();
    let mut labels = None;
    let mut fields = None;
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "labelSelector" => labels = Some(value.into_owned()),
            "fieldSelector" => fields = Some(value.into_owned()),
            _ => {}
        }
    }
    Watches::key(request.uri().path(), labels.as_deref(), fields.as_deref())
}

/// Whether `request` is a watch (`?watch=true`).
fn is_watch<B>(request: &Request<B>) -> bool {
    request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

/// A copy of `request` to send again, when its body can be copied.
fn clone_request(request: &Request<Body>) -> Option<Request<Body>> {
    let body = request.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

/// Follows a watch's answer to tell a watch that lasted from one that failed.
struct WatchTracker {
    watches: Arc<Watches>,
    key: String,
    started: Instant,
    delivered: bool,
    done: bool,
}

impl WatchTracker {
    fn ended(&mut self, error: Option<String>) {
        if self.done {
            return;
        }
        self.done = true;
        let lasted = self.started.elapsed() >= MIN_WATCH_DURATION;
        if self.delivered || (lasted && error.is_none()) {
            self.watches.lasted(&self.key);
        } else {
            let why = error.unwrap_or_else(|| {
                format!(
                    "the watch ended after {:?} without an event",
                    self.started.elapsed()
                )
            });
            self.watches.failed(&self.key, why);
        }
    }
}

impl Drop for WatchTracker {
    fn drop(&mut self) {
        // A watch dropped by its reader (a stall, a shutdown) ended well if it delivered or
        // lasted; otherwise it counts as cut short.
        self.ended(None);
    }
}

/// The body of an answer: the last byte must come before the deadline (but for a watch), and
/// a watch's is followed.
pub struct Answer {
    body: Body,
    deadline: Option<(Pin<Box<Sleep>>, RequestTimedOut)>,
    tracker: Option<WatchTracker>,
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        // The deadline first: a body that always has more ready would never give it a turn.
        // The clock is read, not only the timer: a timer fires only when the runtime gets a
        // turn, which a read that never waits does not give it.
        if let Some((deadline, error)) = &mut this.deadline
            && (Instant::now() >= deadline.deadline() || deadline.as_mut().poll(cx).is_ready())
        {
            let error = RequestTimedOut {
                method: error.method.clone(),
                path: error.path.clone(),
                timeout: error.timeout,
            };
            this.deadline = None;
            return Poll::Ready(Some(Err(Box::new(error))));
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if polled.is_pending() {
            return Poll::Pending;
        }
        if let Some(tracker) = &mut this.tracker {
            match &polled {
                // An event is a whole line: a watch cut in the middle of its first one
                // delivered nothing.
                Poll::Ready(Some(Ok(frame)))
                    if frame.data_ref().is_some_and(|d| d.contains(&b'\n')) =>
                {
                    tracker.delivered = true;
                }
                Poll::Ready(Some(Err(error))) => tracker.ended(Some(error.to_string())),
                Poll::Ready(None) => tracker.ended(None),
                _ => {}
            }
        }
        polled.map_err(|error| Box::new(error) as tower::BoxError)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
