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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::tests::{PATH, failure, grant, next, respond};
    use http::{Method, StatusCode};
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::time::Instant;

    fn manager_with(flags: &[&str]) -> (Manager, crate::leader::tests::ApiServer) {
        let (service, server) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let flags: Vec<&str> = std::iter::once("--health-probe-bind-address=0")
            .chain(flags.iter().copied())
            .collect();
        let args = crate::args::tests::parse(&flags);
        let manager = Manager::with_client(args, Client::new(service, "default"))
            .leader_election_id("my-operator")
            .identity("me");
        (manager, server)
    }

    fn manager() -> Manager {
        manager_with(&[]).0
    }

    #[tokio::test(start_paused = true)]
    async fn the_controllers_requests_time_out_at_the_flags_timeout() {
        let (manager, mut server) = manager_with(&["--api-request-timeout=2s"]);
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(manager.guard().client(), "default");
        let started = Instant::now();
        let getting = tokio::spawn(async move { api.get("cm").await });
        let _unanswered = server.next_request().await.unwrap();
        let error = crate::testing::within(getting).await.unwrap().unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(2), "{error}");
        assert!(error.to_string().contains("within 2s"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_signal_shuts_down_and_the_second_exits_with_status_1() {
        let (signals, received) = futures::channel::mpsc::unbounded();
        let token = CancellationToken::new();
        let handling = {
            let token = token.clone();
            tokio::spawn(async move { on_termination_signals(received, &token).await })
        };
        tokio::task::yield_now().await;
        assert!(!token.is_cancelled(), "nothing before a signal");

        signals.unbounded_send("SIGTERM").unwrap();
        crate::testing::within(token.cancelled()).await;
        tokio::task::yield_now().await;
        assert!(!handling.is_finished(), "a first signal does not exit");

        signals.unbounded_send("SIGINT").unwrap();
        assert_eq!(
            crate::testing::within(handling).await.unwrap(),
            Some(FORCED_EXIT_STATUS)
        );
        assert_eq!(FORCED_EXIT_STATUS, 1, "controller-runtime's status");
    }

    #[tokio::test(start_paused = true)]
    async fn signals_that_end_ask_for_no_exit() {
        let token = CancellationToken::new();
        let once = futures::stream::iter(["SIGTERM"]);
        assert_eq!(
            crate::testing::within(on_termination_signals(once, &token)).await,
            None
        );
        assert!(token.is_cancelled());
    }

    /// SIGTERM and SIGINT sent to this process come out of `termination_signals`; once it
    /// listens, they no longer kill the process.
    #[cfg(unix)]
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
        tokio::time::timeout(Duration::from_secs(5), started)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(health.readiness().0, StatusCode::OK);
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
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
        let error = tokio::time::timeout(
            Duration::from_secs(5),
            manager.run_until(controllers, CancellationToken::new()),
        )
        .await
        .unwrap()
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
        let error = tokio::time::timeout(
            Duration::from_secs(5),
            manager().run_until(controllers, CancellationToken::new()),
        )
        .await
        .unwrap()
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
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_namespaced_project_needs_a_namespace() {
        let error = manager()
            .require_watch_namespace()
            .run_until(Vec::new(), CancellationToken::new())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("--watch-namespace"), "{error}");
        let (manager, _) = manager_with(&["--watch-namespace=default"]);
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        manager
            .require_watch_namespace()
            .run_until(Vec::new(), shutdown)
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn bad_leader_election_timings_are_refused_before_anything_starts() {
        let (manager, _) = manager_with(&["--leader-elect", "--leader-elect-renew-deadline=20s"]);
        // Bounded, on paused time: a manager that skipped the check would wait for the Lease
        // for ever, and fails the test at once instead.
        let error = crate::testing::within(manager.run_until(Vec::new(), CancellationToken::new()))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the leader election lease duration (15s) must be longer than the renew deadline (20s)"
        );
    }

    /// Answers further API requests with a 500, as an API server that fails renewals; at most
    /// 100 of them, so that a leader that retried without pause fails the test, not hangs it.
    fn fail_every_request(
        mut server: crate::leader::tests::ApiServer,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            for _ in 0..100 {
                match tokio::time::timeout(Duration::from_secs(60), server.next_request()).await {
                    Ok(Some((_, send))) => respond(send, 500, &failure(500)),
                    _ => return,
                }
            }
            panic!("the leader sent more than 100 requests: it retries without pause");
        })
    }

    /// A controller that records that it ran and that it was stopped.
    fn watched(started: Arc<AtomicBool>, stopped: Arc<AtomicBool>) -> Registration {
        Registration::new("appotp", move |ctx: ControllerContext| async move {
            started.store(true, Ordering::SeqCst);
            ctx.shutdown.cancelled().await;
            stopped.store(true, Ordering::SeqCst);
            Ok(())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_stops_its_controllers_and_fails() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let health = manager.health();
        let metrics = manager.metrics();
        let (started, stopped) = (Arc::default(), Arc::default());
        let run = tokio::spawn(manager.run_until(
            vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
            CancellationToken::new(),
        ));
        grant(&mut server).await;
        let acquired = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(
            started.load(Ordering::SeqCst),
            "the leader runs its controllers"
        );
        assert!(metrics.encode().contains("leader_election_master_status 1"));

        // The API server fails every renewal from now on.
        let mut failing = fail_every_request(server);
        // The stub fails only when the leader retried without pause.
        let error = tokio::select! {
            run = tokio::time::timeout(Duration::from_secs(60), run) => {
                run.expect("the manager stops").unwrap().unwrap_err()
            }
            Err(stub) = &mut failing => panic!("the API server stub failed: {stub:?}"),
        };
        assert_eq!(
            error.to_string(),
            "lost the leader election Lease operators/my-operator: it was not renewed within 10s"
        );
        assert!(
            stopped.load(Ordering::SeqCst),
            "the controllers were stopped"
        );
        assert_eq!(
            acquired.elapsed(),
            Duration::from_secs(10),
            "at the renew deadline"
        );
        assert_eq!(health.liveness().0, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(metrics.encode().contains("leader_election_master_status 0"));
        failing.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_controller_that_ignores_the_stop_is_abandoned_before_the_lease_expires() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
            std::future::pending::<()>().await;
            Ok(())
        });
        let run = tokio::spawn(manager.run_until(vec![stubborn], CancellationToken::new()));
        grant(&mut server).await;
        let acquired = Instant::now();
        let mut failing = fail_every_request(server);
        // The stub fails only when the leader retried without pause.
        let error = tokio::select! {
            run = tokio::time::timeout(Duration::from_secs(60), run) => {
                run.expect("the manager stops").unwrap().unwrap_err()
            }
            Err(stub) = &mut failing => panic!("the API server stub failed: {stub:?}"),
        };
        assert_eq!(
            error.to_string(),
            "lost the leader election Lease operators/my-operator: it was not renewed within 10s"
        );
        let stopped_after = acquired.elapsed();
        assert_eq!(stopped_after, Duration::from_secs(14));
        assert!(
            stopped_after < Duration::from_secs(15),
            "before the Lease expires for others"
        );
        failing.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_releases_the_lease_on_shutdown() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let shutdown = CancellationToken::new();
        let (started, stopped) = (Arc::default(), Arc::default());
        let run = tokio::spawn(manager.run_until(
            vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
            shutdown.clone(),
        ));
        grant(&mut server).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        shutdown.cancel();
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert!(
            stopped.load(Ordering::SeqCst),
            "controllers stop before the release"
        );
        assert_eq!(body["spec"].get("holderIdentity"), None);
        respond(send, 200, &body);
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_leaders_controllers_may_talk_to_the_api_server_at_once() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let reading = Registration::new("reader", |ctx: ControllerContext| async move {
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                kube::Api::namespaced(ctx.client.clone(), "default");
            // The answer does not matter; the request must leave the process.
            let _ = api.get("cm").await;
            ctx.shutdown.cancelled().await;
            Ok(())
        });
        let run = tokio::spawn(manager.run_until(vec![reading], CancellationToken::new()));
        grant(&mut server).await;
        let (request, _pending) =
            tokio::time::timeout(Duration::from_secs(1), server.next_request())
                .await
                .expect("a request within 1 s of the grant, before the first renewal")
                .unwrap();
        assert_eq!(
            request.uri().path(),
            "/api/v1/namespaces/default/configmaps/cm",
            "the fence is open a renew deadline past the acquiring renewal"
        );
        run.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn controllers_that_do_not_stop_are_abandoned_after_the_grace_period() {
        let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
            std::future::pending::<()>().await;
            Ok(())
        });
        let polite = Registration::new("polite", |ctx: ControllerContext| async move {
            ctx.shutdown.cancelled().await;
            Ok(())
        });
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager().run_until(vec![stubborn, polite], shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let stopping = Instant::now();
        shutdown.cancel();
        let error = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "controller stubborn did not stop within 30s of shutdown"
        );
        assert_eq!(stopping.elapsed(), GRACEFUL_SHUTDOWN_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_renews_its_lease_while_its_controllers_finish() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let shutdown = CancellationToken::new();
        // A controller that needs 5 s to finish its work after shutdown begins.
        let slow = Registration::new("slow", |ctx: ControllerContext| async move {
            ctx.shutdown.cancelled().await;
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        });
        let run = tokio::spawn(manager.run_until(vec![slow], shutdown.clone()));
        grant(&mut server).await;
        let acquired = Instant::now();
        tokio::time::sleep(Duration::from_millis(1)).await;
        shutdown.cancel();
        // Renewals go on every 2 s until the controller is done; then the Lease is released.
        let mut renewals = 0;
        loop {
            let (request, send) =
                tokio::time::timeout(Duration::from_secs(60), server.next_request())
                    .await
                    .unwrap()
                    .unwrap();
            let method = request.method().clone();
            let body: serde_json::Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap())
                    .unwrap_or_default();
            if method == Method::GET {
                renewals += 1;
                assert!(
                    renewals <= 2,
                    "more than two renewals in 5 s: the leader renews without pause"
                );
                respond(
                    send,
                    200,
                    &crate::leader::tests::lease("me", "2026-01-01T00:00:00.000000Z", 0, "2"),
                );
            } else if body["spec"].get("holderIdentity").is_some() {
                respond(send, 200, &body);
            } else {
                assert!(
                    acquired.elapsed() >= Duration::from_secs(5),
                    "released after the controller"
                );
                respond(send, 200, &body);
                break;
            }
        }
        assert_eq!(renewals, 2, "renewed at 2 s and 4 s");
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// A port that was free a moment ago.
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[tokio::test]
    async fn a_follower_serves_webhooks_over_https() {
        use crate::webhook::tests::{https_post, webhooks};

        let dir = crate::tls::tests::tempdir();
        let cert = crate::tls::tests::write_certificate(dir.path(), "localhost");
        let port = free_port();
        let port_flag = format!("--webhook-port={port}");
        let cert_flag = format!("--webhook-cert-path={}", dir.path().display());
        let (manager, mut server) = manager_with(&[
            "--leader-elect",
            "--leader-election-namespace=operators",
            &port_flag,
            &cert_flag,
        ]);
        let manager = manager.webhooks(webhooks());
        let health = manager.health();
        let shutdown = CancellationToken::new();
        let (started, stopped) = (Arc::default(), Arc::default());
        let run = tokio::spawn(manager.run_until(
            vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
            shutdown.clone(),
        ));
        // Another replica leads.
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(
            send,
            200,
            &crate::leader::tests::lease("other", "2099-01-01T00:00:00.000000Z", 0, "1"),
        );
        assert!(
            health.readiness().1.contains("[+]webhook ok"),
            "{}",
            health.readiness().1
        );

        let body = serde_json::to_vec(&crate::webhook::review::create(
            &crate::webhook::tests::Application::new(
                "web",
                crate::webhook::tests::ApplicationSpec {
                    replicas: 0,
                    image: "nginx".into(),
                },
            ),
        ))
        .unwrap();
        let answer = https_post(port, &cert, false, "/mutate", body)
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        let review: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(review["response"]["allowed"], true);
        assert!(
            !started.load(Ordering::SeqCst),
            "a follower runs no controller"
        );

        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// The status of `GET path` over plain HTTP/2 with prior knowledge (h2c), or the error of
    /// a server that does not speak it.
    async fn h2c_get(port: u16, path: &str) -> Result<StatusCode, String> {
        use http_body_util::Empty;
        use hyper_util::rt::{TokioExecutor, TokioIo};
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| e.to_string())?;
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let request = http::Request::get(format!("http://localhost{path}"))
                .body(Empty::<axum::body::Bytes>::new())
                .unwrap();
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            Ok(response.status())
        };
        tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .map_err(|_| "no answer within 5 s".to_owned())?
    }

    /// A manager without leader election whose probes, metrics (over HTTPS) and webhooks
    /// listen on ports of their own, with `flags` added; the ports and the certificate.
    fn serving_manager(flags: &[&str]) -> (Manager, [u16; 3], Vec<u8>, crate::tls::tests::TempDir) {
        let dir = crate::tls::tests::tempdir();
        let cert = crate::tls::tests::write_certificate(dir.path(), "localhost");
        let ports = [free_port(), free_port(), free_port()];
        let mut owned = vec![
            format!("--health-probe-bind-address=127.0.0.1:{}", ports[0]),
            format!("--metrics-bind-address=127.0.0.1:{}", ports[1]),
            format!("--metrics-cert-path={}", dir.path().display()),
            format!("--webhook-port={}", ports[2]),
            format!("--webhook-cert-path={}", dir.path().display()),
        ];
        owned.extend(flags.iter().map(|flag| flag.to_string()));
        let flags: Vec<&str> = owned.iter().map(String::as_str).collect();
        let (service, _) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let args = crate::args::tests::parse(&flags);
        let manager = Manager::with_client(args, Client::new(service, "default"))
            .identity("me")
            .webhooks(crate::webhook::tests::webhooks());
        (manager, ports, cert, dir)
    }

    /// Waits until every one of `ports` takes connections.
    async fn wait_listening(ports: &[u16]) {
        crate::testing::within(async {
            for port in ports {
                while tokio::net::TcpStream::connect(("127.0.0.1", *port))
                    .await
                    .is_err()
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        })
        .await;
    }

    #[tokio::test]
    async fn with_http2_enabled_every_endpoint_speaks_it_and_metrics_are_https() {
        let (manager, [probe, metrics, webhook], cert, _dir) =
            serving_manager(&["--enable-http2=true"]);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
        wait_listening(&[probe, metrics, webhook]).await;
        assert_eq!(h2c_get(probe, "/healthz").await, Ok(StatusCode::OK));
        // Unauthenticated, over HTTP/2 and TLS: a 401 proves both.
        let answer =
            crate::webhook::tests::https_post(metrics, &cert, true, "/metrics", Vec::new())
                .await
                .expect("metrics over HTTPS and HTTP/2");
        assert_ne!(answer.status, StatusCode::OK, "no metrics without a token");
        let answer = crate::webhook::tests::https_post(webhook, &cert, true, "/mutate", Vec::new())
            .await
            .expect("webhooks over HTTP/2");
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "an empty review");
        shutdown.cancel();
        crate::testing::within(run).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn plain_http_metrics_speak_http2_only_when_it_is_enabled() {
        for (flag, speaks) in [
            ("--enable-http2=true", true),
            ("--enable-http2=false", false),
        ] {
            let (manager, [_, metrics, _], _, _dir) =
                serving_manager(&[flag, "--metrics-secure=false"]);
            let shutdown = CancellationToken::new();
            let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
            wait_listening(&[metrics]).await;
            let answer = h2c_get(metrics, "/metrics").await;
            if speaks {
                assert_eq!(answer, Ok(StatusCode::OK), "{flag}");
            } else {
                assert!(answer.is_err(), "{flag}: {answer:?}");
            }
            shutdown.cancel();
            crate::testing::within(run).await.unwrap().unwrap();
        }
    }

    #[tokio::test]
    async fn without_http2_no_endpoint_speaks_it() {
        let (manager, [probe, metrics, webhook], cert, _dir) = serving_manager(&[]);
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
        wait_listening(&[probe, metrics, webhook]).await;
        assert!(h2c_get(probe, "/healthz").await.is_err());
        for port in [metrics, webhook] {
            let http2 =
                crate::webhook::tests::https_post(port, &cert, true, "/mutate", Vec::new()).await;
            assert!(
                http2.is_err(),
                "port {port} spoke HTTP/2: {:?}",
                http2.map(|a| a.status)
            );
            let http1 =
                crate::webhook::tests::https_post(port, &cert, false, "/mutate", Vec::new()).await;
            assert!(http1.is_ok(), "port {port}: {:?}", http1.err());
        }
        shutdown.cancel();
        crate::testing::within(run).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn controllers_get_the_managers_own_metrics_and_their_name() {
        let manager = manager();
        let metrics = manager.metrics();
        let seen: Arc<std::sync::Mutex<Option<Arc<Metrics>>>> = Arc::default();
        let registration = {
            let seen = seen.clone();
            Registration::new("appotp", move |ctx: ControllerContext| async move {
                *seen.lock().unwrap() = Some(ctx.metrics.clone());
                ctx.shutdown.cancelled().await;
                Ok(())
            })
        };
        assert_eq!(registration.name(), "appotp");
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(vec![registration], shutdown.clone()));
        crate::testing::within(async {
            while seen.lock().unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let given = seen.lock().unwrap().clone().unwrap();
        assert!(
            Arc::ptr_eq(&metrics, &given),
            "Manager::metrics is what the controllers count in"
        );
        shutdown.cancel();
        crate::testing::within(run).await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn self_managed_certificates_are_set_up_before_webhooks_are_served() {
        let dir = crate::tls::tests::tempdir();
        let port_flag = format!("--webhook-port={}", free_port());
        let cert_flag = format!("--webhook-cert-path={}", dir.path().display());
        let (manager, mut server) = manager_with(&[
            &port_flag,
            &cert_flag,
            "--webhook-cert-secret=webhook-server-cert",
            "--webhook-service-name=my-operator-webhook-service",
            "--webhook-service-namespace=operators",
        ]);
        let health = manager.health();
        let run = tokio::spawn(
            manager
                .webhooks(crate::webhook::tests::webhooks())
                .run_until(Vec::new(), CancellationToken::new()),
        );
        let (request, _pending) =
            tokio::time::timeout(Duration::from_secs(5), server.next_request())
                .await
                .expect("a request within 5 s")
                .unwrap();
        assert_eq!(request.method(), Method::GET);
        assert_eq!(
            request.uri().path(),
            "/api/v1/namespaces/operators/secrets/webhook-server-cert"
        );
        assert!(
            !health.readiness().1.contains("[+]webhook ok"),
            "no webhook is served before its certificate"
        );
        run.abort();
    }

    /// Run as a process of its own by `sigterm_stops_a_running_manager_cleanly`: a manager
    /// whose controller says when it starts and stops.
    #[test]
    #[ignore = "a child process of sigterm_stops_a_running_manager_cleanly"]
    fn manager_process() {
        if std::env::var_os("RSBUILDER_MANAGER_PROCESS").is_none() {
            return;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let controller = Registration::new("appotp", |ctx: ControllerContext| async move {
                println!("controller started");
                ctx.shutdown.cancelled().await;
                println!("controller stopped");
                Ok(())
            });
            manager().run(vec![controller]).await.unwrap();
            println!("manager returned");
        });
    }

    #[test]
    fn sigterm_stops_a_running_manager_cleanly() {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "manager::tests::manager_process", "--ignored"])
            .args(["--nocapture", "--test-threads=1"])
            .env("RSBUILDER_MANAGER_PROCESS", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (lines, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = lines.send(line);
            }
        });
        let wait_for = |wanted: &str| loop {
            match received.recv_timeout(Duration::from_secs(10)) {
                // libtest writes `test manager::tests::manager_process ... ` before the first.
                Ok(line) if line.ends_with(wanted) => return,
                Ok(_) => {}
                Err(error) => panic!("no `{wanted}` from the manager: {error}"),
            }
        };
        wait_for("controller started");
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        wait_for("controller stopped");
        wait_for("manager returned");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("the manager did not exit within 10 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status}");
    }

    #[tokio::test]
    async fn webhooks_without_a_certificate_stop_the_manager_with_a_way_out() {
        let port_flag = format!("--webhook-port={}", free_port());
        let (manager, _) = manager_with(&[&port_flag, "--webhook-cert-path=/nonexistent"]);
        let error = tokio::time::timeout(
            Duration::from_secs(5),
            manager
                .webhooks(crate::webhook::tests::webhooks())
                .run_until(Vec::new(), CancellationToken::new()),
        )
        .await
        .unwrap()
        .unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with("the webhook server has no certificate: pass --webhook-cert-path, or run without webhooks with ENABLE_WEBHOOKS=false: failed to read certificate `/nonexistent/tls.crt`"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn disabled_webhooks_are_not_served() {
        let port = free_port();
        let port_flag = format!("--webhook-port={port}");
        let (manager, _) = manager_with(&[
            &port_flag,
            "--webhook-cert-path=/nonexistent",
            "--enable-webhooks=false",
        ]);
        let manager = manager.webhooks(crate::webhook::tests::webhooks());
        let health = manager.health();
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(Vec::new(), shutdown.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!run.is_finished());
        assert!(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
        );
        assert!(!health.readiness().1.contains("webhook"));
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_runs_no_controller_and_stops_on_shutdown() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let shutdown = CancellationToken::new();
        let (started, stopped) = (Arc::default(), Arc::default());
        let run = tokio::spawn(manager.run_until(
            vec![watched(Arc::clone(&started), Arc::clone(&stopped))],
            shutdown.clone(),
        ));
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(
            send,
            200,
            &crate::leader::tests::lease("other", "2026-01-01T00:00:00.000000Z", 0, "1"),
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(!started.load(Ordering::SeqCst));
    }

    async fn http1_get(port: u16, path: &str) -> Result<StatusCode, String> {
        use http_body_util::Empty;
        use hyper_util::rt::TokioIo;
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| e.to_string())?;
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            let request = http::Request::get(format!("http://localhost{path}"))
                .body(Empty::<axum::body::Bytes>::new())
                .unwrap();
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            Ok(response.status())
        };
        tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .map_err(|_| "no answer within 5 s".to_owned())?
    }

    #[tokio::test]
    async fn the_probes_answer_until_the_controllers_have_stopped() {
        let port = free_port();
        let probes = format!("--health-probe-bind-address=127.0.0.1:{port}");
        let (service, _server) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let args = crate::args::tests::parse(&[&probes]);
        let manager = Manager::with_client(args, Client::new(service, "default")).identity("me");
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let slow = Registration::new("slow", |ctx: ControllerContext| async move {
            ctx.ready.ready();
            ctx.shutdown.cancelled().await;
            // A reconcile that takes a while to finish after SIGTERM.
            let _ = released.await;
            Ok(())
        });
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(vec![slow], shutdown.clone()));
        wait_listening(&[port]).await;
        shutdown.cancel();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            http1_get(port, "/healthz").await,
            Ok(StatusCode::OK),
            "liveness during the grace"
        );
        assert_eq!(
            http1_get(port, "/readyz").await,
            Ok(StatusCode::OK),
            "readiness during the grace"
        );
        release.send(()).unwrap();
        crate::testing::within(run).await.unwrap().unwrap();
        assert!(
            http1_get(port, "/healthz").await.is_err(),
            "the probes stop last"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_controllers_were_abandoned_keeps_the_lease_to_expire() {
        let (manager, mut server) =
            manager_with(&["--leader-elect", "--leader-election-namespace=operators"]);
        let stubborn = Registration::new("stubborn", |_ctx: ControllerContext| async {
            std::future::pending::<()>().await;
            Ok(())
        });
        let shutdown = CancellationToken::new();
        let run = tokio::spawn(manager.run_until(vec![stubborn], shutdown.clone()));
        grant(&mut server).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        shutdown.cancel();
        // Renewals go on during the grace period; no release follows it.
        let answering = tokio::spawn(async move {
            while let Ok(Some((request, send))) =
                tokio::time::timeout(Duration::from_secs(3600), server.next_request()).await
            {
                let method = request.method().clone();
                let body = request.into_body().collect_bytes().await.unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                if method == Method::GET {
                    let lease =
                        crate::leader::tests::lease("me", "2026-01-01T00:00:00.000000Z", 0, "2");
                    respond(send, 200, &lease);
                    continue;
                }
                assert_eq!(
                    body["spec"]["holderIdentity"], "me",
                    "the Lease was released while a controller may still write"
                );
                respond(send, 200, &body);
            }
        });
        let error = crate::testing::within(run).await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "controller stubborn did not stop within 30s of shutdown"
        );
        answering.abort();
        if let Err(error) = answering.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
    }
}
