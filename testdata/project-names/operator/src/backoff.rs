//! Retry delays for failed reconciles: exponential per object, and forgotten once the object
//! reconciles again, as controller-runtime's rate limiter does.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// Consecutive failures per object, and the delays they earn.
pub struct Backoff<K: Resource<DynamicType = ()>> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
}

impl<K: Resource<DynamicType = ()>> Backoff<K> {
    /// Delays of `base`, doubled for every further consecutive failure, at most `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::default(),
        }
    }

    /// Counts a failure of `object` and returns how long to wait before retrying it.
    pub fn failed(&self, object: &K) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(ObjectRef::from_obj(object)).or_insert(0);
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(*count))
            .min(self.max);
        *count = count.saturating_add(1);
        delay
    }

    /// Forgets the failures of `object`: it reconciled, or it is gone.
    pub fn succeeded(&self, object: &ObjectRef<K>) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(object);
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
}
