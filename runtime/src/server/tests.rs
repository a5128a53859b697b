use super::*;
use crate::tls::{CertResolver, CertSource};
use axum::routing::get;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use rustls::pki_types::{CertificateDer, ServerName};

#[tokio::test(start_paused = true)]
async fn a_long_request_is_waited_for_without_spinning() {
    // On paused time, the clock moves only while every task waits: a connection that looked
    // again and again at its request in flight would keep the handler's sleep from ending.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    let router = Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(45)).await;
            "slow"
        }),
    );
    let connection = Connection {
        builder: builder.http1_only(),
        router,
        draining: CancellationToken::new(),
        timeouts: Timeouts {
            idle: Duration::from_secs(10),
            ..Timeouts::default()
        },
        peer: "127.0.0.1:1".parse().unwrap(),
    };
    let (client, server) = tokio::io::duplex(4096);
    tokio::spawn(connection.serve(server));
    let (mut sender, client) = hyper::client::conn::http1::handshake(TokioIo::new(client))
        .await
        .unwrap();
    tokio::spawn(client);
    let started = Instant::now();
    let response = crate::testing::within(
        sender.send_request(
            http::Request::get("/slow")
                .header("host", "localhost")
                .body(Empty::<Bytes>::new())
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), http::StatusCode::OK);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(45),
        "longer than the idle timeout"
    );
}

/// A connection's stream that records what is done to it.
struct Recorded {
    log: Vec<String>,
    vectored: bool,
}

impl AsyncWrite for Recorded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.log.push(format!("write {}", buf.len()));
        Poll::Ready(Ok(buf.len() - 1))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.log.push("flush".into());
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.log.push("shutdown".into());
        Poll::Ready(Err(std::io::Error::other("shut")))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let total: usize = bufs.iter().map(|buf| buf.len()).sum();
        self.log.push(format!("vectored {total}"));
        Poll::Ready(Ok(total - 2))
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }
}

#[tokio::test]
async fn a_watched_stream_passes_every_write_through_as_it_is() {
    use tokio::io::AsyncWriteExt as _;
    for vectored in [true, false] {
        let mut watched = Watched {
            io: Recorded {
                log: Vec::new(),
                vectored,
            },
            activity: Arc::default(),
        };
        assert_eq!(watched.is_write_vectored(), vectored);
        assert_eq!(watched.write(b"abcd").await.unwrap(), 3);
        let bufs = [std::io::IoSlice::new(b"ab"), std::io::IoSlice::new(b"cde")];
        assert_eq!(watched.write_vectored(&bufs).await.unwrap(), 3);
        watched.flush().await.unwrap();
        assert_eq!(watched.shutdown().await.unwrap_err().to_string(), "shut");
        assert_eq!(
            watched.io.log,
            ["write 4", "vectored 5", "flush", "shutdown"]
        );
    }
}

/// Pins what starts the header timeout of the next HTTP/1.1 request: a read that brought
/// bytes, not a read that found none (hyper polls an idle connection for its next request).
#[tokio::test(start_paused = true)]
async fn only_a_read_that_brings_bytes_starts_the_next_requests_header_timeout() {
    use futures::FutureExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let timeouts = short();
    let opened = Instant::now();
    let activity = Arc::new(Activity::default());
    drop(activity.start(axum::http::Version::HTTP_11));
    let idle = Some(Instant::now() + timeouts.idle);
    let (mut client, server) = tokio::io::duplex(64);
    let mut watched = Watched {
        io: server,
        activity: activity.clone(),
    };
    let mut buffer = [0; 8];
    assert!(
        watched.read(&mut buffer).now_or_never().is_none(),
        "nothing to read yet"
    );
    assert_eq!(activity.deadline(opened, timeouts), idle);
    tokio::time::advance(Duration::from_secs(1)).await;
    client.write_all(b"G").await.unwrap();
    assert_eq!(watched.read(&mut buffer).await.unwrap(), 1);
    assert_eq!(
        activity.deadline(opened, timeouts),
        Some(Instant::now() + timeouts.header_read)
    );
}

