//! Retry delays for failed reconciles: exponential per object, and forgotten once the object
//! reconciles again or goes away, as controller-runtime's rate limiter does.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// Consecutive failures per object, and the delays they earn.
///
/// An object's count is forgotten when it reconciles ([`Backoff::succeeded`]), when it is
/// deleted ([`Backoff::forget`], or [`Backoff::retain`] with the objects that still exist), and
/// in any case once it has not failed for twice the longest delay: an object that is gone
/// without a successful cleanup does not stay in memory.
pub struct Backoff<K: Resource<DynamicType = ()>> {
    base: Duration,
    max: Duration,
    state: Mutex<State<K>>,
}

struct State<K: Resource<DynamicType = ()>> {
    failures: HashMap<ObjectRef<K>, Failures>,
    pruned: Option<Instant>,
}

struct Failures {
    count: u32,
    last: Instant,
}

impl<K: Resource<DynamicType = ()>> Backoff<K> {
    /// Delays of `base`, doubled for every further consecutive failure, at most `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            state: Mutex::new(State {
                failures: HashMap::new(),
                pruned: None,
            }),
        }
    }

    /// Counts a failure of `object` and returns how long to wait before retrying it.
    pub fn failed(&self, object: &K) -> Duration {
        self.failed_at(ObjectRef::from_obj(object), Instant::now())
    }

    fn failed_at(&self, key: ObjectRef<K>, now: Instant) -> Duration {
        let mut state = self.lock();
        self.prune(&mut state, now);
        let entry = state.failures.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(entry.count))
            .min(self.max);
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        delay
    }

    /// Forgets the failures of `object`: it reconciled.
    pub fn succeeded(&self, object: &ObjectRef<K>) {
        self.forget(object);
    }

    /// Forgets the failures of `object`: it is gone.
    pub fn forget(&self, object: &ObjectRef<K>) {
        self.lock().failures.remove(object);
    }

    /// Keeps only the objects for which `exists` is true, for example those still in the
    /// controller's store (`|object| store.get(object).is_some()`).
    pub fn retain(&self, mut exists: impl FnMut(&ObjectRef<K>) -> bool) {
        self.lock().failures.retain(|object, _| exists(object));
    }

    /// How many objects have failures counted.
    pub fn len(&self) -> usize {
        self.lock().failures.len()
    }

    /// Whether no object has failures counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the objects that have not failed for twice the longest delay: had they failed
    /// again, they would have been retried and failed within that time. Runs at most once per
    /// longest delay, so that a failure costs O(1) amortized.
    fn prune(&self, state: &mut State<K>, now: Instant) {
        let stale_after = self.max.saturating_mul(2);
        if state
            .pruned
            .is_some_and(|last| now.saturating_duration_since(last) < self.max)
        {
            return;
        }
        state
            .failures
            .retain(|_, failures| now.saturating_duration_since(failures.last) < stale_after);
        state.pruned = Some(now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(name: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.into());
        object.metadata.namespace = Some("default".into());
        object
    }

    #[test]
    fn delays_double_per_object_up_to_the_maximum_and_reset() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let (a, b) = (config_map("a"), config_map("b"));
        let delays: Vec<u64> = (0..5).map(|_| backoff.failed(&a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(backoff.failed(&b), Duration::from_secs(1));
        backoff.succeeded(&ObjectRef::from_obj(&a));
        assert_eq!(backoff.failed(&a), Duration::from_secs(1));
    }

    #[test]
    fn deleted_objects_are_forgotten() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let (a, b, c) = (config_map("a"), config_map("b"), config_map("c"));
        for object in [&a, &b, &c] {
            backoff.failed(object);
        }
        backoff.forget(&ObjectRef::from_obj(&a));
        let existing = ObjectRef::from_obj(&b);
        backoff.retain(|object| *object == existing);
        assert_eq!(backoff.len(), 1);
        assert_eq!(
            backoff.failed(&b),
            Duration::from_secs(2),
            "b is still counted"
        );
        assert_eq!(backoff.failed(&c), Duration::from_secs(1), "c starts again");
    }

    #[test]
    fn objects_that_stopped_failing_long_ago_are_dropped() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(300));
        let start = Instant::now();
        let gone = ObjectRef::from_obj(&config_map("gone"));
        let failing = ObjectRef::from_obj(&config_map("failing"));
        backoff.failed_at(gone.clone(), start);
        // An object that keeps failing is retried at least every `max`, so it is never dropped.
        for minute in 1..=20 {
            backoff.failed_at(failing.clone(), start + Duration::from_secs(minute * 60));
        }
        let state = backoff.lock();
        assert!(!state.failures.contains_key(&gone), "dropped after 2 × max");
        assert_eq!(state.failures[&failing].count, 20);
    }

    #[test]
    fn an_object_is_dropped_at_exactly_twice_the_longest_delay() {
        let max = Duration::from_secs(10);
        let start = Instant::now();
        let gone = ObjectRef::from_obj(&config_map("gone"));
        let other = ObjectRef::from_obj(&config_map("other"));

        let backoff = Backoff::new(Duration::from_secs(1), max);
        backoff.failed_at(gone.clone(), start);
        backoff.failed_at(other.clone(), start + max * 2 - Duration::from_millis(1));
        assert!(
            backoff.lock().failures.contains_key(&gone),
            "kept just before 2 × max"
        );

        let backoff = Backoff::new(Duration::from_secs(1), max);
        backoff.failed_at(gone.clone(), start);
        backoff.failed_at(other.clone(), start + max);
        backoff.failed_at(other.clone(), start + max * 2);
        assert!(
            !backoff.lock().failures.contains_key(&gone),
            "dropped at 2 × max"
        );
    }

    #[test]
    fn pruning_runs_at_most_once_per_longest_delay() {
        let max = Duration::from_secs(10);
        let start = Instant::now();
        let gone = ObjectRef::from_obj(&config_map("gone"));
        let other = ObjectRef::from_obj(&config_map("other"));
        let backoff = Backoff::new(Duration::from_secs(1), max);
        backoff.failed_at(gone.clone(), start);
        // Pruned at 19 s (gone is kept: 19 s < 20 s); the next pruning is due at 29 s.
        backoff.failed_at(other.clone(), start + Duration::from_secs(19));
        backoff.failed_at(other.clone(), start + Duration::from_secs(28));
        assert!(
            backoff.lock().failures.contains_key(&gone),
            "no pruning 9 s after the last"
        );
        backoff.failed_at(other.clone(), start + Duration::from_secs(29));
        assert!(
            !backoff.lock().failures.contains_key(&gone),
            "pruned 10 s after the last"
        );
    }

    #[test]
    fn emptiness_follows_the_counted_objects() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        assert!(backoff.is_empty());
        backoff.failed(&config_map("a"));
        assert!(!backoff.is_empty());
        backoff.succeeded(&ObjectRef::from_obj(&config_map("a")));
        assert!(backoff.is_empty());
    }
}
