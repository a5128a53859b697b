//! The manager: runs the registered controllers, the probe and metrics endpoints and leader
//! election, and stops them all cleanly on SIGTERM, as controller-runtime's manager does.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cli::Args;
use crate::health::{self, Health, ReadyCheck};
use crate::metrics::{self, Authorizer, Metrics};
use crate::tls::{self, CertSource};

/// Seconds a leader's lease stays valid without renewal.
const LEASE_DURATION_SECONDS: u64 = 15;
/// Seconds before expiry at which the leader renews its lease.
const LEASE_GRACE_SECONDS: u64 = 5;
/// Time HTTP servers get to finish open requests on shutdown.
const SERVER_DRAIN: Duration = Duration::from_secs(5);

// Controllers publish events with kube's `Recorder`, which creates them and patches repeats
// into a series.
// +rsbuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

/// What a controller gets from the manager.
#[derive(Clone)]
pub struct ControllerContext {
    /// The controller's name, as registered; it labels its metrics and readiness check.
    pub name: &'static str,
    /// A client for the API server.
    pub client: Client,
    /// The manager's metrics.
    pub metrics: Arc<Metrics>,
    /// Mark this ready once the controller's cache has synced.
    pub ready: ReadyCheck,
    /// Cancelled when the controller must stop: on SIGTERM, or when leadership is lost.
    pub shutdown: CancellationToken,
    /// The namespace to watch (`--watch-namespace`, `WATCH_NAMESPACE`); `None` watches all.
    pub watch_namespace: Option<String>,
}

type StartFn = Box<dyn FnOnce(ControllerContext) -> BoxFuture<'static, anyhow::Result<()>> + Send>;

/// A controller the manager starts: a name and an async function that runs until shutdown.
pub struct Registration {
    name: &'static str,
    start: StartFn,
}

impl Registration {
    /// Registers `start` under `name`. The future it returns must run until
    /// `ControllerContext::shutdown` is cancelled; ending earlier stops the manager with an error.
    pub fn new<F, Fut>(name: &'static str, start: F) -> Self
    where
        F: FnOnce(ControllerContext) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self {
            name,
            start: Box::new(move |ctx| start(ctx).boxed()),
        }
    }
}

/// Runs controllers and the endpoints around them.
pub struct Manager {
    args: Args,
    client: Client,
    health: Health,
    metrics: Arc<Metrics>,
}

impl Manager {
    /// A manager talking to the cluster of the in-cluster config or of `KUBECONFIG`.
    pub async fn new(args: Args) -> anyhow::Result<Self> {
        let client = Client::try_default().await.context(
            "failed to create a Kubernetes client: run in a pod or point KUBECONFIG at a cluster",
        )?;
        Ok(Self::with_client(args, client))
    }

    /// A manager using `client`; tests pass a mocked one.
    pub fn with_client(args: Args, client: Client) -> Self {
        Self {
            args,
            client,
            health: Health::default(),
            metrics: Arc::default(),
        }
    }

    /// The health state that `/healthz` and `/readyz` report.
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Runs until SIGTERM or Ctrl-C, or until a controller fails.
    pub async fn run(self, controllers: Vec<Registration>) -> anyhow::Result<()> {
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        self.run_until(controllers, shutdown).await
    }

