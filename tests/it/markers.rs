//! docs/markers.md: every controller-gen CRD marker's Rust spelling, tested into the CRD.
//!
//! One project holds a kind, `Widget`, in three versions. Its v1 types
//! (`markers_widget.rs.txt`) carry every spelling of the table; v2 is deprecated and v3
//! unserved. `generate` makes the CRD, and each row's fragment is compared with what
//! controller-gen writes for the marker. controller-gen's output is taken from
//! controller-tools' own test data, `pkg/crd/testdata/cronjob_types.go` and the CRD it
//! generates, `pkg/crd/testdata/testdata.kubebuilder.io_cronjobs.yaml`
//! (kubernetes-sigs/controller-tools at 43475818); the CRD API's own rules are
//! `k8s.io/apiextensions-apiserver`'s. Numbers compare as numbers: serde writes `1.0` where
//! controller-gen writes `1`, which the API server reads alike.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::generate::{one_build_at_a_time, target};
use crate::support::{Workspace, stderr};

/// The types of v1: every Rust spelling of the table.
const WIDGET: &str = include_str!("markers_widget.rs.txt");

/// What v2 and v3 add to the `#[kube(...)]` that `create api` writes.
const DEPRECATED: &str = "    deprecated = \"shop.learn.com/v2 Widget is deprecated\",\n";
const UNSERVED: &str = "    served = false,\n";

