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