    /// Runs until `shutdown` is cancelled, or until a controller fails.
    pub async fn run_until(
        self,
        controllers: Vec<Registration>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let mut servers = JoinSet::new();
        if let Some(addr) = self.args.health_probe_bind_address.socket_addr() {
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("failed to bind the health probe address {addr}"))?;
            tracing::info!(%addr, "serving /healthz and /readyz");
            servers.spawn(serve_http(
                listener,
                health::router(self.health.clone()),
                shutdown.clone(),
            ));
        }
        if let Some(addr) = self.args.metrics_bind_address.socket_addr() {
            let listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("failed to bind the metrics address {addr}"))?;
            if self.args.metrics_secure {
                let source = CertSource::from_flags(
                    self.args.metrics_cert_path.as_deref(),
                    &self.args.metrics_cert_name,
                    &self.args.metrics_cert_key,
                );
                let config =
                    RustlsConfig::from_config(tls::server_config(&source, self.args.enable_http2)?);
                tokio::spawn(tls::reload_on_change(
                    config.clone(),
                    source,
                    self.args.enable_http2,
                    shutdown.clone(),
                ));
                let router = metrics::router(
                    self.metrics.clone(),
                    Some(Authorizer::new(self.client.clone())),
                );
                tracing::info!(%addr, "serving /metrics over HTTPS to authorized clients");
                servers.spawn(serve_https(listener, router, config, shutdown.clone()));
            } else {
                tracing::info!(%addr, "serving /metrics over HTTP");
                servers.spawn(serve_http(
                    listener,
                    metrics::router(self.metrics.clone(), None),
                    shutdown.clone(),
                ));
            }
        }

        let result = if self.args.leader_elect {
            self.lead(controllers, &shutdown).await
        } else {
            self.run_controllers(controllers, shutdown.clone()).await
        };

        shutdown.cancel();
        while let Some(joined) = servers.join_next().await {
            if let Err(error) = joined.context("an HTTP server panicked").and_then(|r| r) {
                tracing::error!("{error:#}");
            }
        }
        result
    }

    /// Waits for the leader election lease, then runs the controllers while this replica leads.
    async fn lead(
        &self,
        controllers: Vec<Registration>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let id = &self.args.leader_election_id;
        let namespace = self
            .args
            .leader_election_namespace
            .clone()
            .unwrap_or_else(|| self.client.default_namespace().to_owned());
        let mut builder = LeaseManagerBuilder::new(self.client.clone(), id)
            .with_namespace(&namespace)
            .with_duration(LEASE_DURATION_SECONDS)
            .with_grace(LEASE_GRACE_SECONDS);
        if let Ok(pod) = std::env::var("POD_NAME") {
            builder = builder.with_identity(pod);
        }
        let lease = builder.build().await.with_context(|| {
            format!("failed to set up leader election with Lease {namespace}/{id}")
        })?;
        let (mut leading, task) = lease.watch().await;

        tracing::info!("waiting to acquire the leader election Lease {namespace}/{id}");
        let result = loop {
            if *leading.borrow_and_update() {
                break Ok(true);
            }
            tokio::select! {
                changed = leading.changed() => if changed.is_err() {
                    break Err(anyhow!("leader election for Lease {namespace}/{id} stopped"));
                },
                () = shutdown.cancelled() => break Ok(false),
            }
        };
        let result = match result {
            Ok(true) => {
                tracing::info!("acquired the leader election Lease {namespace}/{id}");
                self.metrics.set_leader(true);
                let stop = shutdown.child_token();
                let controllers = self.run_controllers(controllers, stop.clone());
                let lost = async {
                    while leading.changed().await.is_ok() && *leading.borrow_and_update() {}
                };
                tokio::pin!(controllers);
                let result = tokio::select! {
                    result = &mut controllers => result,
                    () = lost => {
                        stop.cancel();
                        let _ = controllers.await;
                        Err(anyhow!("lost the leader election Lease {namespace}/{id}"))
                    }
                };
                self.metrics.set_leader(false);
                result
            }
            Ok(false) => Ok(()),
            Err(error) => Err(error),
        };

        // Closing the channel makes the lease task release the Lease, so that another replica
        // takes over at once instead of after the lease expires.
        drop(leading);
        match task.await {
            Ok(Ok(_)) => tracing::info!("released the leader election Lease {namespace}/{id}"),
            Ok(Err(error)) => {
                tracing::warn!("failed to release the Lease {namespace}/{id}: {error}")
            }
            Err(error) => tracing::warn!("the leader election task failed: {error}"),
        }
        result
    }

    /// Runs every controller until `stop` is cancelled. One that fails or ends early marks the
    /// manager unhealthy and stops the others.
    async fn run_controllers(
        &self,
        controllers: Vec<Registration>,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        if controllers.is_empty() {
            tracing::warn!("no controllers are registered; add one with `rsbuilder create api`");
        }
        let mut tasks = JoinSet::new();
        for registration in controllers {
            let ctx = ControllerContext {
                name: registration.name,
                client: self.client.clone(),
                metrics: self.metrics.clone(),
                ready: self.health.readiness_check(registration.name),
                shutdown: stop.clone(),
                watch_namespace: self.args.watch_namespace.clone(),
            };
            tracing::info!(controller = registration.name, "starting controller");
            let name = registration.name;
            tasks.spawn(async move { (name, (registration.start)(ctx).await) });
        }

        let mut result = Ok(());
        while let Some(joined) = tasks.join_next().await {
            let failure = match joined {
                Err(error) => Some(anyhow!("a controller panicked: {error}")),
                Ok((name, Err(error))) => Some(error.context(format!("controller {name} failed"))),
                Ok((name, Ok(()))) if !stop.is_cancelled() => {
                    Some(anyhow!("controller {name} stopped before shutdown"))
                }
                Ok((name, Ok(()))) => {
                    tracing::info!(controller = name, "controller stopped");
                    None
                }
            };
            if let Some(error) = failure {
                tracing::error!("{error:#}");
                self.health.fail(format!("{error:#}"));
                stop.cancel();
                if result.is_ok() {
                    result = Err(error);
                }
            }
        }
        if result.is_ok() {
            stop.cancelled().await;
        }
        result
    }
}

