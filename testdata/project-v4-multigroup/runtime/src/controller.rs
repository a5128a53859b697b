//! What every controller of a project does besides its reconcile: [`Runner`] checks its API
//! before it starts, marks it ready once its cache has synced, stops it on shutdown, times and
//! counts its reconciles and retries failed objects with a per-object backoff. [`check_api`] and
//! [`report`] are its parts, for a controller that drives `Controller::run` itself.

use std::collections::HashSet;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use tokio::time::Instant;

use crate::client::Watches;
use crate::{Backoff, ControllerContext, Metrics};

/// How long the start-up check waits for the API server.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a controller cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The API server does not serve the resource: its CRD is not installed (404).
    #[error(
        "the API server does not serve {resource}: its CRD is not installed; run `make install`"
    )]
    NotInstalled {
        /// `<plural>.<group>`, the CRD's name.
        resource: String,
    },
    /// The manager's service account may not list the resource (403).
    #[error(
        "the manager may not list {resource} ({message}): deploy its RBAC role again (`make deploy`)"
    )]
    Forbidden {
        /// `<plural>.<group>`.
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// The API server answered with another error.
    #[error("the API server refused to list {resource}: {message}")]
    Refused {
        /// `<plural>.<group>`.
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// The API server could not be reached, or did not answer within [`CHECK_TIMEOUT`].
    #[error("the API server is unreachable: {message}")]
    Unreachable {
        /// What went wrong.
        message: String,
    },
}

/// Checks, before a controller starts, that the API server serves the resource of `api` and
/// lets the manager list it, so that a missing CRD is reported at once and by name instead of
/// as a watch that fails over and over.
pub async fn check_api<K>(api: &Api<K>) -> Result<(), StartError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let group = K::group(&());
    let plural = K::plural(&());
    let resource = if group.is_empty() {
        plural.into_owned()
    } else {
        format!("{plural}.{group}")
    };
    match tokio::time::timeout(
        CHECK_TIMEOUT,
        api.list_metadata(&ListParams::default().limit(1)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(status))) => Err(match status.code {
            404 => StartError::NotInstalled { resource },
            403 => StartError::Forbidden {
                resource,
                message: status.message.clone(),
            },
            _ => StartError::Refused {
                resource,
                message: status.message.clone(),
            },
        }),
        Ok(Err(error)) => Err(StartError::Unreachable {
            message: error.to_string(),
        }),
        Err(_) => Err(StartError::Unreachable {
            message: format!("no answer within {CHECK_TIMEOUT:?}"),
        }),
    }
}

/// Logs one item of a `Controller::run` stream at the level it deserves: watch and queue
/// failures are warnings (the controller retries them with backoff, but nothing changes until
/// they stop), runner failures are errors, and reconcile failures, which `error_policy` has
/// already logged, are debug lines, as are successful reconciles.
///
/// ```text
/// controller
///     .run(reconcile, error_policy, context)
///     .for_each(|result| async move { rsbuilder_runtime::controller::report(NAME, &result) })
///     .await;
/// ```
pub fn report<K, E>(
    controller: &str,
    result: &Result<(ObjectRef<K>, Action), controller::Error<E, watcher::Error>>,
) where
    K: Resource,
    K::DynamicType: Debug,
    E: std::error::Error,
{
    match result {
        Ok((object, _)) => tracing::debug!(controller, %object, "reconciled"),
        Err(controller::Error::ReconcilerFailed(error, object)) => {
            tracing::debug!(controller, %object, "reconcile failed: {error}")
        }
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(controller, %object, "object is gone from the cache")
        }
        Err(controller::Error::QueueError(error)) => {
            tracing::warn!(controller, "watch failed, retrying: {error}")
        }
        Err(error @ controller::Error::RunnerError(_)) => {
            tracing::error!(controller, "controller failed: {error}")
        }
    }
}

