//! The webhooks of Pod (`core/v1`), one of Kubernetes' own kinds.
//!
//! `rsbuilder create webhook` adds defaulting, validation and conversion here. The handlers take
//! and give typed objects: the runtime reads the reviews, computes the defaulting patch and
//! answers the API server. Each `+rsbuilder:webhook` marker becomes an entry of
//! `config/webhook/manifests.yaml` when you run `make manifests`; keep its `path` equal to the
//! path the handler is registered under.

use rsbuilder_runtime::webhook::{self, Webhooks};

// A webhook on one of Kubernetes' own kinds also sees the operator's own objects of that kind:
// with `failurePolicy=fail`, the manager's pods (or what they need) cannot be admitted while no
// replica serves the webhook. Narrow it in its marker with a label selector, for example
// `,namespaceSelector=kubernetes.io/metadata.name!=project-v4-multigroup-system` to leave the
// operator's namespace out, or `,objectSelector=app.kubernetes.io/name!=project-v4-multigroup`
// (requirements as `kubectl --selector` writes them, separated by `;`, values in `in (a|b)`).

/// The kind these webhooks admit.
type Object = k8s_openapi::api::core::v1::Pod;

// +rsbuilder:scaffold:webhooks.defaulting
/// Where the API server sends Pods to be validated.
pub const VALIDATION_PATH: &str = "/validate--v1-pod";

/// Admits or denies Pods as they are created and updated. Add `delete` to the marker's
/// verbs to have `validate_delete` called too.
// +rsbuilder:webhook:path=/validate--v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups=,resources=pods,verbs=create;update,versions=v1,name=vpod-v1.kb.io,admissionReviewVersions=v1
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

/// Registers the webhooks of Pod with the manager's webhook server.
pub fn register(webhooks: &mut Webhooks) {
    // +rsbuilder:scaffold:register.defaulting
    webhooks.validating(VALIDATION_PATH, Validator);
    // +rsbuilder:scaffold:register.validation
    // +rsbuilder:scaffold:register.conversion
}

#[cfg(test)]
mod tests {
    //! The webhooks through the HTTP layer, with the reviews the API server sends.

    use super::*;

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

    /// A valid Pod.
    // TODO(user): Set the fields your validation requires.
    fn sample() -> Object {
        let mut object = Object::default();
        object.metadata.name = Some("sample".into());
        object.metadata.namespace = Some("default".into());
        object
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
