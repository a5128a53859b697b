//! HTTP serving for the manager's endpoints (probes, metrics, and webhooks): plain or TLS,
//! HTTP/1.1 only unless HTTP/2 is enabled, with graceful shutdown.
//!
//! With HTTP/2 off, the server does not merely leave `h2` out of ALPN: it speaks HTTP/1.1 only,
//! so a client that starts HTTP/2 with prior knowledge gets no HTTP/2 either.
//!
//! No connection is kept by a client that says nothing, whatever the protocol: the TLS handshake
//! must end within [`HANDSHAKE_TIMEOUT`]; the first request's headers must arrive within
//! [`HEADER_READ_TIMEOUT`] of the connection (HTTP/2 too, and while the protocol is still being
//! detected), and those of a later HTTP/1.1 request within it of the request's first byte; a
//! connection with no request in flight and no request coming is closed after [`IDLE_TIMEOUT`]
//! (HTTP/2 with a GOAWAY), as Go's `ReadHeaderTimeout` and `IdleTimeout` do. A request in
//! flight is never cut off but at shutdown, after [`DRAIN_TIMEOUT`].
//!
//! [`bind`] listens on IPv6 and IPv4 for a wildcard address, as Go's `:8080` does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection with no request in flight stays open: longer than the idle timeout of
/// Go's HTTP clients (90 s), so that the API server closes its idle connections first.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long open connections get to finish on shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The time limits of a server's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// [`HANDSHAKE_TIMEOUT`].
    pub handshake: Duration,
    /// [`HEADER_READ_TIMEOUT`].
    pub header_read: Duration,
    /// [`IDLE_TIMEOUT`].
    pub idle: Duration,
    /// [`DRAIN_TIMEOUT`].
    pub drain: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            handshake: HANDSHAKE_TIMEOUT,
            header_read: HEADER_READ_TIMEOUT,
            idle: IDLE_TIMEOUT,
            drain: DRAIN_TIMEOUT,
        }
    }
}

/// How a server speaks.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// TLS, or plain HTTP when `None`.
    pub tls: Option<Arc<ServerConfig>>,
    /// Serve HTTP/2 as well as HTTP/1.1.
    pub http2: bool,
    /// The time limits of connections.
    pub timeouts: Timeouts,
}

/// A listener on `addr`. The wildcard `[::]` (what `:PORT` means) listens on IPv6 and IPv4;
/// where the machine has no IPv6, on IPv4 alone.
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    bind_with(addr, listen)
}

/// [`bind`], with `listen` making the listener of an address, dual-stack or not.
fn bind_with(
    addr: SocketAddr,
    listen: impl Fn(SocketAddr, bool) -> std::io::Result<TcpListener>,
) -> anyhow::Result<TcpListener> {
    if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
        match listen(addr, true) {
            Ok(listener) => return Ok(listener),
            Err(error) if no_ipv6(&error) => {
                let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port());
                tracing::info!(%addr, "IPv6 is not available ({error}): listening on {v4}");
                return listen(v4, false).with_context(|| format!("failed to listen on {v4}"));
            }
            Err(error) => {
                return Err(error).with_context(|| format!("failed to listen on {addr}"));
            }
        }
    }
    listen(addr, false).with_context(|| format!("failed to listen on {addr}"))
}

/// Whether `error` says that the machine has no IPv6.
fn no_ipv6(error: &std::io::Error) -> bool {
    // EAFNOSUPPORT: no IPv6 in the kernel; EADDRNOTAVAIL: IPv6 disabled on every interface.
    matches!(error.raw_os_error(), Some(97 | 99))
}

fn listen(addr: SocketAddr, dual_stack: bool) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if dual_stack {
        socket.set_only_v6(false)?;
    }
    // As tokio's `TcpListener::bind`: a restarted manager can listen again at once.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets open connections
/// finish for at most the drain timeout.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let timeouts = options.timeouts;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's own header timeout restarts whenever an HTTP/1.1 connection goes idle, which would
    // close idle connections after the header timeout: each connection keeps its deadlines.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder.http2().timer(TokioTimer::new());
    if !options.http2 {
        builder = builder.http1_only();
    }
    let acceptor = options.tls.map(TlsAcceptor::from);
    let draining = CancellationToken::new();
    let mut connections = tokio::task::JoinSet::new();
    let local = listener
        .local_addr()
        .context("failed to read the listening address")?;

    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, most likely: wait rather than spin.
                    tracing::warn!(%local, "failed to accept a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        // Forget the connections that have ended.
        while connections.try_join_next().is_some() {}
        let connection = Connection {
            builder: builder.clone(),
            router: router.clone(),
            draining: draining.clone(),
            timeouts,
            peer,
        };
        match &acceptor {
            None => {
                connections.spawn(connection.serve(stream));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    let handshake = acceptor.accept(stream);
                    let stream = tokio::select! {
                        // A handshake in progress is dropped at shutdown: nothing to drain.
                        () = connection.draining.cancelled() => return,
                        done = tokio::time::timeout(timeouts.handshake, handshake) => match done {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(error)) => {
                                tracing::debug!(%peer, "TLS handshake failed: {error}");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        },
                    };
                    connection.serve(stream).await;
                });
            }
        }
    }

    drop(listener);
    draining.cancel();
    let drained = tokio::time::timeout(timeouts.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(%local, "closed connections that were still open after {:?}", timeouts.drain);
    }
    // Connections still open end here.
    connections.abort_all();
    Ok(())
}

