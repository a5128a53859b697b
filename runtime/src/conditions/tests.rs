use super::*;

fn at(condition: Condition, time: &str) -> Condition {
    Condition {
        last_transition_time: Time(time.parse().unwrap()),
        ..condition
    }
}

const EARLIER: &str = "2026-01-01T00:00:00Z";
const LATER: &str = "2026-02-01T00:00:00Z";

#[test]
fn a_new_type_is_added_with_its_own_time() {
    let mut conditions = vec![at(new("Available", "True", "Up", "", None), EARLIER)];
    let ready = at(new("Ready", "False", "Waiting", "not yet", Some(2)), LATER);
    assert_eq!(set(&mut conditions, ready.clone()), Change::Transitioned);
    assert_eq!(conditions.len(), 2);
    assert_eq!(conditions[1], ready);
    assert_eq!(conditions[0].type_, "Available");
}

#[test]
fn the_same_status_keeps_the_transition_time() {
    let mut conditions = vec![at(
        new("Ready", "True", "Reconciled", "ok", Some(1)),
        EARLIER,
    )];
    let again = at(new("Ready", "True", "Reconciled", "ok", Some(1)), LATER);
    assert_eq!(set(&mut conditions, again), Change::Unchanged);
    assert_eq!(conditions[0].last_transition_time.0.to_string(), EARLIER);

    let newer = at(
        new("Ready", "True", "Reconciled", "still ok", Some(2)),
        LATER,
    );
    assert_eq!(set(&mut conditions, newer), Change::Updated);
    assert_eq!(
        conditions,
        [at(
            new("Ready", "True", "Reconciled", "still ok", Some(2)),
            EARLIER
        )]
    );
}

#[test]
fn a_status_change_takes_the_new_time() {
    let mut conditions = vec![at(
        new("Ready", "True", "Reconciled", "ok", Some(1)),
        EARLIER,
    )];
    let failed = at(new("Ready", "False", "Failed", "broken", Some(1)), LATER);
    assert_eq!(set(&mut conditions, failed.clone()), Change::Transitioned);
    assert_eq!(conditions, [failed]);
}

#[test]
fn lookups_and_removal() {
    let mut conditions = vec![
        new("Ready", "True", "Reconciled", "", None),
        new("Degraded", "False", "AsExpected", "", None),
        new("Progressing", "Unknown", "Starting", "", None),
    ];
    assert!(is_true(&conditions, "Ready"));
    assert!(!is_false(&conditions, "Ready"));
    assert!(is_false(&conditions, "Degraded"));
    assert!(!is_true(&conditions, "Progressing") && !is_false(&conditions, "Progressing"));
    assert!(!is_true(&conditions, "Missing") && !is_false(&conditions, "Missing"));
    assert_eq!(find(&conditions, "Degraded").unwrap().reason, "AsExpected");
    assert!(remove(&mut conditions, "Degraded"));
    assert!(!remove(&mut conditions, "Degraded"));
    assert_eq!(conditions.len(), 2);
    assert!(find(&conditions, "Degraded").is_none());
}

#[test]
fn change_says_whether_anything_changed() {
    assert!(!Change::Unchanged.changed());
    assert!(Change::Updated.changed());
    assert!(Change::Transitioned.changed());
}
