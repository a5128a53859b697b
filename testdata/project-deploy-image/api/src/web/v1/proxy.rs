//! The `Proxy` kind of `web.learn.com/v1`: an application that runs an
//! image, as a Deployment the controller keeps in line with the spec.
//!
//! The CRD in `config/crd/bases/` is generated from these types: after editing them, run
//! `make manifests`. Doc comments become the schema's descriptions.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

/// ProxySpec defines the desired state of Proxy: what its Deployment runs.
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
    group = "web.learn.com",
    version = "v1",
    kind = "Proxy",
    plural = "proxies",
    shortname = "proxy",
    namespaced,
    status = "ProxyStatus",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Available")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
// Two printer columns are integers; clippy takes the second `type_` for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
pub struct ProxySpec {
    // TODO(user): Add the fields of your application. Run `make manifests` after every change.
    // Keep `Default` derivable: the controller's tests build their objects from JSON and
    // `Spec::default()`.
    /// How many pods run the image; 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 1))]
    pub size: Option<i32>,

    /// The container image; `registry.example.com:5000/team_a/proxy.x:v1.2_rc-3` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("default" = "registry.example.com:5000/team_a/proxy.x:v1.2_rc-3"))]
    pub image: Option<String>,

    /// The compute resources of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<corev1::ResourceRequirements>,

    /// Environment variables of the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<corev1::EnvVar>,

    /// The ports the container listens on; port 8080 when unset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("default" = [{"containerPort": 8080, "protocol": "TCP"}]))]
    pub ports: Vec<corev1::ContainerPort>,
}

// The controller sets the fields below on a copy of the current status and applies only those.
// Give the fields you add `#[serde(default)]`, or make them `Option`s.
/// ProxyStatus defines the observed state of Proxy.
#[derive(
    serde::Deserialize, serde::Serialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    /// The latest observations of the application: `Available`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<metav1::Condition>,

    /// The `metadata.generation` that the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// How many pods are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// How many pods have been ready for long enough to serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
}
