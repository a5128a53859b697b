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