/// What a row expects at its place in the CRD.
enum Want {
    /// This value (YAML).
    Is(&'static str),
    /// An object with at least these keys and values (YAML).
    Has(&'static str),
    /// A list holding this string.
    Lists(&'static str),
    /// A list without this string.
    Lacks(&'static str),
    /// A schema that, its description aside, is this (YAML).
    Schema(&'static str),
}

/// The spec's schema in v1; `{P}` in a place stands for its properties.
const SPEC: &str = "/spec/versions/v1/schema/openAPIV3Schema/properties/spec";

/// One row of docs/markers.md: controller-gen's marker, where its output lands (a JSON pointer;
/// `{P}` is v1's spec properties, `v1`, `v2` and `v3` stand for the versions' indices) and
/// what controller-gen writes there.
const ROWS: &[(&str, &str, Want)] = &[
    // Numbers, strings and lists: cronjob_types.go's `floatWithValidations`,
    // `int32WithValidations`, `StringWithLength`-style fields and `MinMaxObject`.
    (
        "+kubebuilder:validation:Minimum=1",
        "{P}/size/minimum",
        Want::Is("1"),
    ),
    (
        "+kubebuilder:validation:Maximum=10",
        "{P}/size/maximum",
        Want::Is("10"),
    ),
    (
        "+kubebuilder:validation:ExclusiveMinimum=true",
        "{P}/aboveZero",
        Want::Has("{exclusiveMinimum: true, minimum: 0}"),
    ),
    (
        "+kubebuilder:validation:ExclusiveMaximum=true",
        "{P}/belowHundred",
        Want::Has("{exclusiveMaximum: true, maximum: 100}"),
    ),
    (
        "+kubebuilder:validation:MultipleOf=5",
        "{P}/step/multipleOf",
        Want::Is("5"),
    ),
    (
        "+kubebuilder:validation:MinLength=1",
        "{P}/title/minLength",
        Want::Is("1"),
    ),
    (
        "+kubebuilder:validation:MaxLength=63",
        "{P}/title/maxLength",
        Want::Is("63"),
    ),
    (
        "+kubebuilder:validation:Pattern=^[a-z]+$",
        "{P}/color/pattern",
        Want::Is("'^[a-z]+$'"),
    ),
    (
        "+kubebuilder:validation:Enum=Round;Square",
        "{P}/shape",
        Want::Has("{enum: [Round, Square], type: string}"),
    ),
    (
        "+kubebuilder:validation:Format=date-time",
        "{P}/since/format",
        Want::Is("date-time"),
    ),
    (
        "+kubebuilder:validation:MinItems=1",
        "{P}/tags/minItems",
        Want::Is("1"),
    ),
    (
        "+kubebuilder:validation:MaxItems=3",
        "{P}/tags/maxItems",
        Want::Is("3"),
    ),
    // The API server refuses `uniqueItems: true`; a set is how Kubernetes says it.
    (
        "+kubebuilder:validation:UniqueItems=true",
        "{P}/zones",
        Want::Has("{x-kubernetes-list-type: set, type: array}"),
    ),
    (
        "+kubebuilder:validation:MinProperties=1",
        "{P}/selector/minProperties",
        Want::Is("1"),
    ),
    (
        "+kubebuilder:validation:MaxProperties=5",
        "{P}/selector/maxProperties",
        Want::Is("5"),
    ),
    // Optionality and defaults: cronjob_types.go's `schedule` (required), the `+optional`
    // fields, `canBeNull` (`nullable: true`) and the `+kubebuilder:default` fields.
    ("+required", "{S}/required", Want::Lists("size")),
    ("+optional", "{S}/required", Want::Lacks("comment")),
    ("+nullable", "{P}/nickname/nullable", Want::Is("true")),
    (
        "+kubebuilder:default=1",
        "{P}/replicas/default",
        Want::Is("1"),
    ),
    // CEL rules: cronjob_types.go's XValidation fields (`stringWithEvenLength`,
    // `stringWithEvenLengthAndMessageExpression`, `forbiddenInt`, `onlyAllowSettingOnUpdate`).
    (
        "rule=\"self == oldSelf\"",
        "{P}/region/x-kubernetes-validations/0/rule",
        Want::Is("self == oldSelf"),
    ),
    (
        "message=\"region is immutable\"",
        "{P}/region/x-kubernetes-validations/0/message",
        Want::Is("region is immutable"),
    ),
    (
        "messageExpression=\"'ports must be positive'\"",
        "{S}/x-kubernetes-validations/1/messageExpression",
        Want::Is("\"'ports must be positive'\""),
    ),
    (
        "reason=\"FieldValueForbidden\"",
        "{P}/region/x-kubernetes-validations/0/reason",
        Want::Is("FieldValueForbidden"),
    ),
    (
        "fieldPath=\".ports\"",
        "{S}/x-kubernetes-validations/1/fieldPath",
        Want::Is(".ports"),
    ),
    (
        "optionalOldSelf=true",
        "{P}/floor/x-kubernetes-validations/0",
        Want::Has("{optionalOldSelf: true, rule: oldSelf.hasValue() || self == 0}"),
    ),
    // Kinds of value: `unprunedJSON`, `embeddedResource`, `intOrString`, `schemaless`.
    (
        "+kubebuilder:pruning:PreserveUnknownFields",
        "{P}/extra/x-kubernetes-preserve-unknown-fields",
        Want::Is("true"),
    ),
    (
        "+kubebuilder:validation:EmbeddedResource",
        "{P}/template",
        Want::Has(
            "{type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}",
        ),
    ),
    (
        "+kubebuilder:validation:XIntOrString",
        "{P}/maxUnavailable/x-kubernetes-int-or-string",
        Want::Is("true"),
    ),
    (
        "+kubebuilder:validation:Schemaless",
        "{P}/raw",
        Want::Schema("{x-kubernetes-preserve-unknown-fields: true}"),
    ),
    // List and map shapes: `jobs`-style list maps, `mapOfInfo`, `structWithSeveralFields`.
    (
        "+listType=map",
        "{P}/endpoints/x-kubernetes-list-type",
        Want::Is("map"),
    ),
    (
        "+listMapKey=name",
        "{P}/endpoints/x-kubernetes-list-map-keys",
        Want::Is("[name]"),
    ),
    (
        "+mapType=atomic",
        "{P}/settings/x-kubernetes-map-type",
        Want::Is("atomic"),
    ),
    (
        "+structType=atomic",
        "{P}/owner/x-kubernetes-map-type",
        Want::Is("atomic"),
    ),
    // The resource: the CronJob's `scope`, `names.singular: mycronjob`.
    (
        "+kubebuilder:resource:scope=Namespaced",
        "/spec/scope",
        Want::Is("Namespaced"),
    ),
    (
        "+kubebuilder:resource:shortName=wd",
        "/spec/names/shortNames",
        Want::Is("[wd]"),
    ),
    (
        "+kubebuilder:resource:categories=shop",
        "/spec/names/categories",
        Want::Is("[shop]"),
    ),
    (
        "+kubebuilder:resource:singular=widget",
        "/spec/names/singular",
        Want::Is("widget"),
    ),
    // Print columns: kubebuilder's book, `additionalPrinterColumns` with every field.
    (
        "+kubebuilder:printcolumn:name=\"Replicas\",type=integer,JSONPath=\".spec.replicas\",description=\"Replicas to run\",format=int32,priority=1",
        "/spec/versions/v1/additionalPrinterColumns/0",
        Want::Is(
            "{description: Replicas to run, format: int32, jsonPath: .spec.replicas, name: Replicas, priority: 1, type: integer}",
        ),
    ),
    // Subresources: the CronJob's `subresources.status: {}`; scale as the CRD API names it.
    (
        "+kubebuilder:subresource:status",
        "/spec/versions/v1/subresources/status",
        Want::Is("{}"),
    ),
    (
        "+kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector",
        "/spec/versions/v1/subresources/scale",
        Want::Is(
            "{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}",
        ),
    ),
    // Versions: multiple_versions/ and deprecated/ of controller-tools' test data.
    (
        "+kubebuilder:storageversion",
        "/spec/versions/v1/storage",
        Want::Is("true"),
    ),
    (
        "+kubebuilder:unservedversion",
        "/spec/versions/v3/served",
        Want::Is("false"),
    ),
    (
        "+kubebuilder:deprecatedversion:warning=\"shop.learn.com/v2 Widget is deprecated\"",
        "/spec/versions/v2",
        Want::Has("{deprecated: true, deprecationWarning: shop.learn.com/v2 Widget is deprecated}"),
    ),
    // Fields and metadata: the CronJob's `selectableFields` and `metadata.annotations`.
    (
        "+kubebuilder:selectablefield:JSONPath=.spec.color",
        "/spec/versions/v1/selectableFields",
        Want::Is("[{jsonPath: .spec.color}]"),
    ),
    (
        "+kubebuilder:metadata:annotations=\"shop.learn.com/owner=team-a\"",
        "/metadata/annotations/shop.learn.com~1owner",
        Want::Is("team-a"),
    ),
    (
        "+kubebuilder:metadata:labels=\"shop.learn.com/tier=gold\"",
        "/metadata/labels/shop.learn.com~1tier",
        Want::Is("gold"),
    ),
];

/// `value` with every number as a float, so that `1` and `1.0` compare equal.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

fn yaml(text: &str) -> Value {
    numbers_as_floats(serde_yaml::from_str(text).unwrap())
}

/// `place` with `{P}`, `{S}` and the version names made a JSON pointer into `crd`.
fn pointer(crd: &Value, place: &str) -> String {
    let mut place = place
        .replace("{P}", &format!("{SPEC}/properties"))
        .replace("{S}", SPEC);
    for (index, version) in crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = version["name"].as_str().unwrap();
        place = place.replace(
            &format!("/versions/{name}/"),
            &format!("/versions/{index}/"),
        );
        if place.ends_with(&format!("/versions/{name}")) {
            place = format!("{}{index}", &place[..place.len() - name.len()]);
        }
    }
    place
}

/// What is wrong with `found` for `want`, if anything.
fn mismatch(found: Option<&Value>, want: &Want) -> Option<String> {
    let Some(found) = found else {
        return Some("nothing there".to_owned());
    };
    let ok = match want {
        Want::Is(text) => *found == yaml(text),
        Want::Has(text) => yaml(text)
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| found.get(k) == Some(v)),
        Want::Lists(item) => found
            .as_array()
            .is_some_and(|a| a.contains(&(*item).into())),
        Want::Lacks(item) => found
            .as_array()
            .is_some_and(|a| !a.contains(&(*item).into())),
        Want::Schema(text) => {
            let mut found = found.clone();
            if let Some(map) = found.as_object_mut() {
                map.remove("description");
            }
            found == yaml(text)
        }
    };
    (!ok).then(|| format!("found {}", serde_json::to_string(found).unwrap()))
}

/// The rows of docs/markers.md: (controller-gen's marker, the Rust cell).
fn documented() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/markers.md"),
    )
    .unwrap();
    doc.lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let marker = cells[0].trim_start_matches("| `");
            let marker = &marker[..marker.rfind('`').unwrap()];
            (marker.to_owned(), cells[1].to_owned())
        })
        .collect()
}

