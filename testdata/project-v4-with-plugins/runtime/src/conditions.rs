//! Status conditions, kept as apimachinery's `meta.SetStatusCondition` keeps them: one per
//! type, and a transition time that moves only when the status does, so that a reconcile that
//! finds nothing new writes nothing new.
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//! use rsbuilder_runtime::conditions::{self, Change};
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! let ready = conditions::new("Ready", "True", "Reconciled", "all is well", Some(1));
//! assert_eq!(conditions::set(&mut conditions, ready.clone()), Change::Transitioned);
//! assert_eq!(conditions::set(&mut conditions, ready), Change::Unchanged);
//! assert!(conditions::is_true(&conditions, "Ready"));
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What [`set`] did to a list of conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The condition was there as given: nothing changed.
    Unchanged,
    /// Its status stayed, but its reason, message or observed generation changed.
    Updated,
    /// It is new, or its status changed: its transition time is the new condition's.
    Transitioned,
}

impl Change {
    /// Whether the list is different from before.
    pub fn changed(self) -> bool {
        self != Self::Unchanged
    }
}

/// A condition of `type_` with `status` (`True`, `False` or `Unknown`), observed at
/// `observed_generation`, that transitions now if [`set`] finds its status changed.
pub fn new(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    }
}

/// Puts `condition` in `conditions`, in place of the one of its type. An existing condition
/// of the same status keeps its transition time; a new or a changed status takes the one of
/// `condition`.
pub fn set(conditions: &mut Vec<Condition>, condition: Condition) -> Change {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return Change::Transitioned;
    };
    if existing.status != condition.status {
        *existing = condition;
        return Change::Transitioned;
    }
    let time = existing.last_transition_time.clone();
    let updated = Condition {
        last_transition_time: time,
        ..condition
    };
    if *existing == updated {
        return Change::Unchanged;
    }
    *existing = updated;
    Change::Updated
}

/// The condition of `type_`, if there is one.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is there with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether the condition of `type_` is there with status `False`.
pub fn is_false(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "False")
}

/// Removes the condition of `type_`; returns whether there was one.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}
