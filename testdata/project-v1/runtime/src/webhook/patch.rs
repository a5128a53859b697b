//! The defaulting patch: RFC 6902 operations from the object the API server sent to the object
//! the defaulter returned, valid for the object as it was sent.
//!
//! The patch is computed from the request's raw JSON, as controller-runtime's
//! `PatchResponseFromRaw` does, and not from the typed object read back, so that:
//! - a field the request left out is added (`add`), never replaced, even when the Rust type fills
//!   it in with a default as it reads the object;
//! - a field the Rust type does not know is kept: a field of the request is removed only when the
//!   typed object had it before the defaulter ran, and has it no more;
//! - a `null` the request sent, which the Rust type reads as nothing, stays as it was;
//! - array items are paired by position, when the defaulter changed them in place or appended
//!   or removed at the end; an array changed otherwise (an item put first, one removed from the
//!   middle) is replaced whole, so that no field moves to another item, and the fields its
//!   items had that the type does not know are lost, as with controller-runtime.
//!
//! Both sides are compared as JSON text and only the parts that differ are parsed, one level at
//! a time: no JSON tree of the whole object is ever built, so a large object costs little more
//! than its text.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::Value;
use serde_json::value::RawValue;

/// The typed object before the defaulter ran, at one place of the tree.
#[derive(Clone, Copy)]
enum Before<'a> {
    /// Not serialized yet: only a field that the defaulter may have removed needs it.
    Unknown,
    /// The typed object had nothing here.
    Absent,
    /// The typed object's JSON here.
    At(&'a RawValue),
}

/// Why a walk stopped early.
enum Stop {
    /// A field of the request is missing after defaulting: whether to remove it depends on
    /// the typed object before defaulting.
    NeedBefore,
    /// A part of either side is not what its first character says; cannot happen for text that
    /// serde_json has checked already.
    Json(serde_json::Error),
}

impl From<serde_json::Error> for Stop {
    fn from(error: serde_json::Error) -> Self {
        Self::Json(error)
    }
}

/// The operations that turn `raw`, the object of the request, into `after`, the object the
/// defaulter returned. `before` serializes the typed object as it was read, before the
/// defaulter ran; it is called at most once, and only when a field of `raw` is missing from
/// `after`.
pub(super) fn diff(
    raw: &RawValue,
    after: &RawValue,
    before: impl FnOnce() -> Result<Box<RawValue>, serde_json::Error>,
) -> Result<Vec<PatchOperation>, serde_json::Error> {
    let mut ops = Vec::new();
    match walk(
        raw,
        after,
        Before::Unknown,
        &mut PointerBuf::new(),
        &mut ops,
    ) {
        Ok(()) => Ok(ops),
        Err(Stop::Json(error)) => Err(error),
        Err(Stop::NeedBefore) => {
            let before = before()?;
            ops.clear();
            match walk(
                raw,
                after,
                Before::At(&before),
                &mut PointerBuf::new(),
                &mut ops,
            ) {
                Ok(()) => Ok(ops),
                Err(Stop::Json(error)) => Err(error),
                Err(Stop::NeedBefore) => unreachable!("the typed object before is known"),
            }
        }
    }
}

/// The JSON type of a value, from its first character.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Object,
    Array,
    Scalar,
}

fn shape(value: &RawValue) -> Shape {
    match value.get().trim_start().as_bytes().first() {
        Some(b'{') => Shape::Object,
        Some(b'[') => Shape::Array,
        _ => Shape::Scalar,
    }
}

fn walk(
    raw: &RawValue,
    after: &RawValue,
    before: Before<'_>,
    path: &mut PointerBuf,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), Stop> {
    if raw.get() == after.get() {
        return Ok(());
    }
    match (shape(raw), shape(after)) {
        (Shape::Object, Shape::Object) => walk_object(raw, after, before, path, ops),
        (Shape::Array, Shape::Array) => walk_array(raw, after, before, path, ops),
        (Shape::Scalar, Shape::Scalar) => {
            let (raw, after): (Value, Value) = (
                serde_json::from_str(raw.get())?,
                serde_json::from_str(after.get())?,
            );
            if !same_scalar(&raw, &after) {
                ops.push(replace(path, after));
            }
            Ok(())
        }
        _ => {
            ops.push(replace(path, serde_json::from_str(after.get())?));
            Ok(())
        }
    }
}