async fn serve_http(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .context("HTTP server failed")
}

async fn serve_https(
    listener: TcpListener,
    router: Router,
    config: RustlsConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        stopper.graceful_shutdown(Some(SERVER_DRAIN));
    });
    axum_server::from_tcp_rustls(listener.into_std()?, config)?
        .handle(handle)
        .serve(router.into_make_service())
        .await
        .context("HTTPS server failed")
}

/// Cancels `token` on SIGTERM (what the kubelet sends) or Ctrl-C.
async fn cancel_on_signal(token: CancellationToken) {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!("cannot listen for SIGTERM: {error}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
    token.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use http::StatusCode;

    fn manager() -> Manager {
        let (service, _handle) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let args = Args::try_parse_from(["manager", "--health-probe-bind-address=0"]).unwrap();
        Manager::with_client(args, Client::new(service, "default"))
    }

    #[tokio::test]
    async fn controllers_run_until_shutdown() {
        let manager = manager();
        let health = manager.health();
        let shutdown = CancellationToken::new();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let controllers = vec![Registration::new(
            "appotp",
            move |ctx: ControllerContext| async move {
                ctx.ready.ready();
                started_tx.send(()).unwrap();
                ctx.shutdown.cancelled().await;
                Ok(())
            },
        )];
        let run = tokio::spawn(manager.run_until(controllers, shutdown.clone()));
        started.await.unwrap();
        assert_eq!(health.readiness().0, StatusCode::OK);
        shutdown.cancel();
        run.await.unwrap().unwrap();
        assert_eq!(health.liveness().0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_failing_controller_stops_the_manager() {
        let manager = manager();
        let health = manager.health();
        let controllers = vec![
            Registration::new("broken", |_ctx: ControllerContext| async {
                Err(anyhow!("boom"))
            }),
            Registration::new("healthy", |ctx: ControllerContext| async move {
                ctx.shutdown.cancelled().await;
                Ok(())
            }),
        ];
        let error = manager
            .run_until(controllers, CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(format!("{error:#}"), "controller broken failed: boom");
        assert_eq!(health.liveness().0, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[tokio::test]
    async fn a_controller_that_ends_early_is_an_error() {
        let controllers = vec![Registration::new(
            "quitter",
            |_ctx: ControllerContext| async { Ok(()) },
        )];
        let error = manager()
            .run_until(controllers, CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "controller quitter stopped before shutdown"
        );
    }

    #[tokio::test]
    async fn without_controllers_it_waits_for_shutdown() {
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager().run_until(Vec::new(), shutdown.clone()));
        tokio::task::yield_now().await;
        assert!(!run.is_finished());
        shutdown.cancel();
        run.await.unwrap().unwrap();
    }
}
