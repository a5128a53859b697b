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

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// client-go's `JitterFactor`: the renew deadline must exceed the retry period times this.
const JITTER_FACTOR: f64 = 1.2;
/// How long releasing the Lease may take on shutdown.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

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
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|name| !name.is_empty())
        })
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
}

impl LeaderElector {
    /// An elector for `config`'s Lease; check the config with
    /// [`LeaderElectionConfig::validate`] first.
    pub fn new(client: Client, config: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
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

    /// Gives the Lease up, if this replica holds it as last seen, so that another replica
    /// takes over at once. Returns whether it did.
    pub async fn release(&mut self) -> anyhow::Result<bool> {
        let Some((lease, _)) = &self.observed else {
            return Ok(false);
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        let now = MicroTime(Timestamp::now());
        let mut released = lease.clone();
        released.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        let name = self.config.lease_name.clone();
        let replaced = tokio::time::timeout(
            RELEASE_TIMEOUT,
            self.api.replace(&name, &PostParams::default(), &released),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {RELEASE_TIMEOUT:?}"))??;
        self.observed = Some((replaced, Instant::now()));
        Ok(true)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use http::{Method, Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};
    use tower_test::mock;

    pub(crate) type ApiServer = mock::Handle<Request<Body>, Response<Body>>;

    pub(crate) const PATH: &str =
        "/apis/coordination.k8s.io/v1/namespaces/operators/leases/my-operator";
    const COLLECTION: &str = "/apis/coordination.k8s.io/v1/namespaces/operators/leases";

    pub(crate) fn config() -> LeaderElectionConfig {
        LeaderElectionConfig {
            lease_name: "my-operator".into(),
            namespace: "operators".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    pub(crate) fn elector() -> (LeaderElector, ApiServer) {
        let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
        (
            LeaderElector::new(Client::new(service, "default"), config()),
            server,
        )
    }

    /// Takes the next request within a minute of (paused) time and checks its method and path;
    /// returns its body and the handle to answer it.
    pub(crate) async fn next(
        server: &mut ApiServer,
        method: Method,
        path: &str,
    ) -> (Value, mock::SendResponse<Response<Body>>) {
        let (request, send) = tokio::time::timeout(Duration::from_secs(60), server.next_request())
            .await
            .unwrap_or_else(|_| panic!("no {method} {path} request within 60 s"))
            .expect("the client is connected");
        assert_eq!((request.method(), request.uri().path()), (&method, path));
        let bytes = request.into_body().collect_bytes().await.unwrap();
        (serde_json::from_slice(&bytes).unwrap_or(Value::Null), send)
    }

    pub(crate) fn respond(send: mock::SendResponse<Response<Body>>, code: u16, body: &Value) {
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(body).unwrap()))
                .unwrap(),
        );
    }

    fn not_found() -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "leases.coordination.k8s.io \"my-operator\" not found", "reason": "NotFound", "code": 404})
    }