/// The code spans of a table cell that are Rust to compile: attributes, builder calls and
/// fields.
fn rust_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            ["#[", ".", "Rule::new", "pub "]
                .iter()
                .any(|start| span.starts_with(start))
        })
        .map(|span| {
            // A `#[kube(...)]` item stands inside the kind's one `#[kube(...)]`.
            let span = span
                .strip_prefix("#[kube(")
                .and_then(|inner| inner.strip_suffix(")]"))
                .unwrap_or(span);
            span.split_whitespace().collect()
        })
        .collect()
}

#[test]
fn every_row_of_the_table_is_a_row_of_this_test_and_its_rust_is_what_it_compiles() {
    let rows: BTreeSet<&str> = ROWS.iter().map(|(marker, ..)| *marker).collect();
    assert_eq!(rows.len(), ROWS.len(), "a marker is listed twice");
    let documented = documented();
    let markers: BTreeSet<&str> = documented.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        markers, rows,
        "docs/markers.md and this test list other markers"
    );
    let compiled: String = [WIDGET, DEPRECATED, UNSERVED]
        .concat()
        .split_whitespace()
        .collect();
    for (marker, rust) in &documented {
        for span in rust_spans(rust) {
            assert!(
                compiled.contains(&span),
                "{marker}: `{span}` is not what the test compiles"
            );
        }
    }
}

