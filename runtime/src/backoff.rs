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
mod tests;
