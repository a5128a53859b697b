//! The manager: runs the registered controllers, the probe and metrics endpoints and leader
//! election, and stops them all cleanly on SIGTERM, as controller-runtime's manager does.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::args::ManagerArgs;
use crate::client::{Guard, RequestPolicy, Watches};
use crate::health::{self, Health, ReadyCheck};
use crate::leader::{self, Fence, Held, LeaderElectionConfig, LeaderElector};
use crate::metrics::{self, Authorizer, Metrics};
use crate::server::{self, ServeOptions};
use crate::tls::{self, CertResolver, CertSource};
use crate::webhook::Webhooks;
use crate::webhook::certs::SelfManagedCerts;

/// How long controllers get to stop after shutdown begins by default
/// (controller-runtime's `GracefulShutdownTimeout`, `--graceful-shutdown-timeout`); a leader's
/// Lease is renewed meanwhile.
pub const GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

// Controllers publish events with kube's `Recorder`, which creates them and patches repeats
// into a series; leader election reads and writes its Lease.
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
    /// How many reconciles of this controller may run at once (`--max-concurrent-reconciles`).
    pub max_concurrent_reconciles: u16,
    /// How long the controller's cache may take to sync, at start and after a relist, before
    /// the controller fails (`--cache-sync-timeout`).
    pub cache_sync_timeout: Duration,
    /// The state of the client's watches: a controller is not ready while its own is down.
    pub watches: Arc<Watches>,
}

impl ControllerContext {
    /// The API of a namespaced kind as the controller should watch it: in the namespace of
    /// `--watch-namespace` when one is given, in all namespaces otherwise.
    pub fn api<K>(&self) -> kube::Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match &self.watch_namespace {
            Some(namespace) => kube::Api::namespaced(self.client.clone(), namespace),
            None => kube::Api::all(self.client.clone()),
        }
    }
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

    /// The name it was registered under.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Runs controllers and the endpoints around them.
pub struct Manager {
    args: ManagerArgs,
    client: Client,
    health: Health,
    metrics: Arc<Metrics>,
    leader_election_id: Option<String>,
    require_watch_namespace: bool,
    identity: String,
    webhooks: Webhooks,
    watches: Arc<Watches>,
}

impl Manager {
    /// A manager talking to the cluster of the in-cluster config or of `KUBECONFIG`, through
    /// [`crate::client::transport`]: TCP keepalive, HTTP/2 where offered, no hidden retries.
    pub async fn new(args: ManagerArgs) -> anyhow::Result<Self> {
        let config = kube::Config::infer().await.context(
            "failed to create a Kubernetes client: run in a pod or point KUBECONFIG at a cluster",
        )?;
        let client = crate::client::transport(config)?;
        Ok(Self::with_client(args, client))
    }

    /// A manager using `client` as its connection to the API server; tests pass a mocked one.
    /// The controllers' requests go through a [`Guard`] around it.
    pub fn with_client(args: ManagerArgs, client: Client) -> Self {
        Self {
            args,
            client,
            health: Health::default(),
            metrics: Arc::default(),
            leader_election_id: None,
            require_watch_namespace: false,
            identity: leader::default_identity(),
            webhooks: Webhooks::new(),
            watches: Arc::default(),
        }
    }

    /// The Lease name used for leader election when `--leader-election-id` is not given.
    pub fn leader_election_id(mut self, id: impl Into<String>) -> Self {
        self.leader_election_id = Some(id.into());
        self
    }

    /// Refuses to run without `--watch-namespace` (or `WATCH_NAMESPACE`): for projects whose
    /// RBAC is a Role in one namespace, where watching all namespaces would be forbidden.
    pub fn require_watch_namespace(mut self) -> Self {
        self.require_watch_namespace = true;
        self
    }

    /// This replica's leader election identity (default: [`leader::default_identity`]).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// Serves `webhooks` over HTTPS on `--webhook-port`, on every replica, unless
    /// `--enable-webhooks=false` (`ENABLE_WEBHOOKS=false`).
    pub fn webhooks(mut self, webhooks: Webhooks) -> Self {
        self.webhooks = webhooks;
        self
    }

