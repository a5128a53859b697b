//! HTTP serving for the manager's endpoints (probes, metrics, and webhooks): plain or TLS,
//! HTTP/1.1 only unless HTTP/2 is enabled, with graceful shutdown.
//!
//! With HTTP/2 off, the server does not merely leave `h2` out of ALPN: it speaks HTTP/1.1 only,
//! so a client that starts HTTP/2 with prior knowledge gets no HTTP/2 either.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish on shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How a server speaks.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// TLS, or plain HTTP when `None`.
    pub tls: Option<Arc<ServerConfig>>,
    /// Serve HTTP/2 as well as HTTP/1.1.
    pub http2: bool,
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then lets open connections
/// finish for at most [`DRAIN_TIMEOUT`].
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    if !options.http2 {
        builder = builder.http1_only();
    }
    let acceptor = options.tls.map(TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
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
        let router = router.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        match &acceptor {
            None => {
                connections.spawn(serve_connection(builder, stream, router, watcher, peer));
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    let stream = match tokio::time::timeout(
                        HANDSHAKE_TIMEOUT,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, "TLS handshake failed: {error}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    serve_connection(builder, stream, router, watcher, peer).await;
                });
            }
        }
    }

    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(%local, "closed connections that were still open after {DRAIN_TIMEOUT:?}");
    }
    // Connections still open, and handshakes still running, end here.
    connections.abort_all();
    Ok(())
}

async fn serve_connection<I>(
    builder: auto::Builder<TokioExecutor>,
    io: I,
    router: Router,
    watcher: hyper_util::server::graceful::Watcher,
    peer: SocketAddr,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(router);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    if let Err(error) = watcher.watch(connection.into_owned()).await {
        tracing::debug!(%peer, "connection ended: {error}");
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/hello", get(|| async { "hello" }));
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
            ServeOptions { tls, http2 },
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
        server.stop().await;
    }
}
