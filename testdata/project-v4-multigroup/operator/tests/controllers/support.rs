//! A mocked API server for the controller tests: each test scripts the requests it expects,
//! in order, answers them, and fails on any other request. Every wait has a timeout, so a test
//! that goes wrong fails instead of hanging.
// The tests of some kinds use only some of these helpers (a controller of Kubernetes' own kinds
// makes no request to expect).
#![allow(dead_code)]

use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::Value;
use tower_test::mock;

/// How long a test waits for a request, or for a reconcile to finish.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// The API server side of a mocked client.
pub type ApiServer = mock::Handle<Request<Body>, Response<Body>>;

/// A client whose requests reach the returned [`ApiServer`].
pub fn mocked_client() -> (Client, ApiServer) {
    let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), server)
}

/// Takes the next request, checks its method and path, answers what `respond` makes of the
/// request's body, and returns the request's query and body.
pub async fn expect(
    server: &mut ApiServer,
    method: Method,
    path: &str,
    respond: impl FnOnce(&Value) -> Value,
) -> (String, Value) {
    let (request, send) = tokio::time::timeout(TIMEOUT, server.next_request())
        .await
        .unwrap_or_else(|_| panic!("no {method} {path} request within {TIMEOUT:?}"))
        .expect("the client is still connected");
    assert_eq!((request.method(), request.uri().path()), (&method, path));
    let query = request.uri().query().unwrap_or_default().to_owned();
    let bytes = tokio::time::timeout(TIMEOUT, request.into_body().collect_bytes())
        .await
        .expect("the request body within the timeout")
        .expect("a readable request body");
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let response = respond(&body);
    send.send_response(
        Response::builder()
            .body(Body::from(serde_json::to_vec(&response).unwrap()))
            .unwrap(),
    );
    (query, body)
}

/// Fails if a request comes that no test step expected.
pub async fn expect_no_more(mut server: ApiServer) {
    if let Ok(Some((request, _))) =
        tokio::time::timeout(Duration::from_millis(100), server.next_request()).await
    {
        panic!("unexpected request {} {}", request.method(), request.uri());
    }
}

/// The output of `future`, which must finish within [`TIMEOUT`].
pub async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("not finished within {TIMEOUT:?}"))
}
