//! The `Prawn` kind of `sea-creatures.testproject.org/v1`.
//!
//! The CRD in `config/crd/bases/` is generated from these types: after editing them, run
//! `make manifests`. Doc comments become the schema's descriptions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

/// PrawnSpec defines the desired state of Prawn.
#[derive(
    kube::CustomResource,
    serde::Deserialize,
    serde::Serialize,
    Clone,
    Debug,
    Default,
    PartialEq,
    schemars::JsonSchema,
)]
#[kube(
    group = "sea-creatures.testproject.org",
    version = "v1",
    kind = "Prawn",
    plural = "prawns",
    shortname = "prawn",
    namespaced,
    status = "PrawnStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PrawnSpec {
    // TODO(user): Replace this example with the fields of your resource. Run `make manifests`
    // after every change. Keep `Default` derivable: the controller's tests build their objects
    // with `Spec::default()`, so that they compile whatever fields the spec has.
    //
    // CEL rules (controller-gen's `+kubebuilder:validation:XValidation`) are checked by the API
    // server on every write; `make manifests` writes them into the CRD, parses them and checks
    // config/samples/ against them. Derive `kube::KubeSchema` in place of `schemars::JsonSchema`
    // above, then give a field that cannot change once set:
    //     #[x_kube(validation = Rule::new("self == oldSelf").message("region is immutable"))]
    //     pub region: String,
    // and a rule across fields, above `pub struct PrawnSpec` (`self` is the spec):
    //     #[x_kube(validation = Rule::new("self.replicas <= self.size * 2").message("at most twice the size"))]
    //
    // Server-side apply (`--ssa`): every field is an `Option` left out when unset, so that a
    // Prawn with only some fields set is the apply configuration of those fields:
    // `api.patch(name, &PatchParams::apply(MANAGER), &Patch::Apply(&partial))` sets them and
    // takes ownership of nothing else. The test below fails on a field that is always written.
    /// An example field: how many instances to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub size: Option<i32>,
}

// The controller sets `conditions` and `observed_generation` on a copy of the current status and
// applies only those. Give the fields you add `#[serde(default)]`, or make them `Option`s.
/// PrawnStatus defines the observed state of Prawn.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct PrawnStatus {
    /// The latest observations of the resource's state. `Ready` sums them up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<metav1::Condition>,

    /// The `metadata.generation` that the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A default Prawn serializes to no fields at all: applied, it claims nothing.
    #[test]
    fn unset_fields_are_left_out_of_an_apply() {
        let spec = serde_json::to_value(PrawnSpec::default()).unwrap();
        assert_eq!(
            spec,
            serde_json::json!({}),
            "a field of PrawnSpec is written even when unset, so every server-side apply of a partial Prawn would claim it: make it an `Option` with `skip_serializing_if`"
        );
        let status = serde_json::to_value(PrawnStatus::default()).unwrap();
        assert_eq!(
            status,
            serde_json::json!({}),
            "a field of PrawnStatus is written even when unset: make it an `Option` with `skip_serializing_if`"
        );
    }
}
