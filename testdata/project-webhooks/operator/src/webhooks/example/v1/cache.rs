//! The webhooks of Cache (`example.example.com/v1`).
//!
//! `rsbuilder create webhook` adds defaulting, validation and conversion here. The handlers take
//! and give typed objects: the runtime reads the reviews, computes the defaulting patch and
//! answers the API server. Each `+rsbuilder:webhook` marker becomes an entry of
//! `config/webhook/manifests.yaml` when you run `make manifests`; keep its `path` equal to the
//! path the handler is registered under.

use rsbuilder_runtime::webhook::{self, Webhooks};

/// The kind these webhooks admit.
type Object = ::myoperator_api::example::v1::Cache;

/// Where the API server sends Caches to be defaulted.
pub const DEFAULTING_PATH: &str = "/default-cache";

/// Sets the defaults of Caches as they are created and updated.
// +rsbuilder:webhook:path=/default-cache,mutating=true,failurePolicy=fail,sideEffects=None,groups=example.example.com,resources=caches,verbs=create;update,versions=v1,name=mcache-v1.kb.io,admissionReviewVersions=v1
pub struct Defaulter;

impl webhook::Defaulter<Object> for Defaulter {
    async fn default(&self, object: &mut Object) -> Result<(), webhook::Denied> {
        tracing::debug!(name = ?object.metadata.name, "defaulting");
        // TODO(user): Set the fields users may leave out. The API server gets the difference
        // as a JSON patch. Return `Err(webhook::Denied::new("..."))` to refuse the object.
        Ok(())
    }
}

// +rsbuilder:scaffold:webhooks.defaulting
/// Where the API server sends Caches to be validated.
pub const VALIDATION_PATH: &str = "/validate-example-example-com-v1-cache";

/// Admits or denies Caches as they are created and updated. Add `delete` to the marker's
/// verbs to have `validate_delete` called too.
// +rsbuilder:webhook:path=/validate-example-example-com-v1-cache,mutating=false,failurePolicy=fail,sideEffects=None,groups=example.example.com,resources=caches,verbs=create;update,versions=v1,name=vcache-v1.kb.io,admissionReviewVersions=v1
pub struct Validator;

// TODO(user): Check what the CRD's schema cannot express. Deny with
// `Err(webhook::Denied::invalid("..."))`: `kubectl` shows the message. Return warnings for
// `kubectl` to print while it admits the object.
impl webhook::Validator<Object> for Validator {
    async fn validate_create(&self, object: &Object) -> webhook::Verdict {
        tracing::debug!(name = ?object.metadata.name, "validating a creation");
        Ok(Vec::new())
    }

    async fn validate_update(&self, _old: &Object, new: &Object) -> webhook::Verdict {
        tracing::debug!(name = ?new.metadata.name, "validating an update");
        Ok(Vec::new())
    }

    async fn validate_delete(&self, object: &Object) -> webhook::Verdict {
        tracing::debug!(name = ?object.metadata.name, "validating a deletion");
        Ok(Vec::new())
    }
}

// +rsbuilder:scaffold:webhooks.validation
/// Converts Cache between its versions through this one, the hub: the storage version.
/// The API server posts ConversionReviews to `/convert` (the CRD's `spec.conversion`, set by
/// `config/crd/patches/webhook_in_caches.yaml`).
pub fn conversion() -> webhook::Conversion {
    let mut conversion = webhook::Conversion::hub::<Object>();
    conversion.spoke(v2::to_hub, v2::from_hub);
    conversion.spoke(v3::to_hub, v3::from_hub);
    // +rsbuilder:scaffold:spokes
    conversion
}

/// The conversions between Cache v1, the hub, and v2.
// TODO(user): Convert the fields whose name or type differ between the versions. Fields with
// the same name and shape are copied, and a field that the other version cannot hold is an
// error; keep round trips lossless, for instance with an annotation.
pub mod v2 {
    use rsbuilder_runtime::webhook;

    type Hub = super::Object;
    type Spoke = ::myoperator_api::example::v2::Cache;

    /// Cache v2 to v1.
    pub fn to_hub(spoke: Spoke) -> anyhow::Result<Hub> {
        Ok(Hub {
            metadata: spoke.metadata,
            spec: webhook::same_fields(spoke.spec)?,
            status: spoke.status.map(webhook::same_fields).transpose()?,
        })
    }

    /// Cache v1 to v2.
    pub fn from_hub(hub: Hub) -> anyhow::Result<Spoke> {
        Ok(Spoke {
            metadata: hub.metadata,
            spec: webhook::same_fields(hub.spec)?,
            status: hub.status.map(webhook::same_fields).transpose()?,
        })
    }
}

