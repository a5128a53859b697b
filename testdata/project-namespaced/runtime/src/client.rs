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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::tests::{ApiServer, PATH, failure, lease, next, respond};
    use crate::testing::within;
    use http::Method;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::Api;
    use tower_test::mock;

    fn renewed() -> serde_json::Value {
        lease("me", "2026-01-01T00:00:00.000000Z", 0, "1")
    }

    /// A guarded client of a mocked API server.
    fn guarded(
        change: impl FnOnce(Guard) -> Guard,
    ) -> (Api<Lease>, ApiServer, ClientMetrics, Arc<Watches>) {
        let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
        let metrics = ClientMetrics::default();
        let watches = Arc::new(Watches::default());
        let guard = Guard::new(Client::new(service, "operators"), RequestPolicy::default())
            .metrics(metrics.clone())
            .watches(watches.clone());
        let client = change(guard).client();
        (
            Api::namespaced(client, "operators"),
            server,
            metrics,
            watches,
        )
    }

    fn answer(send: mock::SendResponse<Response<Body>>, code: u16, retry_after: Option<&str>) {
        let mut response = Response::builder().status(code);
        if let Some(seconds) = retry_after {
            response = response.header("Retry-After", seconds);
        }
        send.send_response(
            response
                .body(Body::from(serde_json::to_vec(&failure(code)).unwrap()))
                .unwrap(),
        );
    }

    async fn assert_no_request(server: &mut ApiServer, within: Duration) {
        // `None`: the client is gone, and can send nothing more.
        let sent = tokio::time::timeout(within, server.next_request()).await;
        assert!(matches!(sent, Err(_) | Ok(None)), "a request was sent");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_with_retry_after_is_sent_again_after_that_wait() {
        let (api, mut server, metrics, _) = guarded(|guard| guard);
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        let answered = Instant::now();
        answer(send, 503, Some("3"));
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(answered.elapsed(), Duration::from_secs(3));
        respond(send, 200, &renewed());
        within(getting).await.unwrap().unwrap();
        assert_eq!(metrics.requests("GET", "503"), 1);
        assert_eq!(metrics.requests("GET", "200"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_with_retry_after_is_retried_too() {
        let (api, mut server, _, _) = guarded(|guard| guard);
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        answer(send, 429, Some("1"));
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &renewed());
        within(getting).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_without_retry_after_reaches_the_caller_at_once() {
        for code in [503, 429, 500, 504] {
            let (api, mut server, metrics, _) = guarded(|guard| guard);
            let getting = tokio::spawn(async move { api.get("my-operator").await });
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            answer(send, code, None);
            let error = within(getting).await.unwrap().unwrap_err();
            assert!(
                matches!(&error, kube::Error::Api(status) if status.code == code),
                "{error}"
            );
            assert_no_request(&mut server, Duration::from_secs(3600)).await;
            assert_eq!(metrics.requests("GET", &code.to_string()), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn other_codes_are_not_retried_even_with_retry_after() {
        let (api, mut server, _, _) = guarded(|guard| guard);
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        answer(send, 409, Some("1"));
        within(getting).await.unwrap().unwrap_err();
        assert_no_request(&mut server, Duration::from_secs(60)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_after_the_tenth_and_its_answer_is_the_callers() {
        let (api, mut server, metrics, _) = guarded(|guard| guard);
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        for _ in 0..=MAX_RETRIES {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            answer(send, 503, Some("1"));
        }
        let error = within(getting).await.unwrap().unwrap_err();
        assert!(matches!(&error, kube::Error::Api(status) if status.code == 503));
        assert_no_request(&mut server, Duration::from_secs(3600)).await;
        assert_eq!(metrics.requests("GET", "503"), u64::from(MAX_RETRIES) + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_retry_after_is_capped() {
        let (api, mut server, _, _) = guarded(|guard| guard);
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        let answered = Instant::now();
        answer(send, 429, Some("3600"));
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(answered.elapsed(), MAX_RETRY_AFTER);
        respond(send, 200, &renewed());
        within(getting).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_wait_ends_when_the_fence_is_closed_and_nothing_more_is_sent() {
        let fence = Fence::new(Instant::now() + Duration::from_secs(60));
        let (api, mut server, _, _) = guarded(|guard| guard.fence(fence.clone()));
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        answer(send, 503, Some("10"));
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The elector sees another holder: leadership is lost during the wait.
        let closed = Instant::now();
        fence.close();
        let error = within(getting).await.unwrap().unwrap_err();
        assert_eq!(closed.elapsed(), Duration::ZERO, "the wait ended at once");
        assert!(error.to_string().contains("may no longer lead"), "{error}");
        assert_no_request(&mut server, Duration::from_secs(3600)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_due_after_the_fence_expired_is_never_sent() {
        // A leader paused during the wait wakes past its renew deadline: the retry and the
        // fence's expiry are both due, and the request stays in the process.
        let fence = Fence::new(Instant::now() + Duration::from_secs(5));
        let (api, mut server, _, _) = guarded(|guard| guard.fence(fence.clone()));
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        answer(send, 503, Some("3"));
        tokio::time::sleep(Duration::from_millis(10)).await;
        tokio::time::advance(Duration::from_secs(30)).await;
        let error = within(getting).await.unwrap().unwrap_err();
        assert!(error.to_string().contains("may no longer lead"), "{error}");
        assert_no_request(&mut server, Duration::from_secs(3600)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_within_an_extended_fence_is_sent() {
        let fence = Fence::new(Instant::now() + Duration::from_secs(5));
        let (api, mut server, _, _) = guarded(|guard| guard.fence(fence.clone()));
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        let answered = Instant::now();
        answer(send, 503, Some("8"));
        // The elector renews during the wait, which already started.
        tokio::time::sleep(Duration::from_secs(2)).await;
        fence.extend(Instant::now() + Duration::from_secs(20));
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(answered.elapsed(), Duration::from_secs(8));
        respond(send, 200, &renewed());
        within(getting).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_timeout_covers_the_retries() {
        let (api, mut server, _, _) = guarded(|guard| guard);
        let started = Instant::now();
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        // Waits of 10 s: sent at 0, 10 and 20 s; the next would be due at the deadline.
        for _ in 0..3 {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            answer(send, 503, Some("10"));
        }
        let error = within(getting).await.unwrap().unwrap_err();
        assert!(
            matches!(&error, kube::Error::Api(status) if status.code == 503),
            "{error}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(20));
        assert_no_request(&mut server, Duration::from_secs(3600)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_still_unanswered_when_the_fence_closes_is_abandoned() {
        let fence = Fence::new(Instant::now() + Duration::from_secs(60));
        let (api, mut server, _, _) = guarded(|guard| guard.fence(fence.clone()));
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_request, _send) = server.next_request().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let closed = Instant::now();
        fence.close();
        let error = within(getting).await.unwrap().unwrap_err();
        assert_eq!(closed.elapsed(), Duration::ZERO);
        assert!(error.to_string().contains("may no longer lead"), "{error}");
    }

    #[test]
    fn watches_are_told_apart_by_their_selectors() {
        let key = |uri: &str| watch_key(&Request::get(uri).body(()).unwrap());
        assert_eq!(
            key(
                "/api/v1/pods?watch=true&labelSelector=app%3Dweb%2Ctier+in+%28a%29&resourceVersion=7"
            ),
            Watches::key("/api/v1/pods", Some("app=web,tier in (a)"), None)
        );
        assert_eq!(
            key("/api/v1/pods?fieldSelector=metadata.name%3Dp&watch=true"),
            Watches::key("/api/v1/pods", None, Some("metadata.name=p"))
        );
        assert_ne!(
            key("/api/v1/pods?watch=true"),
            key("/api/v1/pods?watch=true&labelSelector=a")
        );
        assert_ne!(
            key("/api/v1/pods?watch=true"),
            key("/api/v1/secrets?watch=true")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_an_answer_fails_at_its_timeout() {
        let (api, mut server, metrics, _) = guarded(|guard| guard);
        let started = Instant::now();
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_request, _send) = server.next_request().await.unwrap();
        let error = within(getting).await.unwrap().unwrap_err();
        assert_eq!(started.elapsed(), DEFAULT_REQUEST_TIMEOUT);
        assert!(
            error.to_string().contains(&format!(
                "did not answer GET {PATH} within {DEFAULT_REQUEST_TIMEOUT:?}"
            )),
            "{error}"
        );
        assert_eq!(metrics.requests("GET", "<timeout>"), 1);
    }

    type Frames = futures::channel::mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;
    type Streamed = http_body_util::StreamBody<
        futures::channel::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
    >;
    type StreamServer = mock::Handle<Request<Body>, Response<Streamed>>;

    /// A guard over a mocked API server whose answers are streamed frame by frame.
    fn streaming(watches: Arc<Watches>) -> (Guard, StreamServer) {
        let (service, server) = mock::pair::<Request<Body>, Response<Streamed>>();
        let guard = Guard::new(Client::new(service, "operators"), RequestPolicy::default())
            .watches(watches);
        (guard, server)
    }

    /// Answers the next request with headers and a body whose frames the returned sender gives.
    async fn stream_answer(server: &mut StreamServer) -> (Request<Body>, Frames) {
        let (request, send) = tokio::time::timeout(Duration::from_secs(60), server.next_request())
            .await
            .expect("a request within 60 s")
            .unwrap();
        let (frames, body) = futures::channel::mpsc::channel(16);
        send.send_response(Response::new(http_body_util::StreamBody::new(body)));
        (request, frames)
    }

    /// Sends `request` through `guard` and reads the whole answer.
    fn read_all(guard: &Guard, uri: &str) -> tokio::task::JoinHandle<Result<Bytes, String>> {
        use http_body_util::BodyExt as _;
        let guard = guard.clone();
        let request = Request::get(uri).body(Body::from(Vec::new())).unwrap();
        tokio::spawn(async move {
            let response = guard.send(request).await.map_err(|e| e.to_string())?;
            let collected = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok(collected.to_bytes())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_fails_at_the_deadline() {
        let (guard, mut server) = streaming(Arc::default());
        let started = Instant::now();
        let reading = read_all(&guard, PATH);
        let (_, mut frames) = stream_answer(&mut server).await;
        frames
            .try_send(Ok(Frame::data(Bytes::from_static(b"{\"kind\":"))))
            .unwrap();
        let error = within(reading).await.unwrap().unwrap_err();
        assert_eq!(started.elapsed(), DEFAULT_REQUEST_TIMEOUT);
        assert!(
            error.contains(&format!("did not answer GET {PATH} within")),
            "{error}"
        );
        drop(frames);
    }

    fn empty_frame() -> Result<Frame<Bytes>, std::io::Error> {
        Ok(Frame::data(Bytes::new()))
    }

    #[test]
    fn a_body_that_is_always_ready_still_fails_at_the_deadline() {
        // A body with a frame ready at every poll never lets a deadline polled after it fire:
        // the read would spin for ever. It runs on a thread of its own, so that such a spin
        // fails this test instead of hanging it.
        type Endless = http_body_util::StreamBody<
            futures::stream::RepeatWith<fn() -> Result<Frame<Bytes>, std::io::Error>>,
        >;
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let result = runtime.block_on(async {
                let (service, mut server) = mock::pair::<Request<Body>, Response<Endless>>();
                let policy = RequestPolicy {
                    timeout: Duration::from_millis(300),
                    ..RequestPolicy::default()
                };
                let guard = Guard::new(Client::new(service, "operators"), policy);
                tokio::spawn(async move {
                    let (_, send) = server.next_request().await.unwrap();
                    let frames: fn() -> Result<Frame<Bytes>, std::io::Error> = empty_frame;
                    send.send_response(Response::new(http_body_util::StreamBody::new(
                        futures::stream::repeat_with(frames),
                    )));
                });
                read_all(&guard, PATH).await.unwrap()
            });
            let _ = done.send(result);
        });
        let result = outcome
            .recv_timeout(Duration::from_secs(10))
            .expect("the read ended within 10 s");
        let error = result.unwrap_err();
        assert!(error.contains("did not answer GET"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_body_has_no_deadline() {
        let (guard, mut server) = streaming(Arc::default());
        let reading = read_all(&guard, "/api/v1/pods?watch=true&timeoutSeconds=290");
        let (_, mut frames) = stream_answer(&mut server).await;
        tokio::time::sleep(DEFAULT_REQUEST_TIMEOUT * 5).await;
        frames
            .try_send(Ok(Frame::data(Bytes::from_static(b"{}\n"))))
            .unwrap();
        drop(frames);
        assert_eq!(
            within(reading).await.unwrap().unwrap(),
            Bytes::from_static(b"{}\n")
        );
    }

    const WATCH: &str = "/apis/learn.com/v1/things?watch=true&resourceVersion=7";
    const THINGS: &str = "/apis/learn.com/v1/things";

    fn things() -> String {
        Watches::key(THINGS, None, None)
    }

    #[tokio::test(start_paused = true)]
    async fn watches_that_end_at_once_without_an_event_back_off_as_client_go_does() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let mut waits = Vec::new();
        let mut ended = Instant::now();
        for _ in 0..8 {
            let reading = read_all(&guard, WATCH);
            let (request, frames) = stream_answer(&mut server).await;
            waits.push(ended.elapsed());
            assert_eq!(request.uri().path(), THINGS);
            drop(frames);
            within(reading).await.unwrap().unwrap();
            ended = Instant::now();
        }
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(
            waits,
            [
                ms(0),
                ms(800),
                ms(1600),
                ms(3200),
                ms(6400),
                ms(12800),
                ms(25600),
                ms(30000)
            ]
        );
        assert!(
            watches
                .failing(&things())
                .unwrap()
                .contains("without an event"),
            "{:?}",
            watches.failing(&things())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_that_delivers_resets_the_backoff_and_is_established() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        for _ in 0..3 {
            let reading = read_all(&guard, WATCH);
            drop(stream_answer(&mut server).await);
            within(reading).await.unwrap().unwrap();
        }
        assert!(watches.failing(&things()).is_some());
        let reading = read_all(&guard, WATCH);
        let (_, mut frames) = stream_answer(&mut server).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            watches.failing(&things()),
            None,
            "an answered watch is established"
        );
        frames
            .try_send(Ok(Frame::data(Bytes::from_static(
                b"{\"type\":\"ADDED\"}\n",
            ))))
            .unwrap();
        drop(frames);
        within(reading).await.unwrap().unwrap();
        let ended = Instant::now();
        let reading = read_all(&guard, WATCH);
        drop(stream_answer(&mut server).await);
        assert_eq!(
            ended.elapsed(),
            Duration::ZERO,
            "no wait after a watch that delivered"
        );
        within(reading).await.unwrap().unwrap();
        // That one failed at once: the first failure after a success waits the base again.
        let ended = Instant::now();
        let reading = read_all(&guard, WATCH);
        drop(stream_answer(&mut server).await);
        assert_eq!(ended.elapsed(), WATCH_BACKOFF_BASE);
        within(reading).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_cut_in_its_first_line_is_a_failure() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let reading = read_all(&guard, WATCH);
        let (_, mut frames) = stream_answer(&mut server).await;
        frames
            .try_send(Ok(Frame::data(Bytes::from_static(b"{\"type\":\"ADD"))))
            .unwrap();
        frames
            .try_send(Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)))
            .unwrap();
        within(reading).await.unwrap().unwrap_err();
        let failing = watches.failing(&things()).expect("a cut watch is down");
        assert!(failing.contains("unexpected end of file"), "{failing}");
        let ended = Instant::now();
        let reading = read_all(&guard, WATCH);
        drop(stream_answer(&mut server).await);
        assert_eq!(ended.elapsed(), WATCH_BACKOFF_BASE);
        within(reading).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_watch_that_lasted_is_no_failure() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let reading = read_all(&guard, WATCH);
        let (_, frames) = stream_answer(&mut server).await;
        tokio::time::sleep(MIN_WATCH_DURATION).await;
        drop(frames);
        within(reading).await.unwrap().unwrap();
        assert_eq!(watches.failing(&things()), None);
        let ended = Instant::now();
        let reading = read_all(&guard, WATCH);
        drop(stream_answer(&mut server).await);
        assert_eq!(ended.elapsed(), Duration::ZERO);
        within(reading).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_watch_is_a_failure_and_a_list_is_never_paced() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let reading = read_all(&guard, WATCH);
        let (request, send) = server.next_request().await.unwrap();
        assert_eq!(request.uri().path(), THINGS);
        let (_frames, body) = futures::channel::mpsc::channel(1);
        let mut response = Response::new(http_body_util::StreamBody::new(body));
        *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        send.send_response(response);
        drop(_frames);
        within(reading).await.unwrap().unwrap();
        assert_eq!(
            watches.failing(&things()).as_deref(),
            Some("answered 500 Internal Server Error")
        );
        let listed = Instant::now();
        let reading = read_all(&guard, THINGS);
        drop(stream_answer(&mut server).await);
        within(reading).await.unwrap().unwrap();
        assert_eq!(
            listed.elapsed(),
            Duration::ZERO,
            "a list does not wait for the watch backoff"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_is_known_to_have_ended_when_its_body_ends_not_when_it_is_dropped() {
        use http_body_util::BodyExt as _;
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let sending = {
            let guard = guard.clone();
            tokio::spawn(async move {
                let request = Request::get(WATCH).body(Body::from(Vec::new())).unwrap();
                guard.send(request).await.map_err(|e| e.to_string())
            })
        };
        let (_, frames) = stream_answer(&mut server).await;
        let mut body = within(sending).await.unwrap().unwrap().into_body();
        assert_eq!(watches.failing(&things()), None, "answered: established");
        drop(frames);
        assert!(within(body.frame()).await.is_none());
        let failing = watches.failing(&things());
        assert!(
            failing
                .as_deref()
                .is_some_and(|f| f.contains("without an event")),
            "{failing:?}"
        );
        drop(body);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_dropped_by_its_reader_at_once_is_a_failure() {
        let watches = Arc::new(Watches::default());
        let (guard, mut server) = streaming(watches.clone());
        let sending = {
            let guard = guard.clone();
            tokio::spawn(async move {
                let request = Request::get(WATCH).body(Body::from(Vec::new())).unwrap();
                guard.send(request).await.map_err(|e| e.to_string())
            })
        };
        let (_, _frames) = stream_answer(&mut server).await;
        let answer = within(sending).await.unwrap().unwrap();
        assert_eq!(watches.failing(&things()), None);
        drop(answer);
        assert!(
            watches.failing(&things()).is_some(),
            "cut short by its reader"
        );
        let dropped = Instant::now();
        let reading = read_all(&guard, WATCH);
        drop(stream_answer(&mut server).await);
        assert_eq!(dropped.elapsed(), WATCH_BACKOFF_BASE);
        within(reading).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_tells_its_size_and_its_end_as_its_body_does() {
        use http_body_util::Full;
        let (service, mut server) = mock::pair::<Request<Body>, Response<Full<Bytes>>>();
        let guard = Guard::new(Client::new(service, "operators"), RequestPolicy::default());
        for text in ["{}", ""] {
            let sending = {
                let guard = guard.clone();
                tokio::spawn(async move {
                    let request = Request::get(PATH).body(Body::from(Vec::new())).unwrap();
                    guard.send(request).await.map_err(|e| e.to_string())
                })
            };
            let (_, send) = within(server.next_request()).await.unwrap();
            send.send_response(Response::new(Full::new(Bytes::from(text))));
            let body = within(sending).await.unwrap().unwrap().into_body();
            assert_eq!(body.size_hint().exact(), Some(text.len() as u64));
            assert_eq!(body.is_end_stream(), text.is_empty(), "{text:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_once_the_fence_closed_is_never_sent() {
        let fence = Fence::new(Instant::now() + Duration::from_secs(60));
        fence.close();
        let (api, mut server, metrics, _) = guarded(|guard| guard.fence(fence.clone()));
        let error = within(api.get("my-operator")).await.unwrap_err();
        assert!(error.to_string().contains("may no longer lead"), "{error}");
        assert_no_request(&mut server, Duration::from_secs(60)).await;
        assert_eq!(metrics.requests("GET", "<error>"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_requests_are_served_as_metrics_in_client_gos_names() {
        let metrics = crate::metrics::Metrics::default();
        let client = metrics.client.clone();
        let (api, mut server, _, _) = guarded(|guard| guard.metrics(client));
        let getting = tokio::spawn(async move { api.get("my-operator").await });
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &renewed());
        within(getting).await.unwrap().unwrap();
        let encoded = metrics.encode();
        assert!(
            encoded
                .lines()
                .any(|l| l == r#"rest_client_requests_total{code="200",method="GET"} 1"#),
            "{encoded}"
        );
    }

    /// Two watches of one resource at once (two controllers of one kind): whichever ended
    /// last tells whether the resource's watch is down.
    #[test]
    fn the_last_outcome_of_a_resources_watches_tells_whether_it_is_down() {
        let watches = Watches::default();
        let key = things();
        assert_eq!(watches.failing(&key), None, "never watched");
        watches.established(&key);
        watches.failed(&key, "reset".into());
        assert_eq!(watches.failing(&key).as_deref(), Some("reset"));
        watches.lasted(&key);
        assert_eq!(watches.failing(&key), None, "the other one lasted after");
        watches.failed(&key, "cut".into());
        assert_eq!(watches.failing(&key).as_deref(), Some("cut"));
        watches.established(&key);
        assert_eq!(watches.failing(&key), None);
    }

    #[test]
    fn watch_requests_are_told_by_their_query() {
        let request = |uri: &str| Request::get(uri).body(()).unwrap();
        assert!(is_watch(&request("/api/v1/pods?watch=true")));
        assert!(is_watch(&request("/api/v1/pods?labelSelector=a&watch=1")));
        assert!(!is_watch(&request("/api/v1/pods?watch=false")));
        assert!(!is_watch(&request("/api/v1/pods?x=watch=true")));
        assert!(!is_watch(&request("/api/v1/pods")));
    }

    /// The HTTP version of a GET through `transport` to a TLS server of the runtime's that
    /// offers HTTP/2 when `http2`.
    async fn version_over_tls(http2: bool) -> String {
        let dir = crate::tls::tests::tempdir();
        let der = crate::tls::tests::write_certificate(dir.path(), "localhost");
        let resolver = crate::tls::CertResolver::new(crate::tls::CertSource::from_flags(
            Some(dir.path()),
            "tls.crt",
            "tls.key",
        ))
        .unwrap();
        let listener = crate::server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = axum::Router::new().route(
            "/version",
            axum::routing::get(|request: axum::extract::Request| async move {
                format!("{:?}", request.version())
            }),
        );
        let stop = tokio_util::sync::CancellationToken::new();
        let options = crate::server::ServeOptions {
            tls: Some(resolver.server_config(http2).unwrap()),
            http2,
            ..crate::server::ServeOptions::default()
        };
        let serving = tokio::spawn(crate::server::serve(
            listener,
            router,
            options,
            stop.clone(),
        ));
        let mut config = kube::Config::new(format!("https://localhost:{port}").parse().unwrap());
        config.root_cert = Some(vec![der]);
        let client = transport(config).unwrap();
        let request = Request::get("/version").body(Vec::new()).unwrap();
        let version = within(client.request_text(request)).await.unwrap();
        stop.cancel();
        within(serving).await.unwrap().unwrap();
        version
    }

    #[tokio::test]
    async fn the_transport_speaks_http2_where_the_api_server_offers_it() {
        assert_eq!(version_over_tls(true).await, "HTTP/2.0");
        assert_eq!(version_over_tls(false).await, "HTTP/1.1");
    }

    #[tokio::test]
    async fn the_transport_sends_a_request_once_whatever_the_answer() {
        // kube's default client would send this 16 times: 503 with Retry-After, 15 retries.
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        let router = axum::Router::new().route(
            "/api/v1/namespaces/default/pods/p",
            axum::routing::get(move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async {
                    (
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        [("Retry-After", "0")],
                        "busy",
                    )
                }
            }),
        );
        let listener = crate::server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = tokio_util::sync::CancellationToken::new();
        let serving = tokio::spawn(crate::server::serve(
            listener,
            router,
            crate::server::ServeOptions::default(),
            stop.clone(),
        ));
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(transport(config).unwrap(), "default");
        within(pods.get("p")).await.unwrap_err();
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
        stop.cancel();
        within(serving).await.unwrap().unwrap();
    }
}