/// The first retry of a failed object, by default; each further failure doubles it.
pub const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between retries, by default.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Runs a controller for the manager, around the project's own `reconcile`:
/// - checks that the API server serves its resource and lets the manager list it
///   ([`check_api`]), so that a missing CRD is reported at once and by name;
/// - marks the controller ready once its cache holds the first complete list (`/readyz`), and
///   not ready while it relists or its watch is down;
/// - fails when its cache does not sync within the manager's `--cache-sync-timeout`, at start
///   or after a relist, naming the kind and the last error (an object that does not decode);
/// - runs at most `--max-concurrent-reconciles` reconciles at once ([`Runner::concurrency`]);
/// - stops it when the manager shuts down, letting running reconciles finish;
/// - times each reconcile and counts its outcome (`controller_runtime_reconcile_*`);
/// - retries a failed object after [`BASE_BACKOFF`], doubled for each further consecutive
///   failure up to [`MAX_BACKOFF`], and forgets the count once it reconciles;
/// - logs what the controller reports ([`report`]).
///
/// ```text
/// let context = Arc::new(Context::new(ctx.client.clone()));
/// Runner::new(NAME, ctx.api::<Object>())
///     .configure(|controller| controller.owns(deployments, watcher::Config::default()))
///     .run(ctx, reconcile, context)
///     .await
/// ```
///
/// The runner reflects the watch itself, to see the first complete list: a second task
/// waiting on `Store::wait_until_ready` while the controller waits on it too may never be
/// woken (kube-runtime 5 keeps one waker per store).
pub struct Runner<K: Resource<DynamicType = ()> + Clone + Debug + 'static> {
    name: &'static str,
    api: Api<K>,
    watcher: watcher::Config,
    base: Duration,
    max: Duration,
    concurrency: Option<u16>,
    configure: Option<Configure<K>>,
}

type Configure<K> = Box<dyn FnOnce(Controller<K>) -> Controller<K> + Send>;