/// The conversions between Cache v1, the hub, and v3.
// TODO(user): Convert the fields whose name or type differ between the versions. Fields with
// the same name and shape are copied, and a field that the other version cannot hold is an
// error; keep round trips lossless, for instance with an annotation.
pub mod v3 {
    use rsbuilder_runtime::webhook;

    type Hub = super::Object;
    type Spoke = ::myoperator_api::example::v3::Cache;

    /// Cache v3 to v1.
    pub fn to_hub(spoke: Spoke) -> anyhow::Result<Hub> {
        Ok(Hub {
            metadata: spoke.metadata,
            spec: webhook::same_fields(spoke.spec)?,
            status: spoke.status.map(webhook::same_fields).transpose()?,
        })
    }

    /// Cache v1 to v3.
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

/// Registers the webhooks of Cache with the manager's webhook server.
pub fn register(webhooks: &mut Webhooks) {
    webhooks.defaulting(DEFAULTING_PATH, Defaulter);
    // +rsbuilder:scaffold:register.defaulting
    webhooks.validating(VALIDATION_PATH, Validator);
    // +rsbuilder:scaffold:register.validation
    webhooks.conversion(conversion());
    // +rsbuilder:scaffold:register.conversion
}

#[cfg(test)]
mod tests {
    //! The webhooks through the HTTP layer, with the reviews the API server sends.

    use super::*;

    type Spec = ::myoperator_api::example::v1::cache::CacheSpec;

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

    /// A valid Cache.
    // TODO(user): Set the fields your validation requires.
    fn sample() -> Object {
        let mut object = Object::new("sample", Spec::default());
        object.metadata.namespace = Some("default".into());
        object
    }

    #[tokio::test]
    async fn defaulting_a_defaulted_object_changes_nothing() {
        let webhooks = webhooks();
        let object = sample();
        let first = within(webhooks.review(DEFAULTING_PATH, &webhook::review::create(&object)))
            .await
            .unwrap();
        assert!(first.allowed, "denied: {}", first.message);
        let defaulted = first.apply(&object).unwrap();
        let again = within(webhooks.review(DEFAULTING_PATH, &webhook::review::create(&defaulted)))
            .await
            .unwrap();
        assert!(again.allowed, "denied: {}", again.message);
        assert_eq!(again.patch, None);
    }

    #[tokio::test]
    async fn defaulting_patches_the_object_as_the_api_server_sends_it() {
        // The API server sends `creationTimestamp: null`, and fields this version of the type may
        // not know: the patch must apply to that object, and keep them.
        let mut sent = serde_json::to_value(sample()).unwrap();
        sent["metadata"]["creationTimestamp"] = serde_json::Value::Null;
        sent["unknownField"] = "kept".into();
        let review = webhook::review::create_json::<Object>(sent.clone());
        let answer = within(webhooks().review(DEFAULTING_PATH, &review))
            .await
            .unwrap();
        assert!(answer.allowed, "denied: {}", answer.message);
        let stored = answer.apply_json(&sent).unwrap();
        assert_eq!(stored["unknownField"], "kept");
    }

    #[tokio::test]
    async fn defaulting_answers_a_malformed_review_with_400() {
        let response = within(webhooks().call(DEFAULTING_PATH, "{")).await;
        assert_eq!(response.status(), 400);
    }

    // +rsbuilder:scaffold:tests.defaulting
    // TODO(user): Add a test for each way your validation denies, with its message.
    #[tokio::test]
    async fn validation_admits_the_sample() {
        let webhooks = webhooks();
        let object = sample();
        for review in [
            webhook::review::create(&object),
            webhook::review::update(&object, &object),
            webhook::review::delete(&object),
        ] {
            let answer = within(webhooks.review(VALIDATION_PATH, &review))
                .await
                .unwrap();
            assert!(answer.allowed, "denied: {}", answer.message);
        }
    }

    #[tokio::test]
    async fn validation_answers_a_malformed_review_with_400() {
        let response = within(webhooks().call(VALIDATION_PATH, "{")).await;
        assert_eq!(response.status(), 400);
    }

    // +rsbuilder:scaffold:tests.validation
    /// Converts the sample to `spoke` and back, which must give the sample again.
    async fn assert_round_trip(spoke: &str) {
        let webhooks = webhooks();
        let hub_version = "example.example.com/v1";
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
        assert_round_trip("example.example.com/v2").await;
    }

    #[tokio::test]
    async fn conversion_round_trips_through_v3() {
        assert_round_trip("example.example.com/v3").await;
    }
    // +rsbuilder:scaffold:conversion-tests

    // +rsbuilder:scaffold:tests.conversion
}