#[tokio::test(start_paused = true)]
async fn a_connections_deadline_follows_its_requests_and_the_bytes_between_them() {
    let timeouts = Timeouts {
        header_read: Duration::from_secs(10),
        idle: Duration::from_secs(100),
        ..Timeouts::default()
    };
    let step = || tokio::time::advance(Duration::from_secs(1));
    for version in [axum::http::Version::HTTP_11, axum::http::Version::HTTP_2] {
        let opened = Instant::now();
        let activity = Arc::new(Activity::default());
        step().await;
        assert_eq!((activity.requests(), activity.in_flight()), (0, 0));
        // Bytes before the first request do not move the header deadline.
        activity.read();
        assert_eq!(
            activity.deadline(opened, timeouts),
            Some(opened + timeouts.header_read)
        );
        step().await;
        let request = activity.start(version);
        activity.read();
        assert_eq!(activity.deadline(opened, timeouts), None, "in flight");
        assert_eq!((activity.requests(), activity.in_flight()), (1, 1));
        step().await;
        drop(request);
        let ended = Instant::now();
        assert_eq!(
            activity.deadline(opened, timeouts),
            Some(ended + timeouts.idle)
        );
        step().await;
        let first_byte = Instant::now();
        activity.read();
        step().await;
        activity.read();
        let deadline = activity.deadline(opened, timeouts);
        if version == axum::http::Version::HTTP_2 {
            // Frames between streams (pings, window updates) keep the idle deadline.
            assert_eq!(deadline, Some(ended + timeouts.idle));
        } else {
            // The next request's headers are due a header timeout after its first byte.
            assert_eq!(deadline, Some(first_byte + timeouts.header_read));
        }
        assert_eq!(activity.requests(), 1);
        assert_eq!(activity.in_flight(), 0);
    }
}

#[tokio::test]
async fn the_wildcard_falls_back_to_ipv4_only_where_there_is_no_ipv6() {
    let wildcard: SocketAddr = "[::]:8443".parse().unwrap();
    for (errno, falls_back) in [(97, true), (99, true), (98, false), (13, false)] {
        let tried = std::sync::Mutex::new(Vec::new());
        let result = bind_with(wildcard, |addr, dual_stack| {
            tried.lock().unwrap().push((addr.to_string(), dual_stack));
            if dual_stack {
                Err(std::io::Error::from_raw_os_error(errno))
            } else {
                listen("127.0.0.1:0".parse().unwrap(), false)
            }
        });
        let tried = tried.into_inner().unwrap();
        if falls_back {
            assert!(result.is_ok(), "errno {errno}: {result:?}");
            assert_eq!(
                tried,
                [("[::]:8443".into(), true), ("0.0.0.0:8443".into(), false)],
                "errno {errno}"
            );
        } else {
            let error = result.unwrap_err();
            assert_eq!(
                error.to_string(),
                "failed to listen on [::]:8443",
                "errno {errno}"
            );
            assert_eq!(tried, [("[::]:8443".into(), true)], "errno {errno}");
        }
    }
    // Any other address is bound as given, never dual-stack.
    let tried = std::sync::Mutex::new(Vec::new());
    bind_with("127.0.0.1:0".parse().unwrap(), |addr, dual_stack| {
        tried.lock().unwrap().push(dual_stack);
        listen(addr, dual_stack)
    })
    .unwrap();
    assert_eq!(tried.into_inner().unwrap(), [false]);
}

struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    cert: Option<CertificateDer<'static>>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server stops")
            .unwrap()
            .unwrap();
    }
}

async fn start(tls: bool, http2: bool) -> Running {
    start_with(tls, http2, Timeouts::default()).await
}

/// Short limits for the tests of connections that say nothing.
fn short() -> Timeouts {
    Timeouts {
        handshake: Duration::from_millis(300),
        header_read: Duration::from_millis(300),
        idle: Duration::from_millis(3000),
        drain: Duration::from_millis(800),
    }
}

async fn start_with(tls: bool, http2: bool, timeouts: Timeouts) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "slow"
            }),
        );
    let (tls, cert) = if tls {
        let resolver = CertResolver::new(CertSource::SelfSigned).unwrap();
        let cert = resolver.current().cert[0].clone();
        (Some(resolver.server_config(http2).unwrap()), Some(cert))
    } else {
        (None, None)
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve(
        listener,
        router,
        ServeOptions {
            tls,
            http2,
            timeouts,
        },
        shutdown.clone(),
    ));
    Running {
        addr,
        shutdown,
        task,
        cert,
    }
}