    /// The health state that `/healthz` and `/readyz` report.
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// The manager's metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Runs until SIGTERM or Ctrl-C, or until a controller fails or leadership is lost.
    pub async fn run(self, controllers: Vec<Registration>) -> anyhow::Result<()> {
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        self.run_until(controllers, shutdown).await
    }

    /// Runs until `shutdown` is cancelled, or until a controller fails or leadership is lost.
    pub async fn run_until(
        self,
        controllers: Vec<Registration>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        if self.require_watch_namespace && self.args.watch_namespace.is_none() {
            return Err(anyhow!(
                "the manager of a namespaced project needs the namespace to watch: pass --watch-namespace or set WATCH_NAMESPACE"
            ));
        }
        let election = if self.args.leader_elect {
            let config = self.leader_election_config()?;
            config.validate()?;
            Some(config)
        } else {
            None
        };

        // The servers (probes, metrics, webhooks) stop last, as controller-runtime's do: while
        // the controllers finish after a SIGTERM, admission and conversion calls are still
        // answered and the probes still answer.
        let serving = CancellationToken::new();
        let _stop_serving = serving.clone().drop_guard();
        let servers = self.start_servers(&serving).await?;
        let result = match election {
            Some(config) => self.lead(config, controllers, &shutdown).await,
            None => {
                let client = self.guard().client();
                self.run_controllers(client, controllers, shutdown.clone())
                    .await
                    .result
            }
        };

        shutdown.cancel();
        serving.cancel();
        let mut servers = servers;
        while let Some(joined) = servers.join_next().await {
            if let Err(error) = joined.context("an HTTP server panicked").and_then(|r| r) {
                tracing::error!("{error:#}");
            }
        }
        result
    }

    /// The client rules of the controllers' requests, from the flags.
    fn guard(&self) -> Guard {
        let policy = RequestPolicy {
            timeout: self.args.api_request_timeout,
            ..RequestPolicy::default()
        };
        Guard::new(self.client.clone(), policy)
            .metrics(self.metrics.client.clone())
            .watches(self.watches.clone())
    }

    fn leader_election_config(&self) -> anyhow::Result<LeaderElectionConfig> {
        let lease_name = self
            .args
            .leader_election_id
            .clone()
            .or_else(|| self.leader_election_id.clone())
            .context("leader election needs a Lease name: pass --leader-election-id")?;
        Ok(LeaderElectionConfig {
            lease_name,
            namespace: self
                .args
                .leader_election_namespace
                .clone()
                .unwrap_or_else(|| self.client.default_namespace().to_owned()),
            identity: self.identity.clone(),
            lease_duration: self.args.leader_elect_lease_duration,
            renew_deadline: self.args.leader_elect_renew_deadline,
            retry_period: self.args.leader_elect_retry_period,
        })
    }

