//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! - A replica takes a Lease held by another only after it has seen the Lease unchanged for a
//!   whole lease duration *on its own clock*: the holder's timestamps are never compared with
//!   the local time, so clock skew cannot make two leaders.
//! - The leader renews every retry period. When no renewal has succeeded for the renew deadline
//!   it gives up: [`LeaderElector::hold`] returns [`Held::Lost`], and the manager stops its
//!   controllers before the Lease can expire for the others, then exits with an error.
//! - On a clean shutdown the leader releases the Lease, so that another replica takes over at
//!   once instead of after the lease duration.
//!
//! Every request has a timeout. Updates carry the Lease's `resourceVersion`, so two replicas
//! that race for the Lease cannot both win.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{Guard, RequestPolicy};

/// client-go's `JitterFactor`: the renew deadline must exceed the retry period times this.
const JITTER_FACTOR: f64 = 1.2;
/// How long releasing the Lease may take on shutdown.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times a release is sent when the Lease changed meanwhile (409 Conflict).
pub const RELEASE_ATTEMPTS: usize = 3;

/// Where and how to elect a leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The Lease's name (`--leader-election-id`).
    pub lease_name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This replica's identity, written as the Lease's holder; unique per replica.
    pub identity: String,
    /// How long a Lease stays valid without renewal (client-go's `LeaseDuration`, 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up (`RenewDeadline`, 10 s).
    pub renew_deadline: Duration,
    /// How often replicas try to acquire or renew (`RetryPeriod`, 2 s).
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// Checks the timings as client-go does: the lease duration exceeds the renew deadline,
    /// which exceeds 1.2 retry periods, and the Lease's name and the identity are set.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.lease_name.is_empty(),
            "the leader election ID is empty"
        );
        anyhow::ensure!(
            !self.identity.is_empty(),
            "the leader election identity is empty"
        );
        anyhow::ensure!(
            self.lease_duration > self.renew_deadline,
            "the leader election lease duration ({:?}) must be longer than the renew deadline ({:?})",
            self.lease_duration,
            self.renew_deadline
        );
        anyhow::ensure!(
            self.renew_deadline.as_secs_f64() > JITTER_FACTOR * self.retry_period.as_secs_f64(),
            "the leader election renew deadline ({:?}) must be longer than {JITTER_FACTOR} times the retry period ({:?})",
            self.renew_deadline,
            self.retry_period
        );
        anyhow::ensure!(
            self.retry_period > Duration::ZERO,
            "the leader election retry period must be positive"
        );
        anyhow::ensure!(
            self.lease_duration.as_secs() >= 1 && self.lease_duration.subsec_nanos() == 0,
            "the leader election lease duration ({:?}) must be a whole number of seconds: the Lease records seconds",
            self.lease_duration
        );
        Ok(())
    }

    /// The instant by which a leader that lost its Lease must have stopped its controllers:
    /// strictly before the Lease can expire for the other replicas, which wait a whole lease
    /// duration after the last renewal they saw.
    pub fn stop_by(&self, last_renewed: Instant) -> Instant {
        let margin = self.lease_duration.saturating_sub(self.renew_deadline) / 5;
        last_renewed + self.lease_duration - margin.max(Duration::from_millis(1))
    }
}

/// This replica's identity: the pod's name (`POD_NAME`) or the host name, and a random suffix,
/// as client-go makes it, so that a restarted pod is a new candidate.
pub fn default_identity() -> String {
    identity(
        std::env::var("POD_NAME").ok(),
        std::env::var("HOSTNAME").ok(),
    )
}

/// The identity of [`default_identity`], from the values of `POD_NAME` and `HOSTNAME`.
fn identity(pod_name: Option<String>, host_name: Option<String>) -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = pod_name
        .filter(|name| !name.is_empty())
        .or_else(|| host_name.filter(|name| !name.is_empty()))
        .unwrap_or_else(|| "manager".to_owned());
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.write_u32(std::process::id());
    format!("{host}_{:016x}", hasher.finish())
}

/// Proof of leadership: when the last successful renewal was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// When the request of the last successful acquisition or renewal was sent. Others see the
    /// renewal no earlier, so the Lease is ours until at least this plus the lease duration.
    pub renewed: Instant,
}

/// Until when the controllers may talk to the API server: a renew deadline after the last
/// successful renewal was sent. A leader that was paused (SIGSTOP, a frozen VM, a long GC of
/// the node) wakes up past it, and its controllers' requests are refused before they leave
/// the process, even where they race the elector that is about to notice the loss.
#[derive(Debug, Clone)]
pub struct Fence {
    /// Open until this instant, unless closed for good.
    until: Arc<Mutex<(Instant, bool)>>,
    /// Woken when the fence is closed early.
    closing: Arc<tokio::sync::Notify>,
}

impl Fence {
    /// A fence open until `until`.
    pub fn new(until: Instant) -> Self {
        Self {
            until: Arc::new(Mutex::new((until, false))),
            closing: Arc::default(),
        }
    }