/// A connection to the server, over TLS when it has a certificate, offering `alpn`.
async fn connect(server: &Running, alpn: &[&[u8]]) -> Box<dyn ReadWrite> {
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let Some(cert) = &server.cert else {
        return Box::new(tcp);
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    Box::new(stream)
}

trait ReadWrite: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> ReadWrite for T {}

/// Sends `GET /hello` over HTTP/2 with prior knowledge; the body, or the error.
async fn get_h2(server: &Running) -> Result<String, String> {
    // No ALPN: the client speaks HTTP/2 with prior knowledge, whatever the server offers.
    let io = connect(server, &[]).await;
    let request = async {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        let response = sender
            .send_request(
                http::Request::get("/hello")
                    .body(Empty::<Bytes>::new())
                    .unwrap(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(body.to_bytes().to_vec()).unwrap())
    };
    tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}

/// Sends `GET /hello` over HTTP/1.1; the body.
async fn get_h1(server: &Running) -> String {
    let io = connect(server, &[b"http/1.1"]).await;
    let request = async {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .unwrap();
        tokio::spawn(connection);
        let response = sender
            .send_request(
                http::Request::get("/hello")
                    .header("host", "localhost")
                    .body(Empty::<Bytes>::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.version(), http::Version::HTTP_11);
        let body = response.into_body().collect().await.unwrap();
        String::from_utf8(body.to_bytes().to_vec()).unwrap()
    };
    tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("an HTTP/1.1 answer within 5 s")
}

#[tokio::test]
async fn without_http2_a_prior_knowledge_h2_request_gets_no_http2() {
    for tls in [true, false] {
        let server = start(tls, false).await;
        assert_eq!(get_h1(&server).await, "hello", "tls: {tls}");
        let h2 = get_h2(&server).await;
        assert!(h2.is_err(), "tls: {tls}: HTTP/2 answered: {h2:?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn with_http2_both_protocols_are_served() {
    for tls in [true, false] {
        let server = start(tls, true).await;
        assert_eq!(get_h1(&server).await, "hello", "tls: {tls}");
        assert_eq!(get_h2(&server).await.as_deref(), Ok("hello"), "tls: {tls}");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_the_handshake_does_not_block_shutdown() {
    let server = start(true, false).await;
    let _silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(get_h1(&server).await, "hello");
    // Far less than the handshake timeout (10 s) or the drain timeout (5 s): a handshake
    // in progress has nothing to drain.
    let started = std::time::Instant::now();
    server.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "shutdown took {:?}",
        started.elapsed()
    );
}

/// How long the server keeps `stream` open when the client sends `send` and nothing more;
/// fails after 5 s.
async fn held_open<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, send: &[u8]) -> Duration {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let started = std::time::Instant::now();
    stream.write_all(send).await.unwrap();
    let mut buffer = vec![0; 4096];
    let closed = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the server closed the connection within 5 s");
    started.elapsed()
}

/// Pins the handshake timeout: a client that connects and says nothing is dropped after it.
#[tokio::test]
async fn a_silent_client_is_dropped_at_the_handshake_timeout() {
    let server = start_with(true, false, short()).await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let held = held_open(tcp, b"").await;
    assert!(held >= Duration::from_millis(250), "dropped after {held:?}");
    assert!(held < Duration::from_millis(2000), "held for {held:?}");
    server.stop().await;
}

/// Pins the header timeout for both protocols, while the protocol is being detected too:
/// a client that shakes hands and then says nothing, or sends a request line and trickles
/// the rest, is dropped.
#[tokio::test]
async fn a_client_that_sends_no_request_is_dropped_at_the_header_timeout() {
    for (tls, http2) in [(false, false), (false, true), (true, true), (true, false)] {
        let server = start_with(tls, http2, short()).await;
        let mut starts = vec![&b""[..], b"GET /hello HTTP/1.1\r\nHost: x\r\n"];
        if http2 {
            starts.push(b"PRI * HTTP/2.0\r\n");
        }
        for send in starts {
            let held = held_open(connect(&server, &[]).await, send).await;
            // The header timeout (0.3 s), well before the idle timeout (3 s).
            assert!(
                held >= Duration::from_millis(250) && held < Duration::from_millis(2000),
                "tls {tls} http2 {http2} {send:?}: held for {held:?}"
            );
        }
        server.stop().await;
    }
}

/// Pins the idle timeout: with HTTP/2, a connection whose requests are done is closed
/// after it, but never while a request is in flight.
#[tokio::test]
async fn an_idle_http2_connection_is_closed_but_not_a_busy_one() {
    let server = start_with(true, true, short()).await;
    let io = connect(&server, &[b"h2"]).await;
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let started = std::time::Instant::now();
    // A request that takes longer than the idle timeout is answered.
    let response = sender
        .send_request(
            http::Request::get("/slow")
                .body(Empty::<Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"slow");
    // Then, idle, the connection is closed.
    tokio::time::timeout(Duration::from_secs(5), connection)
        .await
        .expect("the idle connection was closed within 5 s")
        .unwrap()
        .unwrap();
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(1500 + 2900),
        "closed after {held:?}"
    );
    assert!(
        held < Duration::from_millis(1500 + 5000),
        "held for {held:?}"
    );
    server.stop().await;
}

/// Sends `GET /hello` on an HTTP/1.1 connection and reads the answer.
async fn keep_alive_request<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream
        .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0; 1024];
    while !answer.ends_with(b"hello") {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert!(read > 0, "closed before the answer");
        answer.extend_from_slice(&buffer[..read]);
    }
}

/// Pins the idle timeout of HTTP/1.1: a keep-alive connection stays open well past the
/// header timeout (hyper's own header timeout would close it then) and closes at the idle
/// timeout.
#[tokio::test]
async fn an_idle_http1_connection_is_kept_until_the_idle_timeout() {
    let server = start_with(true, false, short()).await;
    let mut stream = connect(&server, &[b"http/1.1"]).await;
    keep_alive_request(&mut stream).await;
    let held = held_open(stream, b"").await;
    assert!(held >= Duration::from_millis(2900), "closed after {held:?}");
    assert!(held < Duration::from_millis(5000), "held for {held:?}");
    server.stop().await;
}

/// Pins the header timeout of a later HTTP/1.1 request: its headers are due within the
/// header timeout of its first byte, not the idle timeout.
#[tokio::test]
async fn a_later_http1_request_that_trickles_is_dropped_at_the_header_timeout() {
    let server = start_with(false, false, short()).await;
    let mut stream = connect(&server, &[]).await;
    keep_alive_request(&mut stream).await;
    let held = held_open(stream, b"GET /hello HTTP/1.1\r\nHost").await;
    assert!(
        held >= Duration::from_millis(250) && held < Duration::from_millis(2000),
        "held for {held:?}"
    );
    server.stop().await;
}

/// Pins the drain: shutdown waits for a request in flight, and no longer than the drain
/// timeout.
#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_within_the_drain_timeout() {
    for (drain, answered) in [
        (Duration::from_secs(3), true),
        (Duration::from_millis(300), false),
    ] {
        let timeouts = Timeouts {
            drain,
            header_read: Duration::from_secs(2),
            ..short()
        };
        let server = start_with(false, false, timeouts).await;
        let io = connect(&server, &[]).await;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = tokio::spawn(async move {
            let response = sender
                .send_request(
                    http::Request::get("/slow")
                        .header("host", "localhost")
                        .body(Empty::<Bytes>::new())
                        .unwrap(),
                )
                .await
                .map_err(|e| e.to_string())?;
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(body.to_bytes())
        });
        // The request is in flight (the handler takes 1.5 s).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let started = std::time::Instant::now();
        server.stop().await;
        let stopped = started.elapsed();
        let outcome = tokio::time::timeout(Duration::from_secs(5), request)
            .await
            .unwrap()
            .unwrap();
        if answered {
            assert_eq!(outcome.as_deref(), Ok(&b"slow"[..]));
            assert!(
                stopped >= Duration::from_millis(700),
                "stopped after {stopped:?}"
            );
            assert!(
                stopped < Duration::from_millis(2500),
                "stopped after {stopped:?}"
            );
        } else {
            assert!(outcome.is_err(), "{outcome:?}");
            assert!(
                stopped >= Duration::from_millis(250),
                "stopped after {stopped:?}"
            );
            assert!(
                stopped < Duration::from_millis(1000),
                "stopped after {stopped:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_wildcard_address_listens_on_ipv6_and_ipv4() {
    if std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_err() {
        println!("skipped: this machine has no IPv6 loopback");
        return;
    }
    let listener = bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = tokio::spawn(async move {
        for _ in 0..2 {
            listener.accept().await.unwrap();
        }
    });
    for host in [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ] {
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect((host, port)),
        )
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("{host} refused: {error}"));
    }
    tokio::time::timeout(Duration::from_secs(5), accept)
        .await
        .unwrap()
        .unwrap();
    // An IPv4 address stays IPv4 only.
    let v4 = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
    assert!(v4.local_addr().unwrap().is_ipv4());
}

#[test]
fn only_a_missing_ipv6_falls_back_to_ipv4() {
    assert!(no_ipv6(&std::io::Error::from_raw_os_error(97)));
    assert!(no_ipv6(&std::io::Error::from_raw_os_error(99)));
    // Address in use, or permission denied, is an error to report.
    assert!(!no_ipv6(&std::io::Error::from_raw_os_error(98)));
    assert!(!no_ipv6(&std::io::Error::from_raw_os_error(13)));
}