#[test]
fn every_rust_spelling_writes_what_controller_gen_writes() {
    let _build = one_build_at_a_time();
    let ws = Workspace::new("widget-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    for (version, extra) in [("v1", ""), ("v2", DEPRECATED), ("v3", UNSERVED)] {
        let mut args = vec!["create", "api", "--group", "shop", "--version", version];
        args.extend(["--kind", "Widget"]);
        if version != "v1" {
            args.push("--controller=false");
        }
        ws.run(&args).success();
        let path = format!("api/src/shop/{version}/widget.rs");
        let text = ws.read(&path);
        let text = if version == "v1" {
            WIDGET.to_owned()
        } else {
            text.replacen(
                "    storage = false,\n",
                &format!("    storage = false,\n{extra}"),
                1,
            )
        };
        ws.write(&path, &text);
    }
    let err = stderr(&ws.run_with_target(&target(), &["generate"]).success());
    assert!(
        err.contains("updated config/crd/bases/shop.learn.com_widgets.yaml"),
        "{err}"
    );
    let crd: Value = numbers_as_floats(
        serde_yaml::from_str(&ws.read("config/crd/bases/shop.learn.com_widgets.yaml")).unwrap(),
    );
    let wrong: Vec<String> = ROWS
        .iter()
        .filter_map(|(marker, place, want)| {
            let at = pointer(&crd, place);
            mismatch(crd.pointer(&at), want).map(|problem| format!("{marker} at {at}: {problem}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // `+optional` both ways: an Option, and a `#[serde(default)]` field, which the schema
    // defaults.
    let properties = crd.pointer(&pointer(&crd, "{S}/properties")).unwrap();
    assert_eq!(properties["comment"]["type"], "string");
    assert_eq!(properties["note"]["default"], "");
    let required = crd.pointer(&pointer(&crd, "{S}/required")).unwrap();
    assert!(!required.as_array().unwrap().contains(&"note".into()));
    // Only the storage version stores.
    let versions = crd["spec"]["versions"].as_array().unwrap();
    let storing: Vec<&str> = versions
        .iter()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(storing, ["v1"]);
}

#[test]
fn a_wrong_fragment_is_named() {
    let crd = yaml("{spec: {versions: [{name: v1, served: true}, {name: v2, served: false}]}}");
    assert_eq!(
        pointer(&crd, "/spec/versions/v2/served"),
        "/spec/versions/1/served"
    );
    assert_eq!(pointer(&crd, "/spec/versions/v2"), "/spec/versions/1");
    let at = pointer(&crd, "/spec/versions/v2/served");
    assert_eq!(mismatch(crd.pointer(&at), &Want::Is("false")), None);
    assert_eq!(
        mismatch(crd.pointer(&at), &Want::Is("true")),
        Some("found false".to_owned())
    );
    assert!(mismatch(None, &Want::Is("1")).is_some());
    assert!(mismatch(Some(&yaml("{a: 1, type: x}")), &Want::Schema("{a: 1}")).is_some());
    assert!(
        mismatch(
            Some(&yaml("{a: 1, description: x}")),
            &Want::Schema("{a: 1}")
        )
        .is_none()
    );
    assert!(mismatch(Some(&yaml("[x]")), &Want::Lacks("x")).is_some());
    assert!(mismatch(Some(&yaml("{a: 1.0, b: 2}")), &Want::Has("{a: 1}")).is_none());
}
