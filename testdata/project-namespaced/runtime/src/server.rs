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