/// One accepted connection, before its protocol is known.
struct Connection {
    builder: auto::Builder<TokioExecutor>,
    router: Router,
    /// Cancelled when the server shuts down: the connection finishes what is in flight.
    draining: CancellationToken,
    timeouts: Timeouts,
    peer: SocketAddr,
}

/// The requests of one connection, which decide when it may be closed.
#[derive(Default)]
struct Activity {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    requests: usize,
    /// When the last request started or ended.
    last: Option<Instant>,
    /// When the first byte after the last HTTP/1.1 request arrived: the next request's headers
    /// are due within the header timeout of it.
    next_request: Option<Instant>,
    http2: bool,
}

impl Activity {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn start(self: &Arc<Self>, version: axum::http::Version) -> InFlight {
        let mut state = self.state();
        state.in_flight += 1;
        state.requests += 1;
        state.last = Some(Instant::now());
        state.next_request = None;
        state.http2 = version == axum::http::Version::HTTP_2;
        InFlight(self.clone())
    }

    /// Bytes came from the client.
    fn read(&self) {
        let mut state = self.state();
        // HTTP/2 sends frames between requests (pings, window updates): only its streams count.
        // Before the first request, `deadline` keeps to the time the connection opened, and
        // `start` forgets this byte.
        if state.in_flight == 0 && !state.http2 && state.next_request.is_none() {
            state.next_request = Some(Instant::now());
        }
    }

    /// When the connection may be closed, if no request starts before: the header timeout after
    /// it opened, or after the first byte of the next HTTP/1.1 request; else the idle timeout
    /// after its last request ended. `None` while a request is in flight.
    fn deadline(&self, opened: Instant, timeouts: Timeouts) -> Option<Instant> {
        let state = self.state();
        if state.in_flight > 0 {
            None
        } else if state.requests == 0 {
            Some(opened + timeouts.header_read)
        } else if let Some(first_byte) = state.next_request {
            Some(first_byte + timeouts.header_read)
        } else {
            Some(state.last.unwrap_or(opened) + timeouts.idle)
        }
    }

    fn requests(&self) -> usize {
        self.state().requests
    }

    fn in_flight(&self) -> usize {
        self.state().in_flight
    }
}

/// A request in flight; it ends when dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight -= 1;
        state.last = Some(Instant::now());
        state.next_request = None;
    }
}

/// A connection's stream, which tells its [`Activity`] when bytes come in.
struct Watched<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connection {
    async fn serve<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Self {
            builder,
            router,
            draining,
            timeouts,
            peer,
        } = self;
        let opened = Instant::now();
        let activity = Arc::new(Activity::default());
        let service = {
            let activity = activity.clone();
            tower::service_fn(move |request: axum::http::Request<hyper::body::Incoming>| {
                use tower::ServiceExt as _;
                let in_flight = activity.start(request.version());
                let router = router.clone();
                async move {
                    let response = router.oneshot(request).await;
                    drop(in_flight);
                    response
                }
            })
        };
        let io = Watched {
            io,
            activity: activity.clone(),
        };
        let connection =
            builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let mut connection = pin!(connection);
        // How the connection is being closed: at shutdown, what is in flight gets the drain
        // timeout; when idle, a client that keeps the connection after the GOAWAY gets the
        // drain timeout too, but a request that raced the GOAWAY is never cut off.
        let mut shutting_down_by: Option<Instant> = None;
        let mut idle_closed_at: Option<Instant> = None;
        loop {
            let deadline = shutting_down_by
                .or(idle_closed_at.map(|at| at + timeouts.drain))
                .unwrap_or_else(|| {
                    // While a request is in flight, look again an idle timeout later.
                    activity
                        .deadline(opened, timeouts)
                        .unwrap_or_else(|| Instant::now() + timeouts.idle)
                });
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%peer, "connection ended: {error}");
                    }
                    return;
                }
                () = draining.cancelled(), if shutting_down_by.is_none() => {
                    connection.as_mut().graceful_shutdown();
                    shutting_down_by = Some(Instant::now() + timeouts.drain);
                }
                () = tokio::time::sleep_until(deadline) => {
                    if shutting_down_by.is_some() {
                        tracing::debug!(%peer, "closed a connection still busy at shutdown");
                        return;
                    }
                    if let Some(at) = idle_closed_at {
                        if activity.in_flight() == 0 {
                            tracing::debug!(%peer, "closed a connection kept after its GOAWAY");
                            return;
                        }
                        idle_closed_at = Some(at + timeouts.idle);
                        continue;
                    }
                    if activity.deadline(opened, timeouts).is_some_and(|d| d <= Instant::now()) {
                        if activity.requests() == 0 {
                            tracing::debug!(%peer, "closed a connection that sent no request in time");
                            return;
                        }
                        tracing::debug!(%peer, "closing an idle connection");
                        // HTTP/2 gets a GOAWAY, HTTP/1.1 is closed at once.
                        connection.as_mut().graceful_shutdown();
                        idle_closed_at = Some(Instant::now());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
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

        fn poll_shutdown(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<std::io::Result<()>> {
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
}