    /// Binds and serves the probe and metrics endpoints; every replica serves them, leader or
    /// not.
    async fn start_servers(
        &self,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<JoinSet<anyhow::Result<()>>> {
        let mut servers = JoinSet::new();
        let http2 = self.args.enable_http2;
        if let Some(addr) = self.args.health_probe_bind_address.socket_addr() {
            let listener = server::bind(addr)
                .with_context(|| format!("failed to bind the health probe address {addr}"))?;
            tracing::info!(%addr, "serving /healthz and /readyz");
            servers.spawn(server::serve(
                listener,
                health::router(self.health.clone()),
                ServeOptions {
                    http2,
                    ..ServeOptions::default()
                },
                shutdown.clone(),
            ));
        }
        if let Some(addr) = self.args.metrics_bind_address.socket_addr() {
            let listener = server::bind(addr)
                .with_context(|| format!("failed to bind the metrics address {addr}"))?;
            if self.args.metrics_secure {
                let resolver = CertResolver::new(CertSource::from_flags(
                    self.args.metrics_cert_path.as_deref(),
                    &self.args.metrics_cert_name,
                    &self.args.metrics_cert_key,
                ))?;
                let tls = resolver.server_config(http2)?;
                tokio::spawn(
                    resolver
                        .clone()
                        .reload_on_change(tls::RELOAD_INTERVAL, shutdown.clone()),
                );
                let router = metrics::router(
                    self.metrics.clone(),
                    Some(Authorizer::new(self.client.clone())),
                );
                tracing::info!(%addr, "serving /metrics over HTTPS to authorized clients");
                servers.spawn(server::serve(
                    listener,
                    router,
                    ServeOptions {
                        tls: Some(tls),
                        http2,
                        ..ServeOptions::default()
                    },
                    shutdown.clone(),
                ));
            } else {
                tracing::info!(%addr, "serving /metrics over HTTP");
                servers.spawn(server::serve(
                    listener,
                    metrics::router(self.metrics.clone(), None),
                    ServeOptions {
                        http2,
                        ..ServeOptions::default()
                    },
                    shutdown.clone(),
                ));
            }
        }
        if !self.webhooks.is_empty() {
            if self.args.enable_webhooks {
                self.start_webhook_server(&mut servers, shutdown).await?;
            } else {
                tracing::info!("webhooks are disabled (ENABLE_WEBHOOKS=false)");
            }
        }
        Ok(servers)
    }

    /// The manager of the webhook certificate when `--webhook-cert-secret` is set.
    fn self_managed_certs(&self) -> Option<SelfManagedCerts> {
        let args = &self.args;
        let (Some(secret), Some(service), Some(namespace)) = (
            &args.webhook_cert_secret,
            &args.webhook_service_name,
            &args.webhook_service_namespace,
        ) else {
            return None;
        };
        Some(
            SelfManagedCerts::new(
                self.client.clone(),
                namespace,
                secret,
                service,
                &args.webhook_cert_path,
            )
            .file_names(&args.webhook_cert_name, &args.webhook_cert_key)
            .interval(args.webhook_cert_check_interval)
            .crds(self.webhooks.converted_crds()),
        )
    }

    /// Binds the webhook port with the certificate of `--webhook-cert-path`; the readiness
    /// check `webhook` passes once the server listens.
    async fn start_webhook_server(
        &self,
        servers: &mut JoinSet<anyhow::Result<()>>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let ready = self.health.readiness_check("webhook");
        let certs = self.self_managed_certs();
        if let Some(certs) = &certs {
            certs
                .check()
                .await
                .context("failed to set up the webhook serving certificate")?;
        }
        let source = CertSource::from_flags(
            Some(&self.args.webhook_cert_path),
            &self.args.webhook_cert_name,
            &self.args.webhook_cert_key,
        );
        let resolver = CertResolver::new(source).context(
            "the webhook server has no certificate: pass --webhook-cert-path, or run without webhooks with ENABLE_WEBHOOKS=false",
        )?;
        let tls = resolver.server_config(self.args.enable_http2)?;
        // Every address, IPv6 and IPv4, as controller-runtime's webhook server listens.
        let addr =
            std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, self.args.webhook_port));
        let listener = server::bind(addr)
            .with_context(|| format!("failed to bind the webhook port {addr}"))?;
        tokio::spawn(
            resolver
                .clone()
                .reload_on_change(tls::RELOAD_INTERVAL, shutdown.clone()),
        );
        if let Some(certs) = certs {
            tokio::spawn(certs.run(resolver.clone(), shutdown.clone()));
        }
        tracing::info!(%addr, paths = ?self.webhooks.paths(), "serving webhooks over HTTPS");
        servers.spawn(server::serve(
            listener,
            self.webhooks.router(),
            ServeOptions {
                tls: Some(tls),
                http2: self.args.enable_http2,
                ..ServeOptions::default()
            },
            shutdown.clone(),
        ));
        ready.ready();
        Ok(())
    }

    /// Waits for the Lease, then runs the controllers while this replica leads. A leader that
    /// cannot renew stops its controllers before the Lease can expire, and fails.
    async fn lead(
        &self,
        config: LeaderElectionConfig,
        controllers: Vec<Registration>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let lease = format!("{}/{}", config.namespace, config.lease_name);
        let mut elector = LeaderElector::new(self.client.clone(), config.clone());
        tracing::info!(identity = %config.identity, "waiting to acquire the leader election Lease {lease}");
        let Some(mut leadership) = elector.acquire(shutdown).await else {
            return Ok(());
        };
        tracing::info!("acquired the leader election Lease {lease}");
        self.metrics.set_leader(true);
        // The controllers' requests stop a renew deadline after the last renewal, even before
        // `hold` notices the loss (a replica resumed after a pause).
        let fence = Fence::new(leadership.renewed + config.renew_deadline);
        elector.set_fence(fence.clone());

        // The controllers stop on shutdown; the Lease is renewed until they have stopped, so
        // that no other replica starts while they finish.
        let stop = shutdown.child_token();
        let renewing = CancellationToken::new();
        let client = self.guard().fence(fence.clone()).client();
        let controllers = self.run_controllers(client, controllers, stop.clone());
        tokio::pin!(controllers);
        let held = tokio::select! {
            stopped = &mut controllers => Ok(stopped),
            held = elector.hold(&mut leadership, &renewing) => Err(held),
        };
        let stopped = match held {
            Ok(stopped) => stopped,
            // `renewing` is never cancelled: renewal outlives the controllers.
            Err(Held::Stopped) => controllers.await,
            Err(Held::Lost { last_renewed }) => {
                self.metrics.set_leader(false);
                stop.cancel();
                tracing::error!(
                    "lost the leader election Lease {lease}: not renewed within {:?}; stopping the controllers",
                    config.renew_deadline
                );
                let stop_by = config.stop_by(last_renewed);
                if tokio::time::timeout_at(stop_by, &mut controllers)
                    .await
                    .is_err()
                {
                    tracing::error!(
                        "the controllers did not stop before the Lease could expire; abandoning them"
                    );
                }
                self.health
                    .fail(format!("lost the leader election Lease {lease}"));
                return Err(anyhow!(
                    "lost the leader election Lease {lease}: it was not renewed within {:?}",
                    config.renew_deadline
                ));
            }
        };

        self.metrics.set_leader(false);
        if !stopped.all_stopped {
            // A controller still running may still write: the others must wait for the
            // Lease to expire, as controller-runtime's `LeaderElectionReleaseOnCancel` (off by
            // default) leaves them to.
            fence.close();
            tracing::warn!(
                "not releasing the leader election Lease {lease}: a controller did not stop; the other replicas take over once it expires"
            );
            return stopped.result;
        }
        // Nothing a controller left behind (a task it spawned) writes once the Lease is given up.
        fence.close();
        match elector.release().await {
            Ok(true) => tracing::info!("released the leader election Lease {lease}"),
            Ok(false) => {}
            Err(error) => tracing::warn!("failed to release the Lease {lease}: {error:#}"),
        }
        stopped.result
    }

    /// Runs every controller until `stop` is cancelled, then gives them
    /// `--graceful-shutdown-timeout` ([`GRACEFUL_SHUTDOWN_TIMEOUT`]) to stop. One that fails or ends early marks the manager
    /// unhealthy and stops the others.
    async fn run_controllers(
        &self,
        client: Client,
        controllers: Vec<Registration>,
        stop: CancellationToken,
    ) -> Stopped {
        if controllers.is_empty() {
            tracing::warn!("no controllers are registered; add one with `rsbuilder create api`");
        }
        let mut tasks = JoinSet::new();
        let mut names = HashMap::new();
        for registration in controllers {
            let ctx = ControllerContext {
                name: registration.name,
                client: client.clone(),
                metrics: self.metrics.clone(),
                ready: self.health.readiness_check(registration.name),
                shutdown: stop.clone(),
                watch_namespace: self.args.watch_namespace.clone(),
                max_concurrent_reconciles: self.args.max_concurrent_reconciles,
                cache_sync_timeout: self.args.cache_sync_timeout,
                watches: self.watches.clone(),
            };
            tracing::info!(controller = registration.name, "starting controller");
            let task = tasks.spawn((registration.start)(ctx));
            names.insert(task.id(), registration.name);
        }

        let grace = self.args.graceful_shutdown_timeout;
        let mut result = Ok(());
        let mut all_stopped = true;
        let mut deadline = None;
        loop {
            let joined = if stop.is_cancelled() {
                let deadline = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + grace);
                match tokio::time::timeout_at(deadline, tasks.join_next_with_id()).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        let mut stuck: Vec<&str> = names.values().copied().collect();
                        stuck.sort_unstable();
                        let error = anyhow!(
                            "controller {} did not stop within {grace:?} of shutdown",
                            stuck.join(", ")
                        );
                        tracing::error!("{error}");
                        tasks.abort_all();
                        all_stopped = false;
                        if result.is_ok() {
                            result = Err(error);
                        }
                        break;
                    }
                }
            } else {
                tokio::select! {
                    joined = tasks.join_next_with_id() => joined,
                    () = stop.cancelled() => continue,
                }
            };
            let Some(joined) = joined else {
                break;
            };
            let id = match &joined {
                Ok((id, _)) => *id,
                Err(error) => error.id(),
            };
            let name = names.remove(&id).unwrap_or("unknown");
            let failure = match joined {
                Err(error) => Some(anyhow!("controller {name} panicked: {error}")),
                Ok((_, Err(error))) => Some(error.context(format!("controller {name} failed"))),
                Ok((_, Ok(()))) if !stop.is_cancelled() => {
                    Some(anyhow!("controller {name} stopped before shutdown"))
                }
                Ok((_, Ok(()))) => {
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
        Stopped {
            result,
            all_stopped,
        }
    }
}

