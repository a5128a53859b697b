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
        key("/api/v1/pods?watch=true&labelSelector=app%3Dweb%2Ctier+in+%28a%29&resourceVersion=7"),
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
    let guard =
        Guard::new(Client::new(service, "operators"), RequestPolicy::default()).watches(watches);
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