impl<K> Runner<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// The runner of the controller called `name` (it labels metrics and logs) of the objects
    /// `api` lists, all of them (`watcher::Config::default().any_semantic()`).
    pub fn new(name: &'static str, api: Api<K>) -> Self {
        Self {
            name,
            api,
            watcher: watcher::Config::default().any_semantic(),
            base: BASE_BACKOFF,
            max: MAX_BACKOFF,
            concurrency: None,
            configure: None,
        }
    }

    /// Runs at most `reconciles` reconciles at once, instead of the manager's
    /// `--max-concurrent-reconciles`; at least one.
    pub fn concurrency(mut self, reconciles: u16) -> Self {
        self.concurrency = Some(reconciles.max(1));
        self
    }

    /// Watches only the objects `config` selects (labels, fields), and caches only those.
    pub fn watcher(mut self, config: watcher::Config) -> Self {
        self.watcher = config;
        self
    }

    /// Retries failed objects after `base`, doubled for every further failure, at most `max`.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base = base;
        self.max = max;
        self
    }

    /// Adds to the controller what else triggers a reconcile: `owns`, `watches`, or its
    /// `with_config`.
    pub fn configure(
        mut self,
        configure: impl FnOnce(Controller<K>) -> Controller<K> + Send + 'static,
    ) -> Self {
        self.configure = Some(Box::new(configure));
        self
    }

    /// Runs the controller until the manager stops it: `reconcile` gets each object that
    /// changed, with `context`, and a failure is retried with the runner's backoff.
    pub async fn run<Ctx, E, Fut>(
        self,
        manager: ControllerContext,
        reconcile: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        context: Arc<Ctx>,
    ) -> anyhow::Result<()>
    where
        Ctx: Send + Sync + 'static,
        E: std::error::Error + Send + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let name = self.name;
        let policy = move |object: Arc<K>, error: &E, state: &State<K, Ctx>| {
            let delay = state.backoff.failed(&object);
            tracing::warn!(
                controller = name,
                object = %ObjectRef::from_obj(&*object),
                ?delay,
                "reconcile failed: {error}"
            );
            Action::requeue(delay)
        };
        self.drive(manager, reconcile, policy, context).await
    }

    /// As [`Runner::run`], with `error_policy` deciding when a failed object is retried
    /// instead of the runner's backoff; every reconcile is still timed and counted.
    pub async fn run_with_policy<Ctx, E, Fut>(
        self,
        manager: ControllerContext,
        reconcile: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + 'static,
        context: Arc<Ctx>,
    ) -> anyhow::Result<()>
    where
        Ctx: Send + Sync + 'static,
        E: std::error::Error + Send + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let policy = move |object: Arc<K>, error: &E, state: &State<K, Ctx>| {
            error_policy(object, error, state.context.clone())
        };
        self.drive(manager, reconcile, policy, context).await
    }

    async fn drive<Ctx, E, Fut>(
        self,
        manager: ControllerContext,
        reconcile: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        policy: impl Fn(Arc<K>, &E, &State<K, Ctx>) -> Action + Send + 'static,
        context: Arc<Ctx>,
    ) -> anyhow::Result<()>
    where
        Ctx: Send + Sync + 'static,
        E: std::error::Error + Send + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        check_api(&self.api).await?;
        let name = self.name;
        let kind = K::kind(&()).into_owned();
        let path = self.api.resource_url().to_owned();
        let watch_key = Watches::key(
            &path,
            self.watcher.label_selector.as_deref(),
            self.watcher.field_selector.as_deref(),
        );
        let (reader, writer) = reflector::store();
        // The watcher's first step is an `Init`, before its first list: the cache's sync
        // timeout counts from there.
        let sync = Arc::new(Mutex::new(CacheSync::default()));
        let pending = Arc::new(Mutex::new(HashSet::new()));
        let (seen, queued) = (sync.clone(), pending.clone());
        let (ready, metrics, gone) = (
            manager.ready.clone(),
            manager.metrics.clone(),
            manager.metrics.clone(),
        );
        let trigger = reflector(writer, watcher::watcher(self.api, self.watcher))
            .inspect(move |event| {
                let mut sync = lock(&seen);
                match event {
                    Ok(watcher::Event::Init) => {
                        sync.listing_since.get_or_insert_with(Instant::now);
                    }
                    Ok(watcher::Event::InitDone) => {
                        sync.listing_since = None;
                        sync.error = None;
                        if !sync.synced {
                            sync.synced = true;
                            ready.ready();
                        }
                    }
                    Ok(_) => sync.error = None,
                    Err(error) => sync.error = Some(error.to_string()),
                }
            })
            .applied_objects()
            .inspect_ok(move |object: &K| {
                let mut pending = lock(&queued);
                // Added once while it waits, as client-go's queue counts.
                if pending.insert(ObjectRef::from_obj(object)) {
                    metrics.queue.add(name);
                    metrics.queue.set_depth(name, pending.len());
                }
            });
        let concurrency = self
            .concurrency
            .unwrap_or(manager.max_concurrent_reconciles);
        let mut controller = Controller::for_stream(trigger, reader)
            .with_config(controller::Config::default().concurrency(concurrency));
        if let Some(configure) = self.configure {
            controller = configure(controller);
        }
        manager.metrics.reconcile.init(self.name);
        manager.metrics.queue.init(self.name, concurrency);
        let state = Arc::new(State {
            name: self.name,
            metrics: manager.metrics.clone(),
            backoff: Backoff::new(self.base, self.max),
            pending: pending.clone(),
            context,
        });
        let reconcile = Arc::new(reconcile);
        let shutdown = manager.shutdown.clone();
        let running = controller
            .graceful_shutdown_on(manager.shutdown.clone().cancelled_owned())
            .run(
                move |object, state: Arc<State<K, Ctx>>| {
                    let reconcile = reconcile.clone();
                    async move { state.reconcile(object, &*reconcile).await }
                },
                move |object, error, state| policy(object, error, &state),
                state,
            )
            .for_each(move |result| {
                if let Err(controller::Error::ObjectNotFound(object)) = &result {
                    let mut key = ObjectRef::<K>::new(&object.name);
                    if let Some(namespace) = &object.namespace {
                        key = key.within(namespace);
                    }
                    let mut pending = lock(&pending);
                    // Deleted before its turn: it leaves the queue without a reconcile.
                    pending.remove(&key);
                    gone.queue.set_depth(name, pending.len());
                }
                async move { report(name, &result) }
            });
        let mut running = std::pin::pin!(running);
        let watching = Watching {
            name,
            kind,
            path,
            watch_key,
            timeout: manager.cache_sync_timeout,
            sync: sync.clone(),
            watches: manager.watches.clone(),
            ready: manager.ready.clone(),
        };
        tokio::select! {
            () = &mut running => return Ok(()),
            () = shutdown.cancelled() => {}
            error = watching.watch() => return Err(error),
        }
        // kube's controller starts no reconcile before its cache synced, and a graceful
        // shutdown before then would wait for that sync for ever (the watch that would bring
        // it is stopped first): with nothing running, stop at once.
        if lock(&sync).synced {
            running.await;
        }
        Ok(())
    }
}

