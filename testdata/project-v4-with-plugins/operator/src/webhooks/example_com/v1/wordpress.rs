//! The webhooks of Wordpress (`example.com.testproject.org/v1`).
//!
//! `rsbuilder create webhook` adds defaulting, validation and conversion here. The handlers take
//! and give typed objects: the runtime reads the reviews, computes the defaulting patch and
//! answers the API server. Each `+rsbuilder:webhook` marker becomes an entry of
//! `config/webhook/manifests.yaml` when you run `make manifests`; keep its `path` equal to the
//! path the handler is registered under.

use rsbuilder_runtime::webhook::{self, Webhooks};

/// The kind these webhooks admit.
type Object = ::project_v4_with_plugins_api::example_com::v1::Wordpress;

// +rsbuilder:scaffold:webhooks.defaulting
// +rsbuilder:scaffold:webhooks.validation
/// Converts Wordpress between its versions through this one, the hub: the storage version.
/// The API server posts ConversionReviews to `/convert` (the CRD's `spec.conversion`, set by
/// `config/crd/patches/webhook_in_wordpresses.yaml`).
pub fn conversion() -> webhook::Conversion {
    let mut conversion = webhook::Conversion::hub::<Object>();
    conversion.spoke(v2::to_hub, v2::from_hub);
    // +rsbuilder:scaffold:spokes
    conversion
}

/// The conversions between Wordpress v1, the hub, and v2.
// TODO(user): Convert the fields whose name or type differ between the versions. Fields with
// the same name and shape are copied, and a field that the other version cannot hold is an
// error; keep round trips lossless, for instance with an annotation.
pub mod v2 {
    use rsbuilder_runtime::webhook;

    type Hub = super::Object;
    type Spoke = ::project_v4_with_plugins_api::example_com::v2::Wordpress;

    /// Wordpress v2 to v1.
    pub fn to_hub(spoke: Spoke) -> anyhow::Result<Hub> {
        Ok(Hub {
            metadata: spoke.metadata,
            spec: webhook::same_fields(spoke.spec)?,
            status: spoke.status.map(webhook::same_fields).transpose()?,
        })
    }

    /// Wordpress v1 to v2.
    pub fn from_hub(hub: Hub) -> anyhow::Result<Spoke> {
        Ok(Spoke {
            metadata: hub.metadata,
            spec: webhook::same_fields(hub.spec)?,
            status: hub.status.map(webhook::same_fields).transpose()?,
        })
    }
}
// +rsbuilder:scaffold:spoke-modules

// +rsbuilder:scaffold:webhooks.conversion

/// Registers the webhooks of Wordpress with the manager's webhook server.
pub fn register(webhooks: &mut Webhooks) {
    // +rsbuilder:scaffold:register.defaulting
    // +rsbuilder:scaffold:register.validation
    webhooks.conversion(conversion());
    // +rsbuilder:scaffold:register.conversion
}

#[cfg(test)]
mod tests {
    //! The webhooks through the HTTP layer, with the reviews the API server sends.

    use super::*;

    type Spec = ::project_v4_with_plugins_api::example_com::v1::wordpress::WordpressSpec;

    /// Every webhook of this module.
    fn webhooks() -> Webhooks {
        let mut webhooks = Webhooks::new();
        register(&mut webhooks);
        webhooks
    }

    /// The output of `future`, which must come within 5 s: a test fails rather than hangs.
    async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(5), future)
            .await
            .expect("the webhook answered within 5 s")
    }

    /// A valid Wordpress.
    // TODO(user): Set the fields your validation requires.
    fn sample() -> Object {
        let mut object = Object::new("sample", Spec::default());
        object.metadata.namespace = Some("default".into());
        object
    }

    // +rsbuilder:scaffold:tests.defaulting
    // +rsbuilder:scaffold:tests.validation
    /// Converts the sample to `spoke` and back, which must give the sample again.
    async fn assert_round_trip(spoke: &str) {
        let webhooks = webhooks();
        let hub_version = "example.com.testproject.org/v1";
        let hub = serde_json::to_value(sample()).unwrap();
        let there = within(webhooks.convert(spoke, vec![hub.clone()]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(there[0]["apiVersion"], spoke);
        let back = within(webhooks.convert(hub_version, there))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, vec![hub], "to {spoke} and back");
    }

    #[tokio::test]
    async fn conversion_answers_a_malformed_review_with_400() {
        let response = within(webhooks().call(webhook::CONVERT_PATH, "{")).await;
        assert_eq!(response.status(), 400);
    }

    #[tokio::test]
    async fn conversion_round_trips_through_v2() {
        assert_round_trip("example.com.testproject.org/v2").await;
    }
    // +rsbuilder:scaffold:conversion-tests

    // +rsbuilder:scaffold:tests.conversion
}