    /// Keeps the fence open until `until`, if that is later, unless it was closed.
    pub fn extend(&self, until: Instant) {
        let mut current = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        if !current.1 {
            current.0 = current.0.max(until);
        }
    }

    /// Closes the fence now, for good: no later [`Fence::extend`] opens it again.
    pub fn close(&self) {
        *self.until.lock().unwrap_or_else(PoisonError::into_inner) = (Instant::now(), true);
        self.closing.notify_waiters();
    }

    /// Whether requests may still go out.
    pub fn is_open(&self) -> bool {
        Instant::now() < self.until()
    }

    fn until(&self) -> Instant {
        self.until.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Finishes when the fence closes: at its time, unless extended meanwhile, or when
    /// [`Fence::close`] is called.
    pub async fn closed(&self) {
        loop {
            let closing = self.closing.notified();
            let until = self.until();
            if Instant::now() >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = closing => {}
            }
        }
    }

    /// `client`, whose requests are refused, without leaving the process, once the fence
    /// is closed, each retry included, with the default [`RequestPolicy`].
    pub fn client(&self, client: Client) -> Client {
        Guard::new(client, RequestPolicy::default())
            .fence(self.clone())
            .client()
    }
}

/// A request of a controller after its manager's leadership may have ended.
#[derive(Debug, thiserror::Error)]
#[error(
    "this replica may no longer lead: the leader election Lease was not renewed within the renew deadline"
)]
pub struct FenceClosed;

/// How [`LeaderElector::hold`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// `stop` was cancelled while this replica still led.
    Stopped,
    /// No renewal succeeded within the renew deadline, or another replica holds the Lease.
    Lost {
        /// When the last successful renewal was sent.
        last_renewed: Instant,
    },
}

/// The result of one attempt to acquire or renew.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the Lease.
    Leading,
    /// Another replica holds it, and it has not expired on our clock.
    HeldBy(String),
    /// Another replica changed the Lease at the same time (409 Conflict).
    Contended,
}

/// Takes part in leader election for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The Lease as last seen, and when it was first seen so on this replica's clock.
    observed: Option<(Lease, Instant)>,
    /// Kept open a renew deadline past each successful renewal, closed once leadership is lost.
    fence: Option<Fence>,
}