/// What the runner knows of its cache.
#[derive(Debug, Default)]
struct CacheSync {
    /// Whether the first complete list arrived.
    synced: bool,
    /// Since when a list (the first, or a relist) is under way.
    listing_since: Option<Instant>,
    /// The watcher's last error since its last event.
    error: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How often the runner looks at its cache and its watch.
const WATCH_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Keeps a controller's readiness true to its cache and its watch, and gives up on a cache
/// that does not sync in time.
struct Watching {
    name: &'static str,
    kind: String,
    path: String,
    watch_key: String,
    timeout: Duration,
    sync: Arc<Mutex<CacheSync>>,
    watches: Arc<Watches>,
    ready: crate::health::ReadyCheck,
}

impl Watching {
    /// Runs until the cache failed to sync within the timeout, which it returns.
    async fn watch(self) -> anyhow::Error {
        // A blip (a watch reopened, a quick relist) does not take the pod out of its Services,
        // and the webhooks it serves with it: readiness turns off once it lasted this long.
        let grace = NOT_READY_AFTER.min(self.timeout / 2);
        let mut was_ready = false;
        let mut down_since: Option<Instant> = None;
        loop {
            tokio::time::sleep(WATCH_CHECK_INTERVAL).await;
            let (synced, listing_since, error) = {
                let sync = lock(&self.sync);
                (sync.synced, sync.listing_since, sync.error.clone())
            };
            if let Some(since) = listing_since
                && since.elapsed() >= self.timeout
            {
                let what = if synced { "after a relist" } else { "at start" };
                let error = anyhow::anyhow!(
                    "the cache of {} ({}) did not sync within {:?} {what}: {}",
                    self.kind,
                    self.path,
                    self.timeout,
                    error.as_deref().unwrap_or("no complete list arrived")
                );
                tracing::error!(controller = self.name, "{error:#}");
                return error;
            }
            if !synced {
                continue;
            }
            let failing = self.watches.failing(&self.watch_key);
            if listing_since.is_none() && failing.is_none() {
                down_since = None;
                if !was_ready {
                    self.ready.ready();
                    was_ready = true;
                }
                continue;
            }
            let since = *down_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= grace {
                let reason = match &failing {
                    Some(why) => format!("the watch of {} is down: {why}", self.kind),
                    None => format!("the cache of {} is relisting", self.kind),
                };
                self.ready.not_ready(&reason);
                was_ready = false;
            }
        }
    }
}

/// How long a controller's cache may relist, or its watch be down, before `/readyz` fails;
/// at most half the cache-sync timeout.
pub const NOT_READY_AFTER: Duration = Duration::from_secs(10);

/// What the runner keeps around the project's context.
struct State<K: Resource<DynamicType = ()>, Ctx> {
    name: &'static str,
    metrics: Arc<Metrics>,
    backoff: Backoff<K>,
    /// The objects queued and not yet reconciled (`workqueue_depth`).
    pending: Arc<Mutex<HashSet<ObjectRef<K>>>>,
    context: Arc<Ctx>,
}

impl<K: Resource<DynamicType = ()>, Ctx> State<K, Ctx> {
    /// Runs one reconcile of `object`, timed and counted; a success forgets its failures.
    async fn reconcile<E, Fut>(
        &self,
        object: Arc<K>,
        reconcile: &(impl Fn(Arc<K>, Arc<Ctx>) -> Fut + ?Sized),
    ) -> Result<Action, E>
    where
        Fut: Future<Output = Result<Action, E>>,
    {
        let _timer = self.metrics.reconcile.start(self.name);
        let key = ObjectRef::from_obj(&*object);
        {
            let mut pending = lock(&self.pending);
            pending.remove(&key);
            self.metrics.queue.set_depth(self.name, pending.len());
        }
        let result = reconcile(object, self.context.clone()).await;
        match &result {
            Ok(_) => {
                self.metrics.reconcile.success(self.name);
                self.backoff.succeeded(&key);
            }
            Err(_) => {
                self.metrics.reconcile.error(self.name);
                self.metrics.queue.retry(self.name);
            }
        }
        result
    }
}

/// An event recorder that reports as the controller `name`, from the pod `POD_NAME` names.
pub fn recorder(client: Client, name: &str) -> Recorder {
    let reporter = Reporter {
        controller: name.to_owned(),
        instance: std::env::var("POD_NAME").ok(),
    };
    Recorder::new(client, reporter)
}

/// Publishes a `Normal` event about `object` with `recorder`: `reason` and `action` say what
/// happened to programs (`Reconciled`, `Reconcile`), `note` to people.
pub async fn publish_normal<K>(
    recorder: &Recorder,
    object: &K,
    reason: &str,
    action: &str,
    note: impl Into<String>,
) -> kube::Result<()>
where
    K: Resource<DynamicType = ()>,
{
    let event = Event {
        type_: EventType::Normal,
        reason: reason.to_owned(),
        note: Some(note.into()),
        action: action.to_owned(),
        secondary: None,
    };
    recorder.publish(&event, &object.object_ref(&())).await
}

/// Writes the status fields in `status` of the object `name` with server-side apply, as the
/// field manager `field_manager` (forcing conflicts): the manager then owns exactly these
/// fields, and whatever others set stays.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    field_manager: &str,
    status: serde_json::Value,
) -> kube::Result<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(&patch),
    )
    .await
}