/// How the controllers ended.
struct Stopped {
    /// The first failure, if any.
    result: anyhow::Result<()>,
    /// Whether every controller stopped by itself; `false` when some were abandoned after the
    /// grace period, and may still have had a request in flight.
    all_stopped: bool,
}

/// The exit status of a process told a second time to stop, as controller-runtime's.
const FORCED_EXIT_STATUS: i32 = 1;

/// Cancels `token` on SIGTERM (what the kubelet sends) or Ctrl-C, and exits the process at once
/// with status 1 on a second one, as controller-runtime's `SetupSignalHandler` does.
async fn cancel_on_signal(token: CancellationToken) {
    if let Some(status) = on_termination_signals(termination_signals(), &token).await {
        std::process::exit(status);
    }
}

/// What termination signals ask for: the first cancels `token`, for a clean shutdown; the
/// second returns the status that the process must exit with at once. `None` when `signals`
/// ends before.
async fn on_termination_signals(
    signals: impl futures::Stream<Item = &'static str>,
    token: &CancellationToken,
) -> Option<i32> {
    use futures::StreamExt as _;
    let mut signals = std::pin::pin!(signals);
    let first = signals.next().await?;
    tracing::info!(
        signal = first,
        "shutting down; a second signal exits at once"
    );
    token.cancel();
    let second = signals.next().await?;
    tracing::error!(
        signal = second,
        "a second termination signal: exiting at once with status {FORCED_EXIT_STATUS}"
    );
    Some(FORCED_EXIT_STATUS)
}

/// SIGTERM and SIGINT (Ctrl-C), by name, as they come; Ctrl-C alone where there are no Unix
/// signals.
fn termination_signals() -> futures::stream::BoxStream<'static, &'static str> {
    use futures::StreamExt as _;
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &'static str| match signal(kind) {
            Ok(signal) => futures::stream::unfold(signal, move |mut signal| async move {
                signal.recv().await.map(|()| (name, signal))
            })
            .boxed(),
            Err(error) => {
                tracing::warn!("cannot listen for {name}: {error}");
                futures::stream::pending().boxed()
            }
        };
        futures::stream::select(
            listen(SignalKind::terminate(), "SIGTERM"),
            listen(SignalKind::interrupt(), "SIGINT"),
        )
        .boxed()
    }
    #[cfg(not(unix))]
    futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok().map(|()| ("Ctrl-C", ()))
    })
    .boxed()
}