impl LeaderElector {
    /// An elector for `config`'s Lease; check the config with
    /// [`LeaderElectionConfig::validate`] first.
    pub fn new(client: Client, config: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            fence: None,
        }
    }

    /// Keeps `fence` open a renew deadline past every successful renewal of [`Self::hold`],
    /// and closes it when `hold` finds leadership lost.
    pub fn set_fence(&mut self, fence: Fence) {
        self.fence = Some(fence);
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Tries every retry period until this replica holds the Lease; `None` when `stop` is
    /// cancelled first.
    pub async fn acquire(&mut self, stop: &CancellationToken) -> Option<Leadership> {
        let mut waiting_for = None;
        loop {
            let sent = Instant::now();
            let attempt =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Leading)) => return Some(Leadership { renewed: sent }),
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    if waiting_for.as_ref() != Some(&holder) {
                        tracing::info!(lease = %self.lease(), %holder, "the Lease is held by another replica");
                        waiting_for = Some(holder);
                    }
                }
                Ok(Ok(Attempt::Contended)) => {
                    tracing::debug!(lease = %self.lease(), "another replica updated the Lease first")
                }
                Ok(Err(error)) => {
                    tracing::warn!(lease = %self.lease(), "failed to acquire the Lease: {error}")
                }
                Err(_) => tracing::warn!(
                    lease = %self.lease(),
                    "failed to acquire the Lease: no answer within {:?}",
                    self.config.renew_deadline
                ),
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    /// Renews the Lease every retry period until `stop` is cancelled ([`Held::Stopped`]), or
    /// until renewals have failed for the renew deadline or another replica holds the Lease
    /// ([`Held::Lost`]). `leadership` follows every successful renewal.
    pub async fn hold(&mut self, leadership: &mut Leadership, stop: &CancellationToken) -> Held {
        let held = self.renew(leadership, stop).await;
        if let (Held::Lost { .. }, Some(fence)) = (held, &self.fence) {
            fence.close();
        }
        held
    }

    /// [`Self::hold`] without closing the fence.
    async fn renew(&mut self, leadership: &mut Leadership, stop: &CancellationToken) -> Held {
        loop {
            // The next renewal is due a retry period after the last one was sent, not after its
            // answer came: a slow answer must not push the renewals toward the deadline.
            tokio::select! {
                () = stop.cancelled() => return Held::Stopped,
                () = tokio::time::sleep_until(leadership.renewed + self.config.retry_period) => {}
            }
            loop {
                let deadline = leadership.renewed + self.config.renew_deadline;
                let lost = Held::Lost {
                    last_renewed: leadership.renewed,
                };
                let sent = Instant::now();
                if sent >= deadline {
                    return lost;
                }
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(Attempt::Leading)) => {
                        leadership.renewed = sent;
                        if let Some(fence) = &self.fence {
                            fence.extend(sent + self.config.renew_deadline);
                        }
                        break;
                    }
                    Ok(Ok(Attempt::HeldBy(holder))) => {
                        tracing::error!(lease = %self.lease(), %holder, "another replica holds the Lease");
                        return lost;
                    }
                    Ok(Ok(Attempt::Contended)) => {
                        tracing::warn!(lease = %self.lease(), "failed to renew the Lease: it changed meanwhile")
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(lease = %self.lease(), "failed to renew the Lease: {error}")
                    }
                    Err(_) => return lost,
                }
                let retry = (Instant::now() + self.config.retry_period).min(deadline);
                tokio::select! {
                    () = stop.cancelled() => return Held::Stopped,
                    () = tokio::time::sleep_until(retry) => {}
                }
            }
        }
    }

    /// Gives the Lease up, if this replica holds it, so that another replica takes over at
    /// once. Returns whether it did.
    ///
    /// As client-go's `tryRelease`, a release that finds the Lease changed (409 Conflict, as
    /// when the controllers stopped while a renewal was in flight) reads the Lease again: if
    /// this replica still holds it, the release is sent again with the new `resourceVersion`,
    /// up to [`RELEASE_ATTEMPTS`] times; if another replica holds it, nothing is released. All
    /// attempts share one [`RELEASE_TIMEOUT`].
    pub async fn release(&mut self) -> anyhow::Result<bool> {
        tokio::time::timeout(RELEASE_TIMEOUT, self.try_release())
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {RELEASE_TIMEOUT:?}"))?
    }

    /// [`LeaderElector::release`] without its timeout.
    async fn try_release(&mut self) -> anyhow::Result<bool> {
        let Some((mut lease, _)) = self.observed.clone() else {
            return Ok(false);
        };
        let name = self.config.lease_name.clone();
        let mut attempt = 1;
        loop {
            if !self.holds(&lease) {
                return Ok(false);
            }
            let released = self.released(&lease);
            match self
                .api
                .replace(&name, &PostParams::default(), &released)
                .await
            {
                Ok(replaced) => {
                    self.observed = Some((replaced, Instant::now()));
                    return Ok(true);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    if attempt == RELEASE_ATTEMPTS {
                        anyhow::bail!(
                            "the Lease changed during each of {RELEASE_ATTEMPTS} attempts to release it: {status}"
                        );
                    }
                    attempt += 1;
                }
                Err(error) => return Err(error.into()),
            }
            // The Lease changed since this replica last saw it: read it again, to release it
            // only if this replica still holds it.
            tracing::debug!(lease = %self.lease(), "the Lease changed before its release; reading it again");
            match self.api.get_opt(&name).await? {
                Some(current) => {
                    self.observed = Some((current.clone(), Instant::now()));
                    lease = current;
                }
                None => {
                    self.observed = None;
                    return Ok(false);
                }
            }
        }
    }

    /// Whether `lease` names this replica as its holder.
    fn holds(&self, lease: &Lease) -> bool {
        lease
            .spec
            .as_ref()
            .and_then(|spec| spec.holder_identity.as_deref())
            == Some(self.config.identity.as_str())
    }

    /// `lease` without a holder, and with a lease duration of a second, so that the other
    /// replicas take it at their next try.
    fn released(&self, lease: &Lease) -> Lease {
        let now = MicroTime(Timestamp::now());
        let mut released = lease.clone();
        // No `holder_identity`: the default leaves it out.
        released.spec = Some(LeaseSpec {
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: lease.spec.as_ref().and_then(|spec| spec.lease_transitions),
            ..LeaseSpec::default()
        });
        released
    }

    /// One round of client-go's `tryAcquireOrRenew`.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let name = self.config.lease_name.clone();
        let Some(lease) = self.api.get_opt(&name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.record(Timestamp::now(), 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observed = Some((created, Instant::now()));
                    Ok(Attempt::Leading)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Contended),
                Err(error) => Err(error),
            };
        };

        let now = Instant::now();
        let spec = lease.spec.clone().unwrap_or_default();
        let seen_at = match &self.observed {
            Some((seen, at)) if seen.spec == lease.spec => *at,
            _ => now,
        };
        self.observed = Some((lease.clone(), seen_at));

        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.config.identity;
        if !holder.is_empty() && !mine {
            let duration = spec
                .lease_duration_seconds
                .and_then(|seconds| u64::try_from(seconds).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.config.lease_duration);
            if now < seen_at + duration {
                return Ok(Attempt::HeldBy(holder));
            }
        }

        let transitions = spec.lease_transitions.unwrap_or(0);
        let record = if mine {
            let mut record = self.record(Timestamp::now(), transitions);
            record.acquire_time = spec.acquire_time.clone().or(record.acquire_time);
            record
        } else {
            self.record(Timestamp::now(), transitions.saturating_add(1))
        };
        let mut updated = lease;
        updated.spec = Some(record);
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &updated)
            .await
        {
            Ok(replaced) => {
                self.observed = Some((replaced, Instant::now()));
                Ok(Attempt::Leading)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Contended),
            Err(error) => Err(error),
        }
    }

    /// The Lease's spec with this replica as the holder.
    fn record(&self, now: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.lease_name)
    }
}
