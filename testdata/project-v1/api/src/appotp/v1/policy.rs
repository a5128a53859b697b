//! The `Policy` kind of `appotp.learn.com/v1`.
//!
//! The CRD in `config/crd/bases/` is generated from these types: after editing them, run
//! `make manifests`. Doc comments become the schema's descriptions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

/// PolicySpec defines the desired state of Policy.
#[derive(
    kube::CustomResource,
    serde::Deserialize,
    serde::Serialize,
    Clone,
    Debug,
    Default,
    PartialEq,
    kube::KubeSchema,
)]
#[kube(
    group = "appotp.learn.com",
    version = "v1",
    kind = "Policy",
    plural = "policies",
    shortname = "policy",
    namespaced,
    status = "PolicyStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Replicas to run",
        priority = 1
    ),
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
#[x_kube(validation = Rule::new("self.replicas <= self.size * 2").message("too many replicas"))]
pub struct PolicySpec {
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
    // and a rule across fields, above `pub struct PolicySpec` (`self` is the spec):
    //     #[x_kube(validation = Rule::new("self.replicas <= self.size * 2").message("at most twice the size"))]
    /// An example field: how many instances to run.
    #[schemars(range(min = 1, max = 10))]
    pub size: i32,

    /// Replicas to run: at most twice the size.
    pub replicas: i32,

    /// Where the policy applies; it cannot change once set.
    #[x_kube(validation = Rule::new("self == oldSelf").message("region is immutable"))]
    pub region: String,
}

// The controller sets `conditions` and `observed_generation` on a copy of the current status and
// applies only those. Give the fields you add `#[serde(default)]`, or make them `Option`s.
/// PolicyStatus defines the observed state of Policy.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// The latest observations of the resource's state. `Ready` sums them up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<metav1::Condition>,

    /// The `metadata.generation` that the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Replicas running, for the scale subresource.
    #[serde(default)]
    pub replicas: i32,
}