    pub(crate) fn failure(code: u16) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "etcdserver: request timed out", "reason": "InternalError", "code": code})
    }

    /// A Lease as the API server returns it.
    pub(crate) fn lease(holder: &str, renewed: &str, transitions: i32, version: &str) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "my-operator", "namespace": "operators", "resourceVersion": version},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": renewed,
                     "leaseTransitions": transitions}
        })
    }

    /// Answers a GET (404) and the create that follows: this replica leads.
    pub(crate) async fn grant(server: &mut ApiServer) -> Value {
        let (_, send) = next(server, Method::GET, PATH).await;
        respond(send, 404, &not_found());
        let (body, send) = next(server, Method::POST, COLLECTION).await;
        let mut created = body.clone();
        created["metadata"]["resourceVersion"] = json!("1");
        respond(send, 201, &created);
        body
    }

    /// The parts of a Lease spec that do not depend on the time.
    fn timeless(spec: &Value) -> Value {
        let mut spec = spec.clone();
        for time in ["acquireTime", "renewTime"] {
            assert!(
                spec[time].as_str().is_some_and(|t| t.ends_with('Z')),
                "{time} in {spec}"
            );
            spec.as_object_mut().unwrap().remove(time);
        }
        spec
    }

    #[test]
    fn timings_are_checked_as_client_go_checks_them() {
        assert!(config().validate().is_ok());
        let mut bad = config();
        bad.renew_deadline = Duration::from_secs(15);
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "the leader election lease duration (15s) must be longer than the renew deadline (15s)"
        );
        let mut bad = config();
        bad.retry_period = Duration::from_secs(9);
        assert!(bad.validate().is_err());
        let mut bad = config();
        bad.lease_duration = Duration::from_millis(10_500);
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "the leader election lease duration (10.5s) must be a whole number of seconds: the Lease records seconds"
        );
        // A lost leader stops a second before the Lease can expire for the others.
        let now = Instant::now();
        assert_eq!(config().stop_by(now), now + Duration::from_secs(14));
    }

    #[test]
    fn identities_are_unique_per_process_start() {
        assert_ne!(default_identity(), default_identity());
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_lease_is_created_and_held() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let acquiring = tokio::spawn(async move {
            let leadership = elector.acquire(&CancellationToken::new()).await;
            (elector, leadership)
        });
        let created = grant(&mut server).await;
        assert_eq!(
            created["metadata"],
            json!({"name": "my-operator", "namespace": "operators"})
        );
        assert_eq!(
            timeless(&created["spec"]),
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0})
        );
        let (_, leadership) = crate::testing::within(acquiring).await.unwrap();
        assert!(leadership.is_some());
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn the_leader_renews_every_retry_period() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let holding = {
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut leadership = elector.acquire(&stop).await.unwrap();
                let start = leadership.renewed;
                let held = elector.hold(&mut leadership, &stop).await;
                (held, leadership.renewed - start)
            })
        };
        grant(&mut server).await;
        let started = Instant::now();
        for (round, version) in ["1", "2", "3"].into_iter().enumerate() {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            assert_eq!(
                started.elapsed(),
                Duration::from_secs(2 * (round as u64 + 1))
            );
            respond(
                send,
                200,
                &lease("me", "2026-01-01T00:00:00.000000Z", 0, version),
            );
            let (body, send) = next(&mut server, Method::PUT, PATH).await;
            assert_eq!(
                body["metadata"]["resourceVersion"], version,
                "optimistic concurrency"
            );
            assert_eq!(
                timeless(&body["spec"]),
                json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0})
            );
            assert_eq!(
                body["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z",
                "kept on renewal"
            );
            let mut renewed = body.clone();
            renewed["metadata"]["resourceVersion"] = json!(format!("{version}0"));
            respond(send, 200, &renewed);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
        let (held, renewed_after) = tokio::time::timeout(Duration::from_secs(5), holding)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(held, Held::Stopped);
        assert_eq!(renewed_after, Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_within_the_deadline_loses() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let holding = tokio::spawn(async move {
            let mut leadership = elector.acquire(&stop).await.unwrap();
            let acquired = leadership.renewed;
            (elector.hold(&mut leadership, &stop).await, acquired)
        });
        grant(&mut server).await;
        // Every renewal fails: the API server answers 500, and the last one not at all.
        let mut failures = 0;
        loop {
            let request =
                tokio::time::timeout(Duration::from_secs(60), server.next_request()).await;
            let Ok(Some((request, send))) = request else {
                break;
            };
            assert_eq!(request.uri().path(), PATH);
            failures += 1;
            if failures < 4 {
                respond(send, 500, &failure(500));
            } else {
                // Hang, so that the deadline cuts the request short.
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    drop(send);
                });
            }
            if holding.is_finished() {
                break;
            }
        }
        let (held, acquired) = crate::testing::within(holding).await.unwrap();
        assert_eq!(
            held,
            Held::Lost {
                last_renewed: acquired
            }
        );
        assert_eq!(
            Instant::now() - acquired,
            Duration::from_secs(10),
            "gave up exactly at the renew deadline"
        );
        assert_eq!(failures, 4, "retried every retry period until the deadline");
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_are_due_from_when_the_last_one_was_sent() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let holding = tokio::spawn(async move {
            let mut leadership = elector.acquire(&stop).await.unwrap();
            let acquired = leadership.renewed;
            (elector.hold(&mut leadership, &stop).await, acquired)
        });
        grant(&mut server).await;
        let started = Instant::now();
        // The first renewal is answered after 7 s, within the deadline.
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        tokio::time::sleep(Duration::from_secs(7)).await;
        respond(
            send,
            200,
            &lease("me", "2026-01-01T00:00:00.000000Z", 0, "1"),
        );
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        respond(send, 200, &body);
        // The next one was due at 2 + 2 s, which has passed: it is sent at once, and fails.
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(started.elapsed(), Duration::from_secs(9));
        respond(send, 500, &failure(500));
        let mut failures = 1;
        while let Ok(Some((_, send))) =
            tokio::time::timeout(Duration::from_secs(60), server.next_request()).await
        {
            failures += 1;
            respond(send, 500, &failure(500));
        }
        let (held, acquired) = crate::testing::within(holding).await.unwrap();
        // Lost at the renewal sent at 2 s plus the 10 s deadline, not later.
        assert_eq!(
            held,
            Held::Lost {
                last_renewed: acquired + Duration::from_secs(2)
            }
        );
        assert_eq!(started.elapsed(), Duration::from_secs(12));
        assert_eq!(
            failures, 2,
            "retried at 11 s; the deadline came before another retry"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_sees_another_holder_loses_at_once() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let holding = tokio::spawn(async move {
            let mut leadership = elector.acquire(&stop).await.unwrap();
            elector.hold(&mut leadership, &stop).await
        });
        grant(&mut server).await;
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(
            send,
            200,
            &lease("other", "2026-01-01T00:00:00.000000Z", 1, "7"),
        );
        let held = tokio::time::timeout(Duration::from_secs(1), holding)
            .await
            .expect("no further renewal")
            .unwrap();
        assert!(matches!(held, Held::Lost { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_takes_over_only_after_a_full_lease_duration_on_its_own_clock() {
        let (mut elector, mut server) = elector();
        let acquiring = tokio::spawn(async move {
            let leadership = elector.acquire(&CancellationToken::new()).await;
            (leadership, elector)
        });
        // The holder's renewTime is a day old: on the holder's skewed clock it is current, so the
        // follower must not trust it and waits 15 s of its own time instead.
        let stale = lease("other", "2025-12-31T00:00:00.000000Z", 3, "5");
        let started = Instant::now();
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &stale);
        for _ in 0..7 {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{:?}",
                started.elapsed()
            );
            respond(send, 200, &stale);
        }
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        assert_eq!(started.elapsed(), Duration::from_secs(16));
        respond(send, 200, &stale);
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert_eq!(body["metadata"]["resourceVersion"], "5");
        assert_eq!(
            timeless(&body["spec"]),
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 4})
        );
        respond(send, 200, &body);
        let (leadership, _) = crate::testing::within(acquiring).await.unwrap();
        assert!(leadership.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_by_the_holder_restarts_the_followers_clock() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let acquiring = {
            let stop = stop.clone();
            tokio::spawn(async move { elector.acquire(&stop).await })
        };
        let started = Instant::now();
        // The holder renews every 2 s for 30 s: the follower never takes over.
        for round in 0..16 {
            let (_, send) = next(&mut server, Method::GET, PATH).await;
            let renewed = format!("2026-01-01T00:00:{:02}.000000Z", round * 2);
            respond(send, 200, &lease("other", &renewed, 0, &round.to_string()));
        }
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        stop.cancel();
        let leadership = tokio::time::timeout(Duration::from_secs(5), acquiring)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(leadership, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_lease_is_taken_at_once() {
        let (mut elector, mut server) = elector();
        let acquiring =
            tokio::spawn(async move { elector.acquire(&CancellationToken::new()).await });
        let mut released = lease("", "2026-01-01T00:00:00.000000Z", 2, "9");
        released["spec"]
            .as_object_mut()
            .unwrap()
            .remove("holderIdentity");
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 200, &released);
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["spec"]["leaseTransitions"], 3);
        respond(send, 200, &body);
        assert!(crate::testing::within(acquiring).await.unwrap().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflicting_update_is_not_leadership() {
        let (mut elector, mut server) = elector();
        let stop = CancellationToken::new();
        let acquiring = {
            let stop = stop.clone();
            tokio::spawn(async move { elector.acquire(&stop).await })
        };
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(send, 404, &not_found());
        let (_, send) = next(&mut server, Method::POST, COLLECTION).await;
        respond(
            send,
            409,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "AlreadyExists", "code": 409}),
        );
        // The other replica won: its Lease is fresh.
        let (_, send) = next(&mut server, Method::GET, PATH).await;
        respond(
            send,
            200,
            &lease("other", "2026-01-01T00:00:00.000000Z", 0, "1"),
        );
        stop.cancel();
        assert_eq!(crate::testing::within(acquiring).await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_leader_releases_the_lease_on_shutdown() {
        let (mut elector, mut server) = elector();
        let releasing = tokio::spawn(async move {
            elector.acquire(&CancellationToken::new()).await.unwrap();
            elector.release().await
        });
        grant(&mut server).await;
        let (body, send) = next(&mut server, Method::PUT, PATH).await;
        assert_eq!(body["metadata"]["resourceVersion"], "1");
        assert_eq!(
            timeless(&body["spec"]),
            json!({"leaseDurationSeconds": 1, "leaseTransitions": 0}),
            "no holder"
        );
        respond(send, 200, &body);
        assert!(crate::testing::within(releasing).await.unwrap().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_releases_nothing() {
        let (mut elector, _server) = elector();
        assert!(!elector.release().await.unwrap());
    }
}
