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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    /// The patch from `sent` to `after`, where `before` is the typed object as read; checks
    /// that it applies to `sent` and gives `expected`.
    fn patch(sent: &str, before: &Value, after: &Value, expected: &Value) -> Value {
        let sent_raw = RawValue::from_string(sent.to_owned()).unwrap();
        let ops = diff(&sent_raw, &raw(after), || Ok(raw(before))).unwrap();
        let patch = json_patch::Patch(ops);
        let mut object: Value = serde_json::from_str(sent).unwrap();
        json_patch::patch(&mut object, &patch)
            .unwrap_or_else(|error| panic!("the patch {patch} does not apply: {error}"));
        assert_eq!(&object, expected, "patch: {patch}");
        serde_json::to_value(&patch).unwrap()
    }

    #[test]
    fn a_field_the_request_left_out_is_added_not_replaced() {
        // The type reads the missing `image` as "", and the defaulter sets it.
        let ops = patch(
            r#"{"spec":{"replicas":1}}"#,
            &json!({"spec": {"replicas": 1, "image": ""}}),
            &json!({"spec": {"replicas": 1, "image": "nginx"}}),
            &json!({"spec": {"replicas": 1, "image": "nginx"}}),
        );
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/spec/image", "value": "nginx"}])
        );
    }

    #[test]
    fn defaults_filled_in_by_the_type_alone_are_added() {
        // `#[serde(default)]` fields that the defaulter leaves alone still reach the object:
        // what the Rust code saw is what is stored.
        let ops = patch(
            r#"{"spec":{}}"#,
            &json!({"spec": {"replicas": 0}}),
            &json!({"spec": {"replicas": 0}}),
            &json!({"spec": {"replicas": 0}}),
        );
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/spec/replicas", "value": 0}])
        );
    }

    #[test]
    fn fields_the_type_does_not_know_are_kept() {
        let ops = patch(
            r#"{"spec":{"replicas":0,"future":{"a":[1,2]}},"extra":true}"#,
            &json!({"spec": {"replicas": 0}}),
            &json!({"spec": {"replicas": 3}}),
            &json!({"spec": {"replicas": 3, "future": {"a": [1, 2]}}, "extra": true}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/spec/replicas", "value": 3}])
        );
    }

    #[test]
    fn a_field_the_defaulter_removed_is_removed() {
        let ops = patch(
            r#"{"spec":{"replicas":1,"debug":"yes","unknown":1}}"#,
            &json!({"spec": {"replicas": 1, "debug": "yes"}}),
            &json!({"spec": {"replicas": 1}}),
            &json!({"spec": {"replicas": 1, "unknown": 1}}),
        );
        assert_eq!(ops, json!([{"op": "remove", "path": "/spec/debug"}]));
    }

    #[test]
    fn nulls_the_type_reads_as_nothing_stay() {
        let ops = patch(
            r#"{"metadata":{"name":"a","creationTimestamp":null},"spec":{"image":null}}"#,
            &json!({"metadata": {"name": "a"}, "spec": {}}),
            &json!({"metadata": {"name": "a"}, "spec": {"size": null}}),
            &json!({"metadata": {"name": "a", "creationTimestamp": null}, "spec": {"image": null}}),
        );
        assert_eq!(ops, json!([]));
        // A null the defaulter fills is replaced: the key exists.
        let ops = patch(
            r#"{"spec":{"image":null}}"#,
            &json!({"spec": {}}),
            &json!({"spec": {"image": "nginx"}}),
            &json!({"spec": {"image": "nginx"}}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/spec/image", "value": "nginx"}])
        );
    }

    #[test]
    fn text_that_differs_only_in_form_gives_no_operation() {
        // Go escapes `<` and writes floats without a fraction; keys come in another order.
        patch(
            r#"{"b":"\u003ca\u003e","a":2,"c":[1.5e0]}"#,
            &json!({"a": 2.0, "b": "<a>", "c": [1.5]}),
            &json!({"a": 2.0, "b": "<a>", "c": [1.5]}),
            &json!({"a": 2, "b": "<a>", "c": [1.5]}),
        );
        let sent = RawValue::from_string(r#"{"b":"\u003ca\u003e","a":2,"c":[1.5e0]}"#.into());
        let ops = diff(
            &sent.unwrap(),
            &raw(&json!({"a": 2.0, "b": "<a>", "c": [1.5]})),
            || unreachable!(),
        )
        .unwrap();
        assert!(ops.is_empty(), "{ops:?}");
    }

    #[test]
    fn numbers_past_i64_are_compared_exactly() {
        // As floats, these two are the same number: a defaulter's change would be lost.
        let ops = patch(
            r#"{"n":18446744073709551615}"#,
            &json!({"n": u64::MAX}),
            &json!({"n": u64::MAX - 1}),
            &json!({"n": u64::MAX - 1}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/n", "value": u64::MAX - 1}])
        );
    }

    #[test]
    fn arrays_change_in_place_and_at_the_end() {
        // An item changed in place keeps what the type does not know.
        let ops = patch(
            r#"{"items":[{"name":"a","x":1},{"name":"b"}]}"#,
            &json!({"items": [{"name": "a"}, {"name": "b"}]}),
            &json!({"items": [{"name": "a", "port": 80}, {"name": "b"}]}),
            &json!({"items": [{"name": "a", "x": 1, "port": 80}, {"name": "b"}]}),
        );
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/items/0/port", "value": 80}])
        );
        // Items removed at the end go from the last, so that every index stays valid.
        let ops = patch(
            r#"{"items":[{"name":"a","x":1},{"name":"b"},{"name":"c"}]}"#,
            &json!({"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
            &json!({"items": [{"name": "a"}]}),
            &json!({"items": [{"name": "a", "x": 1}]}),
        );
        assert_eq!(
            ops,
            json!([
                {"op": "remove", "path": "/items/2"},
                {"op": "remove", "path": "/items/1"},
            ])
        );
        let ops = patch(
            r#"{"items":[]}"#,
            &json!({"items": []}),
            &json!({"items": [1, 2]}),
            &json!({"items": [1, 2]}),
        );
        assert_eq!(
            ops,
            json!([
                {"op": "add", "path": "/items/0", "value": 1},
                {"op": "add", "path": "/items/1", "value": 2},
            ])
        );
    }

    #[test]
    fn an_array_changed_elsewhere_than_at_its_end_is_replaced_whole() {
        // A sidecar put first: the field the type does not know must not move onto it.
        let ops = patch(
            r#"{"c":[{"name":"app","x":1}]}"#,
            &json!({"c": [{"name": "app"}]}),
            &json!({"c": [{"name": "sidecar"}, {"name": "app"}]}),
            &json!({"c": [{"name": "sidecar"}, {"name": "app"}]}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/c", "value": [{"name": "sidecar"}, {"name": "app"}]}])
        );
        // The first item removed: `x` must not move onto `b`.
        patch(
            r#"{"c":[{"name":"a","x":1},{"name":"b"}]}"#,
            &json!({"c": [{"name": "a"}, {"name": "b"}]}),
            &json!({"c": [{"name": "b"}]}),
            &json!({"c": [{"name": "b"}]}),
        );
        // Appended at the end: the items in place keep what the type does not know.
        patch(
            r#"{"c":[{"name":"app","x":1}]}"#,
            &json!({"c": [{"name": "app"}]}),
            &json!({"c": [{"name": "app"}, {"name": "sidecar"}]}),
            &json!({"c": [{"name": "app", "x": 1}, {"name": "sidecar"}]}),
        );
    }

    #[test]
    fn a_typed_object_of_another_shape_counts_as_having_nothing_there() {
        // The type writes `extra` as `null` (a field it reads into nothing): the request's
        // object there has no fields before defaulting, so the missing `b` is one the type
        // did not know, and it stays.
        let ops = patch(
            r#"{"spec":{"extra":{"a":1,"b":2}}}"#,
            &json!({"spec": {"extra": null}}),
            &json!({"spec": {"extra": {"a": 1}}}),
            &json!({"spec": {"extra": {"a": 1, "b": 2}}}),
        );
        assert_eq!(ops, json!([]));
        // The same for an array: with no items before, a shorter array is replaced whole.
        let ops = patch(
            r#"{"spec":{"list":[1,2]}}"#,
            &json!({"spec": {"list": null}}),
            &json!({"spec": {"list": [1]}}),
            &json!({"spec": {"list": [1]}}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/spec/list", "value": [1]}])
        );
    }

    #[test]
    fn keys_are_escaped_in_paths() {
        let ops = patch(
            r#"{"metadata":{"labels":{}}}"#,
            &json!({"metadata": {"labels": {}}}),
            &json!({"metadata": {"labels": {"app.kubernetes.io/name": "x", "a~b": "y"}}}),
            &json!({"metadata": {"labels": {"app.kubernetes.io/name": "x", "a~b": "y"}}}),
        );
        assert_eq!(
            ops,
            json!([
                {"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "x"},
                {"op": "add", "path": "/metadata/labels/a~0b", "value": "y"},
            ])
        );
    }

    #[test]
    fn a_value_of_another_type_is_replaced_whole() {
        let ops = patch(
            r#"{"spec":{"ports":"80"}}"#,
            &json!({"spec": {"ports": [80]}}),
            &json!({"spec": {"ports": [80]}}),
            &json!({"spec": {"ports": [80]}}),
        );
        assert_eq!(
            ops,
            json!([{"op": "replace", "path": "/spec/ports", "value": [80]}])
        );
    }

    #[test]
    fn the_typed_object_before_is_serialized_only_when_a_field_is_missing() {
        let sent = RawValue::from_string(r#"{"spec":{"replicas":0}}"#.into()).unwrap();
        let ops = diff(&sent, &raw(&json!({"spec": {"replicas": 1}})), || {
            panic!("serialized the object before defaulting for nothing")
        })
        .unwrap();
        assert_eq!(ops.len(), 1);
    }
}