fn walk_object(
    raw: &RawValue,
    after: &RawValue,
    before: Before<'_>,
    path: &mut PointerBuf,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), Stop> {
    let raw: BTreeMap<String, &RawValue> = serde_json::from_str(raw.get())?;
    let after: BTreeMap<String, &RawValue> = serde_json::from_str(after.get())?;
    let before_fields: Option<BTreeMap<String, &RawValue>> = match before {
        Before::At(value) if shape(value) == Shape::Object => {
            Some(serde_json::from_str(value.get())?)
        }
        _ => None,
    };
    let before_at = |key: &str| match (&before_fields, before) {
        (Some(fields), _) => fields
            .get(key)
            .map_or(Before::Absent, |value| Before::At(value)),
        (None, Before::Unknown) => Before::Unknown,
        (None, _) => Before::Absent,
    };
    for (key, after_value) in &after {
        path.push_back(key.as_str());
        match raw.get(key) {
            Some(raw_value) => walk(raw_value, after_value, before_at(key), path, ops)?,
            // A `null` the Rust type writes for a field the request left out changes nothing.
            None if after_value.get() == "null" => {}
            None => ops.push(PatchOperation::Add(AddOperation {
                path: path.clone(),
                value: serde_json::from_str(after_value.get())?,
            })),
        }
        path.pop_back();
    }
    for (key, raw_value) in &raw {
        if after.contains_key(key) || raw_value.get() == "null" {
            continue;
        }
        // The defaulter removed the field, or the Rust type does not know it: only the typed
        // object before defaulting tells which.
        match before_at(key) {
            Before::Unknown => return Err(Stop::NeedBefore),
            Before::Absent => {}
            Before::At(_) => {
                path.push_back(key.as_str());
                ops.push(PatchOperation::Remove(RemoveOperation {
                    path: path.clone(),
                }));
                path.pop_back();
            }
        }
    }
    Ok(())
}

fn walk_array(
    raw: &RawValue,
    after: &RawValue,
    before: Before<'_>,
    path: &mut PointerBuf,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), Stop> {
    let whole_after = after;
    let raw: Vec<&RawValue> = serde_json::from_str(raw.get())?;
    let after: Vec<&RawValue> = serde_json::from_str(after.get())?;
    let before_items: Option<Vec<&RawValue>> = match before {
        Before::At(value) if shape(value) == Shape::Array => {
            Some(serde_json::from_str(value.get())?)
        }
        _ => None,
    };
    let before_at = |index: usize| match (&before_items, before) {
        (Some(items), _) => items
            .get(index)
            .map_or(Before::Absent, |value| Before::At(value)),
        (None, Before::Unknown) => Before::Unknown,
        (None, _) => Before::Absent,
    };
    if raw.len() != after.len() {
        // Items are paired by position only when the defaulter appended or removed at the end,
        // leaving the others as the type read them: otherwise a field the type does not know
        // would move to another item. Any other change of length replaces the whole array, and
        // the fields its items had that the type does not know go with it.
        let Some(before_items) = &before_items else {
            if matches!(before, Before::Unknown) {
                return Err(Stop::NeedBefore);
            }
            ops.push(replace(path, serde_json::from_str(whole_after.get())?));
            return Ok(());
        };
        let kept_in_place = before_items.len() == raw.len()
            && before_items
                .iter()
                .zip(&after)
                .all(|(before, after)| before.get() == after.get());
        if !kept_in_place {
            ops.push(replace(path, serde_json::from_str(whole_after.get())?));
            return Ok(());
        }
    }
    // Items are compared by position: those both sides have in place, then the new ones are
    // appended, or the surplus removed from the end so that every index stays valid.
    for (index, (raw_item, after_item)) in raw.iter().zip(&after).enumerate() {
        path.push_back(index);
        walk(raw_item, after_item, before_at(index), path, ops)?;
        path.pop_back();
    }
    for (index, after_item) in after.iter().enumerate().skip(raw.len()) {
        path.push_back(index);
        ops.push(PatchOperation::Add(AddOperation {
            path: path.clone(),
            value: serde_json::from_str(after_item.get())?,
        }));
        path.pop_back();
    }
    for index in (after.len()..raw.len()).rev() {
        path.push_back(index);
        ops.push(PatchOperation::Remove(RemoveOperation {
            path: path.clone(),
        }));
        path.pop_back();
    }
    Ok(())
}

fn replace(path: &PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation {
        path: path.clone(),
        value,
    })
}

/// Whether two scalars are the same value: numbers by value (`2`, as Go writes a float, equals
/// `2.0`, as Rust does), everything else exactly.
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(a), Some(b)) = (a.as_i64(), b.as_i64()) {
                a == b
            } else if let (Some(a), Some(b)) = (a.as_u64(), b.as_u64()) {
                a == b
            } else {
                a.as_f64() == b.as_f64()
            }
        }
        _ => a == b,
    }
}
