//! The webhooks of Defaulter (`ops.example.com/v1`).
//!
//! `rsbuilder create webhook` adds defaulting, validation and conversion here. The handlers take
//! and give typed objects: the runtime reads the reviews, computes the defaulting patch and
//! answers the API server. Each `+rsbuilder:webhook` marker becomes an entry of
//! `config/webhook/manifests.yaml` when you run `make manifests`; keep its `path` equal to the
//! path the handler is registered under.

use rsbuilder_runtime::webhook::{self, Webhooks};

/// The kind these webhooks admit.
type Object = ::names_operator_api::ops::v1::Defaulter;

/// Where the API server sends Defaulters to be defaulted.
pub const DEFAULTING_PATH: &str = "/mutate-ops-example-com-v1-defaulter";

/// Sets the defaults of Defaulters as they are created and updated.
// +rsbuilder:webhook:path=/mutate-ops-example-com-v1-defaulter,mutating=true,failurePolicy=fail,sideEffects=None,groups=ops.example.com,resources=defaulters,verbs=create;update,versions=v1,name=mdefaulter-v1.kb.io,admissionReviewVersions=v1
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
/// Where the API server sends Defaulters to be validated.
pub const VALIDATION_PATH: &str = "/validate-ops-example-com-v1-defaulter";

/// Admits or denies Defaulters as they are created and updated. Add `delete` to the marker's
/// verbs to have `validate_delete` called too.
// +rsbuilder:webhook:path=/validate-ops-example-com-v1-defaulter,mutating=false,failurePolicy=fail,sideEffects=None,groups=ops.example.com,resources=defaulters,verbs=create;update,versions=v1,name=vdefaulter-v1.kb.io,admissionReviewVersions=v1
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
// +rsbuilder:scaffold:webhooks.conversion

/// Registers the webhooks of Defaulter with the manager's webhook server.
pub fn register(webhooks: &mut Webhooks) {
    webhooks.defaulting(DEFAULTING_PATH, Defaulter);
    // +rsbuilder:scaffold:register.defaulting
    webhooks.validating(VALIDATION_PATH, Validator);
    // +rsbuilder:scaffold:register.validation
    // +rsbuilder:scaffold:register.conversion
}

#[cfg(test)]
mod tests {
    //! The webhooks through the HTTP layer, with the reviews the API server sends.

    use super::*;

    type Spec = ::names_operator_api::ops::v1::defaulter::DefaulterSpec;

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

    /// A valid Defaulter.
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
    // +rsbuilder:scaffold:tests.conversion
}
