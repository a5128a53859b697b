//! Admission and conversion webhooks: the HTTPS server of `rsbuilder create webhook`.
//!
//! A project registers typed handlers on a [`Webhooks`] router, and the [`Manager`] serves them
//! on `--webhook-port` with the certificate of `--webhook-cert-path`, on every replica:
//! - a [`Defaulter`] changes the object; the server answers with the RFC 6902 patch from the
//!   object before to the object after, so nobody writes patches by hand;
//! - a [`Validator`] sees creates, updates (old and new object) and deletes, and answers with
//!   warnings or a [`Denied`];
//! - a [`Conversion`] converts a kind between its versions through its hub (storage) version,
//!   on `/convert`.
//!
//! A body that is not a review is answered with `400 Bad Request` and the reason; a body that is
//! not `application/json` with `415`; a body over [`MAX_BODY_BYTES`] with `413`; a handler that
//! takes longer than the timeout with `503`; a handler that panics with a review that denies the
//! request with code 500, as controller-runtime recovers panics.
//!
//! # Memory
//! The webhook port takes any client, so what one request may cost is bounded:
//! - the objects of a review are read from its raw bytes straight into the handler's type, with
//!   no generic JSON tree between (a tree of a numeric array costs 16 bytes per byte of JSON);
//! - the defaulting patch is computed from the raw object and the defaulted object as JSON text,
//!   parsing only the parts that differ ([`patch`]);
//! - the bodies of the reviews in flight are bounded together (default
//!   [`DEFAULT_MAX_IN_FLIGHT_BYTES`]), counted as their bytes arrive, so a client that announces
//!   a body and sends nothing holds nothing. A review whose next bytes do not fit is answered
//!   `429 Too Many Requests` at once and gives its bytes back, except the oldest review in
//!   flight, which waits for them: the bound always lets one review through, however many
//!   arrive together. A body that takes longer than [`BODY_READ_TIMEOUT`] to arrive gets `408`.
//!
//! [`Manager`]: crate::Manager

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;
use futures::FutureExt as _;
use http_body_util::BodyExt as _;
use kube::core::admission::Operation;
use kube::core::conversion::ConversionReview;
use kube::core::{Resource, Status};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub mod certs;
mod patch;

/// The port webhooks are served on unless `--webhook-port` says otherwise.
pub const DEFAULT_PORT: u16 = 9443;
/// The path conversion reviews are posted to, as in the CRD's `spec.conversion.webhook`.
pub const CONVERT_PATH: &str = "/convert";
/// The largest request body accepted: controller-runtime's limit, above the API server's own
/// limit on objects.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// How long a review may take, its body read included: the longest `timeoutSeconds` the API
/// server allows, after which nobody waits for the answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the body of a review may take to arrive, once its headers have: the API server
/// sends it at once; a client that trickles it gets `408`.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How many bytes of review bodies may be in flight at once, unless
/// [`Webhooks::max_in_flight_bytes`] says otherwise: one review of the largest size and half as
/// much again. A review costs about its body once more, plus its typed object (`tests/memory.rs`
/// measures 6× its body at worst, for a large `Vec<i64>` of small numbers), so the webhook
/// server stays within about 70 MiB, inside the scaffolded container's 128 MiB limit.
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = MAX_BODY_BYTES + MAX_BODY_BYTES / 2;

/// Warnings for the client, which `kubectl` prints as `Warning: ...`.
pub type Warnings = Vec<String>;

/// What a validation decides: admit, with warnings, or deny.
pub type Verdict = Result<Warnings, Denied>;

/// A refusal: the API server rejects the request, and `kubectl` shows
/// `admission webhook "<name>" denied the request: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// What is wrong, for people.
    pub message: String,
    /// A `StatusReason` for programs: `Forbidden`, `Invalid`, ...
    pub reason: String,
    /// The HTTP status code the API server answers with.
    pub code: u16,
}

impl Denied {
    /// The request is refused: `403 Forbidden`, as controller-runtime's `admission.Denied`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: "Forbidden".into(),
            code: 403,
        }
    }

    /// The object is invalid: `422 Invalid`, as an API server's own validation.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: "Invalid".into(),
            code: 422,
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Denied {}

/// Sets defaults on objects of kind `K` as they are created and updated (a mutating webhook).
pub trait Defaulter<K>: Send + Sync + 'static {
    /// Changes `object` in place; the server sends the API server the difference as a patch.
    /// An error denies the request.
    fn default(&self, object: &mut K) -> impl Future<Output = Result<(), Denied>> + Send;
}

/// Admits or denies objects of kind `K` (a validating webhook).
pub trait Validator<K>: Send + Sync + 'static {
    /// Checks an object being created.
    fn validate_create(&self, object: &K) -> impl Future<Output = Verdict> + Send;

    /// Checks an update from `old` to `new`.
    fn validate_update(&self, old: &K, new: &K) -> impl Future<Output = Verdict> + Send;

    /// Checks an object being deleted; called only when the webhook's `verbs` list `delete`.
    fn validate_delete(&self, object: &K) -> impl Future<Output = Verdict> + Send;
}

/// One step of a conversion: an object's JSON in, the converted object's JSON out.
type Convert = Arc<dyn Fn(&RawValue) -> anyhow::Result<Box<RawValue>> + Send + Sync>;

/// The versions of one kind and how each converts to and from its hub, the storage version.
pub struct Conversion {
    group: String,
    kind: String,
    /// The CRD's name, `<plural>.<group>`.
    crd: String,
    hub: String,
    /// Per spoke version: (to hub, from hub).
    spokes: BTreeMap<String, (Convert, Convert)>,
}

impl fmt::Debug for Conversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conversion")
            .field("group", &self.group)
            .field("kind", &self.kind)
            .field("hub", &self.hub)
            .field("spokes", &self.spokes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Conversion {
    /// A kind whose hub is `H`; add its other versions with [`Conversion::spoke`]:
    ///
    /// ```text
    /// let mut conversion = Conversion::hub::<v1::Application>();
    /// conversion.spoke(v2::to_hub, v2::from_hub);
    /// webhooks.conversion(conversion);
    /// ```
    pub fn hub<H>() -> Self
    where
        H: Resource<DynamicType = ()>,
    {
        Self {
            group: H::group(&()).into_owned(),
            kind: H::kind(&()).into_owned(),
            crd: format!("{}.{}", H::plural(&()), H::group(&())),
            hub: H::version(&()).into_owned(),
            spokes: BTreeMap::new(),
        }
    }

    /// Adds the version `S`, converted to the hub `H` by `to_hub` and back by `from_hub`.
    ///
    /// # Panics
    /// When `S` is another kind than the hub, or the hub itself.
    pub fn spoke<H, S>(
        &mut self,
        to_hub: impl Fn(S) -> anyhow::Result<H> + Send + Sync + 'static,
        from_hub: impl Fn(H) -> anyhow::Result<S> + Send + Sync + 'static,
    ) -> &mut Self
    where
        H: Resource<DynamicType = ()> + Serialize + DeserializeOwned + 'static,
        S: Resource<DynamicType = ()> + Serialize + DeserializeOwned + 'static,
    {
        assert!(
            S::group(&()) == self.group && S::kind(&()) == self.kind,
            "{} is not a version of {}",
            S::api_version(&()),
            self.kind
        );
        assert!(
            H::version(&()) == self.hub && S::version(&()) != self.hub,
            "a spoke of {} must be another version than its hub {}",
            self.kind,
            self.hub
        );
        let to_hub: Convert = Arc::new(move |object| {
            let spoke: S = serde_json::from_str(object.get())?;
            Ok(serde_json::value::to_raw_value(&to_hub(spoke)?)?)
        });
        let from_hub: Convert = Arc::new(move |object| {
            let hub: H = serde_json::from_str(object.get())?;
            Ok(serde_json::value::to_raw_value(&from_hub(hub)?)?)
        });
        self.spokes
            .insert(S::version(&()).into_owned(), (to_hub, from_hub));
        self
    }

    /// Converts `object`, of version `from`, to version `to`.
    fn convert(&self, object: &RawValue, from: &str, to: &str) -> anyhow::Result<Box<RawValue>> {
        if from == to {
            return Ok(object.to_owned());
        }
        let step = |version: &str| {
            self.spokes.get(version).ok_or_else(|| {
                anyhow::anyhow!(
                    "{} has no version {version}: it converts {}",
                    self.kind,
                    self.versions().join(", ")
                )
            })
        };
        let hub = if from == self.hub {
            Cow::Borrowed(object)
        } else {
            Cow::Owned((step(from)?.0)(object)?)
        };
        if to == self.hub {
            Ok(hub.into_owned())
        } else {
            (step(to)?.1)(&hub)
        }
    }

    fn versions(&self) -> Vec<&str> {
        std::iter::once(self.hub.as_str())
            .chain(self.spokes.keys().map(String::as_str))
            .collect()
    }
}

/// `from` as a `T`, field by field by name: the conversion of a spec or a status between
/// versions whose fields have the same names and shapes. Fails, naming the field, when `T` has
/// no place for a value of `from`, or a field `T` requires is missing, so that no conversion
/// loses data silently.
pub fn same_fields<F: Serialize, T: Serialize + DeserializeOwned>(from: F) -> anyhow::Result<T> {
    let value = serde_json::to_value(&from)?;
    let converted: T = serde_json::from_value(value.clone())
        .map_err(|error| anyhow::anyhow!("the fields do not convert: {error}"))?;
    let back = serde_json::to_value(&converted)?;
    if let Some(lost) = lost_field(&value, &back, "") {
        anyhow::bail!("the field `{lost}` has no place in the other version: convert it by hand");
    }
    Ok(converted)
}

/// The first field of `from` that `to` lacks or holds otherwise, as a dotted path.
fn lost_field(from: &serde_json::Value, to: &serde_json::Value, at: &str) -> Option<String> {
    match (from, to) {
        (serde_json::Value::Object(from), serde_json::Value::Object(to)) => {
            from.iter().find_map(|(key, value)| {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match to.get(key) {
                    None if value.is_null() => None,
                    None => Some(path),
                    Some(other) => lost_field(value, other, &path),
                }
            })
        }
        (from, to) if from == to => None,
        _ => Some(at.to_owned()),
    }
}

type Handler = Arc<dyn Fn(Bytes) -> futures::future::BoxFuture<'static, Response> + Send + Sync>;

/// The webhooks of a project: typed handlers by path. Serve them with
/// [`Manager::webhooks`](crate::Manager::webhooks); test them with [`Webhooks::call`].
#[derive(Clone)]
pub struct Webhooks {
    handlers: BTreeMap<String, Handler>,
    conversions: BTreeMap<(String, String), Arc<Conversion>>,
    timeout: Duration,
    max_in_flight_bytes: usize,
}

impl Default for Webhooks {
    fn default() -> Self {
        Self {
            handlers: BTreeMap::new(),
            conversions: BTreeMap::new(),
            timeout: DEFAULT_TIMEOUT,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
        }
    }
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks")
            .field("paths", &self.paths())
            .field("timeout", &self.timeout)
            .field("max_in_flight_bytes", &self.max_in_flight_bytes)
            .finish()
    }
}

impl Webhooks {
    /// No webhooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty() && self.conversions.is_empty()
    }

    /// The names of the CRDs converted at [`CONVERT_PATH`], `<plural>.<group>`.
    pub fn converted_crds(&self) -> Vec<String> {
        self.conversions
            .values()
            .map(|conversion| conversion.crd.clone())
            .collect()
    }

    /// The paths served, in order.
    pub fn paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self.handlers.keys().map(String::as_str).collect();
        if !self.conversions.is_empty() {
            paths.push(CONVERT_PATH);
            paths.sort_unstable();
        }
        paths
    }

    /// How long one review may take, its body read included (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }

    /// How many bytes of review bodies may be in flight at once, on every path together
    /// (default [`DEFAULT_MAX_IN_FLIGHT_BYTES`], at least [`MAX_BODY_BYTES`]). A review whose
    /// bytes would go past it is answered `429 Too Many Requests`.
    pub fn max_in_flight_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_in_flight_bytes = bytes.clamp(MAX_BODY_BYTES, Semaphore::MAX_PERMITS);
        self
    }

    /// Serves the mutating webhook of kind `K` at `path`. Deletions and connections are
    /// admitted without calling the defaulter: there is nothing to default.
    ///
    /// # Panics
    /// When `path` is taken.
    pub fn defaulting<K, D>(&mut self, path: &str, defaulter: D) -> &mut Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + 'static,
        D: Defaulter<K>,
    {
        let defaulter = Arc::new(defaulter);
        self.add(
            path,
            Arc::new(move |body| {
                let defaulter = defaulter.clone();
                Box::pin(async move {
                    admit(body, move |request: Objects| async move {
                        if matches!(request.operation, Operation::Delete | Operation::Connect) {
                            return Ok((Vec::new(), Vec::new()));
                        }
                        let raw = request.object.as_ref().map(raw_json).ok_or_else(|| {
                            Denied::invalid("the review has no object to default")
                        })?;
                        let mut object: K = read(raw)?;
                        defaulter.default(&mut object).await?;
                        let after = serde_json::value::to_raw_value(&object).map_err(|error| {
                            Denied::invalid(format!("cannot serialize the object: {error}"))
                        })?;
                        drop(object);
                        let ops = patch::diff(raw, &after, || {
                            serde_json::value::to_raw_value(
                                &read::<K>(raw)
                                    .map_err(|denied| serde::ser::Error::custom(denied.message))?,
                            )
                        })
                        .map_err(|error| {
                            Denied::invalid(format!("cannot compute the patch: {error}"))
                        })?;
                        Ok((Vec::new(), ops))
                    })
                    .await
                })
            }),
        )
    }

    /// Serves the validating webhook of kind `K` at `path`.
    ///
    /// # Panics
    /// When `path` is taken.
    pub fn validating<K, V>(&mut self, path: &str, validator: V) -> &mut Self
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
        V: Validator<K>,
    {
        let validator = Arc::new(validator);
        self.add(
            path,
            Arc::new(move |body| {
                let validator = validator.clone();
                Box::pin(async move {
                    admit(body, move |request: Objects| async move {
                        let operation = request.operation.clone();
                        let missing = |which: &str| {
                            Denied::invalid(format!("the {operation:?} review has no {which}"))
                        };
                        let object = || -> Result<K, Denied> {
                            let raw = request.object.as_ref().map(raw_json);
                            read(raw.ok_or_else(|| missing("object"))?)
                        };
                        let old_object = || -> Result<K, Denied> {
                            let raw = request.old_object.as_ref().map(raw_json);
                            read(raw.ok_or_else(|| missing("oldObject"))?)
                        };
                        let warnings = match request.operation {
                            Operation::Create => validator.validate_create(&object()?).await?,
                            Operation::Update => {
                                let (new, old) = (object()?, old_object()?);
                                validator.validate_update(&old, &new).await?
                            }
                            Operation::Delete => validator.validate_delete(&old_object()?).await?,
                            Operation::Connect => Vec::new(),
                        };
                        Ok((warnings, Vec::new()))
                    })
                    .await
                })
            }),
        )
    }

    /// Serves the conversions of one kind at [`CONVERT_PATH`], next to those of other kinds.
    ///
    /// # Panics
    /// When the kind has a conversion already.
    pub fn conversion(&mut self, conversion: Conversion) -> &mut Self {
        let key = (conversion.group.clone(), conversion.kind.clone());
        assert!(
            !self.conversions.contains_key(&key),
            "the conversion of {} is registered twice",
            conversion.kind
        );
        self.conversions.insert(key, Arc::new(conversion));
        self
    }

    fn add(&mut self, path: &str, handler: Handler) -> &mut Self {
        assert!(
            path.starts_with('/') && path != CONVERT_PATH,
            "invalid webhook path `{path}`: it must start with `/` and not be {CONVERT_PATH}"
        );
        let previous = self.handlers.insert(path.to_owned(), handler);
        assert!(
            previous.is_none(),
            "the webhook path `{path}` is registered twice"
        );
        self
    }

    /// The HTTP routes: `POST` on every path, with the body limits and the timeout. The
    /// bound on bytes in flight is shared by the routes of one router.
    pub fn router(&self) -> Router {
        let limits = Limits {
            timeout: self.timeout,
            in_flight: Arc::new(Semaphore::new(self.max_in_flight_bytes)),
            arrivals: Arc::default(),
        };
        let mut router = Router::new();
        for (path, handler) in &self.handlers {
            router = router.route(path, post(serve(handler.clone(), limits.clone())));
        }
        if !self.conversions.is_empty() {
            let conversions = Arc::new(self.conversions.clone());
            let handler: Handler = Arc::new(move |body| {
                let conversions = conversions.clone();
                Box::pin(async move { convert(&conversions, body) })
            });
            router = router.route(CONVERT_PATH, post(serve(handler, limits)));
        }
        router
    }

    /// Posts `body` to `path` through the router, as the API server would, minus TLS: for tests.
    pub async fn call(&self, path: &str, body: impl Into<Bytes>) -> Response<Bytes> {
        let body = body.into();
        let request = axum::http::Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .expect("a valid request");
        Self::send(self.router(), request).await
    }

    /// Sends `request` through `router` and reads the whole answer: for tests that set their
    /// own headers, or share one router (and its bound on bytes in flight) between requests.
    pub async fn send(router: Router, request: axum::http::Request<Body>) -> Response<Bytes> {
        use tower::ServiceExt as _;
        let response = router
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("the body of a response in memory");
        Response::from_parts(parts, bytes)
    }

    /// Posts the AdmissionReview `review` to `path` and returns the answer: for tests. Fails
    /// when the server answers anything but a review.
    pub async fn review(
        &self,
        path: &str,
        review: &serde_json::Value,
    ) -> anyhow::Result<Admission> {
        let response = self.call(path, serde_json::to_vec(review)?).await;
        anyhow::ensure!(
            response.status() == StatusCode::OK,
            "{path} answered {}: {}",
            response.status(),
            String::from_utf8_lossy(response.body())
        );
        let review: ReadAnswer = serde_json::from_slice(response.body())?;
        anyhow::ensure!(
            review.kind == "AdmissionReview",
            "{path} answered a {} rather than an AdmissionReview",
            review.kind
        );
        let response = review
            .response
            .ok_or_else(|| anyhow::anyhow!("{path} answered a review without a response"))?;
        let patch = match (&response.patch, response.patch_type.as_deref()) {
            (None, None) => None,
            (Some(patch), Some("JSONPatch")) => {
                let bytes = BASE64_STANDARD
                    .decode(patch)
                    .map_err(|error| anyhow::anyhow!("{path}: the patch is not base64: {error}"))?;
                Some(serde_json::from_slice(&bytes)?)
            }
            (patch, patch_type) => {
                anyhow::bail!("{path} answered the patch {patch:?} of type {patch_type:?}")
            }
        };
        Ok(Admission {
            uid: response.uid,
            allowed: response.allowed,
            message: response.status.message,
            reason: response.status.reason,
            code: response.status.code,
            warnings: response.warnings.unwrap_or_default(),
            patch,
        })
    }

    /// Posts a ConversionReview asking for `objects` in `desired_api_version` to
    /// [`CONVERT_PATH`]; the converted objects, or the failure's message: for tests.
    pub async fn convert(
        &self,
        desired_api_version: &str,
        objects: Vec<serde_json::Value>,
    ) -> anyhow::Result<Result<Vec<serde_json::Value>, String>> {
        let review = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "00000000-0000-0000-0000-000000000000",
                "desiredAPIVersion": desired_api_version,
                "objects": objects,
            },
        });
        let response = self.call(CONVERT_PATH, serde_json::to_vec(&review)?).await;
        anyhow::ensure!(
            response.status() == StatusCode::OK,
            "{CONVERT_PATH} answered {}: {}",
            response.status(),
            String::from_utf8_lossy(response.body())
        );
        let review: ConversionReview = serde_json::from_slice(response.body())?;
        let response = review
            .response
            .ok_or_else(|| anyhow::anyhow!("{CONVERT_PATH} answered without a response"))?;
        Ok(
            if response.result.status == Some(kube::core::response::StatusSummary::Success) {
                Ok(response.converted_objects)
            } else {
                Err(response.result.message)
            },
        )
    }
}

/// An AdmissionReview's answer as the API server reads it: the patch base64.
#[derive(Deserialize)]
struct ReadAnswer {
    #[serde(default)]
    kind: String,
    response: Option<ReadOutcome>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadOutcome {
    uid: String,
    allowed: bool,
    #[serde(default)]
    status: Status,
    patch: Option<String>,
    patch_type: Option<String>,
    warnings: Option<Warnings>,
}

/// An AdmissionReview's answer, as [`Webhooks::review`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// The uid of the request it answers.
    pub uid: String,
    /// Whether the request is admitted.
    pub allowed: bool,
    /// Why not, when it is not.
    pub message: String,
    /// The `StatusReason` of a denial.
    pub reason: String,
    /// The HTTP code of a denial.
    pub code: u16,
    /// Warnings for the client.
    pub warnings: Warnings,
    /// The JSON patch of a defaulting webhook; `None` when nothing changes.
    pub patch: Option<json_patch::Patch>,
}

impl Admission {
    /// `object` with the patch applied, as the API server would store it.
    pub fn apply<K: Serialize + DeserializeOwned>(&self, object: &K) -> anyhow::Result<K> {
        let value = self.apply_json(&serde_json::to_value(object)?)?;
        Ok(serde_json::from_value(value)?)
    }

    /// The JSON `object` with the patch applied, as the API server would store it; fails, as
    /// the API server would refuse it, when the patch does not apply to `object`.
    pub fn apply_json(&self, object: &serde_json::Value) -> anyhow::Result<serde_json::Value> {
        let mut value = object.clone();
        if let Some(patch) = &self.patch {
            json_patch::patch(&mut value, patch)
                .map_err(|error| anyhow::anyhow!("the patch {patch} does not apply: {error}"))?;
        }
        Ok(value)
    }
}

/// AdmissionReviews for tests, as the API server sends them.
pub mod review {
    use super::*;

    /// The review of creating `object`.
    pub fn create<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> serde_json::Value {
        build::<K>("CREATE", Some(object), None)
    }

    /// The review of updating `old` to `new`.
    pub fn update<K: Resource<DynamicType = ()> + Serialize>(
        old: &K,
        new: &K,
    ) -> serde_json::Value {
        build::<K>("UPDATE", Some(new), Some(old))
    }

    /// The review of deleting `object`.
    pub fn delete<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> serde_json::Value {
        build::<K>("DELETE", None, Some(object))
    }

    /// The review of creating the JSON `object` of kind `K`, as a client sent it: with the
    /// fields it left out, its `null`s and the fields the Rust type does not know. A
    /// defaulting patch must apply to exactly this object ([`Admission::apply_json`]).
    pub fn create_json<K: Resource<DynamicType = ()> + Serialize>(
        object: serde_json::Value,
    ) -> serde_json::Value {
        let mut review = build::<K>("CREATE", None::<&K>, None);
        review["request"]["name"] = object["metadata"]["name"].clone();
        review["request"]["namespace"] = object["metadata"]["namespace"].clone();
        review["request"]["object"] = object;
        review
    }

    fn build<K: Resource<DynamicType = ()> + Serialize>(
        operation: &str,
        object: Option<&K>,
        old: Option<&K>,
    ) -> serde_json::Value {
        let meta = object.or(old).map(|o| o.meta().clone()).unwrap_or_default();
        let gvk = serde_json::json!({
            "group": K::group(&()),
            "version": K::version(&()),
            "kind": K::kind(&()),
        });
        let gvr = serde_json::json!({
            "group": K::group(&()),
            "version": K::version(&()),
            "resource": K::plural(&()),
        });
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": gvk,
                "resource": gvr,
                "requestKind": gvk,
                "requestResource": gvr,
                "name": meta.name.unwrap_or_default(),
                "namespace": meta.namespace,
                "operation": operation,
                "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
                "object": object.map(|o| serde_json::to_value(o).expect("the object serializes")),
                "oldObject": old.map(|o| serde_json::to_value(o).expect("the object serializes")),
                "dryRun": false,
            },
        })
    }
}

/// What bounds the requests of one router: the time of each, and the bytes of all in flight.
#[derive(Clone)]
struct Limits {
    timeout: Duration,
    /// One permit per byte of body in flight.
    in_flight: Arc<Semaphore>,
    /// The requests in flight, in the order they arrived.
    arrivals: Arc<Arrivals>,
}

/// The requests in flight by their ticket, so that the oldest one can be told.
#[derive(Default)]
struct Arrivals {
    next: std::sync::atomic::AtomicU64,
    in_flight: std::sync::Mutex<std::collections::BTreeSet<u64>>,
}

impl Arrivals {
    fn arrive(self: &Arc<Self>) -> Ticket {
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().insert(number);
        Ticket {
            number,
            arrivals: self.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<u64>> {
        // The set is consistent after any panic: each change is one insert or remove.
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A request's place in [`Arrivals`], given up when the request ends.
struct Ticket {
    number: u64,
    arrivals: Arc<Arrivals>,
}

impl Ticket {
    fn is_oldest(&self) -> bool {
        self.arrivals.lock().first() == Some(&self.number)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.arrivals.lock().remove(&self.number);
    }
}

/// An axum handler that checks the content type, reserves the body's size within the bound on
/// bytes in flight, reads at most [`MAX_BODY_BYTES`], and answers within the timeout.
fn serve(
    handler: Handler,
    limits: Limits,
) -> impl Fn(Request) -> futures::future::BoxFuture<'static, Response> + Clone + Send + Sync + 'static
{
    move |request: Request| {
        let handler = handler.clone();
        let limits = limits.clone();
        Box::pin(async move {
            if let Err(message) = json_content(request.headers()) {
                tracing::debug!("refused a webhook request: {message}");
                return (StatusCode::UNSUPPORTED_MEDIA_TYPE, message).into_response();
            }
            let declared = match content_length(request.headers()) {
                Ok(declared) => declared,
                Err(BodyError::Invalid(message)) => return bad_request(message),
                // The declared length is over the limit.
                Err(_) => return too_large(),
            };
            let ticket = limits.arrivals.arrive();
            let work = async {
                let read = read_body(request.into_body(), declared, &limits.in_flight, &ticket);
                let (body, _reserved) = match tokio::time::timeout(BODY_READ_TIMEOUT, read).await {
                    Ok(Ok(read)) => read,
                    Ok(Err(BodyError::TooLarge)) => return too_large(),
                    Ok(Err(BodyError::Busy)) => {
                        tracing::warn!(
                            "refused a webhook request: too many bytes of reviews in flight"
                        );
                        return (
                            StatusCode::TOO_MANY_REQUESTS,
                            [(header::RETRY_AFTER, "1")],
                            "too many reviews are in flight; retry later",
                        )
                            .into_response();
                    }
                    Ok(Err(BodyError::Invalid(message))) => return bad_request(message),
                    Ok(Err(BodyError::Read(error))) => {
                        return bad_request(format!("failed to read the review: {error}"));
                    }
                    Err(_) => {
                        tracing::debug!(
                            "a webhook request's body took longer than {BODY_READ_TIMEOUT:?}"
                        );
                        return (
                            StatusCode::REQUEST_TIMEOUT,
                            format!("the review did not arrive within {BODY_READ_TIMEOUT:?}"),
                        )
                            .into_response();
                    }
                };
                handler(body).await
            };
            match tokio::time::timeout(limits.timeout, work).await {
                Ok(response) => response,
                Err(_) => {
                    tracing::warn!("a webhook request took longer than {:?}", limits.timeout);
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("the webhook did not answer within {:?}", limits.timeout),
                    )
                        .into_response()
                }
            }
        })
    }
}

/// `Ok` when the request's body is JSON, as the API server sends reviews; else what is wrong.
fn json_content(headers: &HeaderMap) -> Result<(), String> {
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let media_type = value.split(';').next().unwrap_or_default().trim();
    if media_type.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(format!(
            "the review must be application/json, not {value:?}"
        ))
    }
}

/// The declared body size, over [`MAX_BODY_BYTES`] or unreadable.
fn content_length(headers: &HeaderMap) -> Result<Option<usize>, BodyError> {
    let Some(value) = headers.get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    let length = value
        .to_str()
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .ok_or_else(|| BodyError::Invalid(format!("invalid Content-Length {value:?}")))?;
    match usize::try_from(length) {
        Ok(length) if length <= MAX_BODY_BYTES => Ok(Some(length)),
        _ => Err(BodyError::TooLarge),
    }
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the review is larger than {MAX_BODY_BYTES} bytes"),
    )
        .into_response()
}

/// Why a body is not read.
enum BodyError {
    /// Over [`MAX_BODY_BYTES`].
    TooLarge,
    /// The bytes of the reviews in flight are at their bound.
    Busy,
    /// A `Content-Length` that is not a number.
    Invalid(String),
    /// The connection failed.
    Read(axum::Error),
}

/// The whole body, in one buffer (no chunk list to join, so no second copy), and the bytes it
/// holds of the bound on bytes in flight. The bytes are counted as they arrive, not as they are
/// announced: a client that declares a large body and sends nothing holds nothing. Past the
/// bound, the rest of the body is read and dropped, so that the client reads the `429`.
async fn read_body(
    mut body: Body,
    declared: Option<usize>,
    in_flight: &Arc<Semaphore>,
    ticket: &Ticket,
) -> Result<(Bytes, Option<OwnedSemaphorePermit>), BodyError> {
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0).min(MAX_BODY_BYTES));
    let mut reserved: Option<OwnedSemaphorePermit> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Read)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if buffer.len() + data.len() > MAX_BODY_BYTES {
            return Err(BodyError::TooLarge);
        }
        let permits = u32::try_from(data.len()).unwrap_or(u32::MAX);
        let mut acquired = in_flight.clone().try_acquire_many_owned(permits);
        if acquired.is_err() && ticket.is_oldest() {
            // The others give their bytes back when theirs do not fit, and the bound holds a
            // whole body, so the oldest review is never refused for want of bytes.
            acquired = in_flight
                .clone()
                .acquire_many_owned(permits)
                .await
                .map_err(|_| tokio::sync::TryAcquireError::Closed);
        }
        match acquired {
            Ok(permit) => match &mut reserved {
                Some(reserved) => reserved.merge(permit),
                None => reserved = Some(permit),
            },
            Err(_) => {
                drop((buffer, reserved));
                let mut seen = data.len();
                while let Some(Ok(frame)) = body.frame().await {
                    seen += frame.data_ref().map_or(0, Bytes::len);
                    if seen > MAX_BODY_BYTES {
                        break;
                    }
                }
                return Err(BodyError::Busy);
            }
        }
        buffer.extend_from_slice(&data);
    }
    Ok((Bytes::from(buffer), reserved))
}

fn bad_request(message: String) -> Response {
    tracing::debug!("refused a webhook request: {message}");
    (StatusCode::BAD_REQUEST, message).into_response()
}

fn json(value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to serialize the answer: {error}"),
        )
            .into_response(),
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// An AdmissionReview as the server reads it: the objects stay raw JSON, borrowed from the
/// body, until a handler reads them into its type.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAdmissionReview<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<RawAdmissionRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAdmissionRequest<'a> {
    uid: String,
    operation: Operation,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
}

/// What a handler gets of a review: the operation, and the objects as raw JSON, each a slice of
/// the body (not a copy).
struct Objects {
    operation: Operation,
    object: Option<Bytes>,
    old_object: Option<Bytes>,
}

/// The JSON of an object of [`Objects`]: checked as JSON when the review was read.
fn raw_json(object: &Bytes) -> &RawValue {
    serde_json::from_slice(object).expect("an object of a review that was read is JSON")
}

/// `raw` read as a `K`, or a denial that names the kind and what does not fit.
fn read<K: Resource<DynamicType = ()> + DeserializeOwned>(raw: &RawValue) -> Result<K, Denied> {
    serde_json::from_str(raw.get())
        .map_err(|error| Denied::invalid(format!("cannot read the {}: {error}", K::kind(&()))))
}

/// What a handler decides: warnings and the patch's operations, or a denial.
type Decision = Result<(Warnings, Vec<json_patch::PatchOperation>), Denied>;

/// Reads an AdmissionReview, runs `handle` on its objects, and answers.
async fn admit<F, Fut>(body: Bytes, handle: F) -> Response
where
    F: FnOnce(Objects) -> Fut,
    Fut: Future<Output = Decision>,
{
    let (api_version, uid, objects) = match read_review(&body) {
        Ok(read) => read,
        Err(message) => return bad_request(format!("malformed AdmissionReview: {message}")),
    };
    let mut answer = AdmissionOutcome {
        uid,
        allowed: true,
        status: Status::success(),
        patch: None,
        patch_type: None,
        warnings: None,
    };
    let outcome = AssertUnwindSafe(handle(objects)).catch_unwind().await;
    match outcome {
        Ok(Ok((warnings, ops))) => {
            if !ops.is_empty() {
                match serde_json::to_vec(&json_patch::Patch(ops)) {
                    Ok(patch) => {
                        answer.patch = Some(BASE64_STANDARD.encode(patch));
                        answer.patch_type = Some("JSONPatch");
                    }
                    Err(error) => {
                        answer.deny(
                            format!("cannot write the patch: {error}"),
                            "InternalError",
                            500,
                        );
                    }
                }
            }
            if !warnings.is_empty() {
                answer.warnings = Some(warnings);
            }
        }
        Ok(Err(denied)) => answer.deny(denied.message, &denied.reason, denied.code),
        Err(panic) => {
            let message = panic_message(&*panic);
            tracing::error!(uid = %answer.uid, "a webhook handler panicked: {message}");
            answer.deny(
                format!("the webhook panicked: {message}"),
                "InternalError",
                500,
            );
        }
    }
    json(&AdmissionAnswer {
        api_version,
        kind: "AdmissionReview",
        response: answer,
    })
}

/// The answer to an AdmissionReview.
///
/// kube's `AdmissionResponse` writes `patch` as an array of numbers, one per byte
/// (kube-rs/kube#1781). Go's JSON decoder happens to take that, but the API defines the field as
/// base64, as controller-runtime writes it, and an array costs nearly three times the bytes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionAnswer {
    api_version: String,
    kind: &'static str,
    response: AdmissionOutcome,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionOutcome {
    uid: String,
    allowed: bool,
    status: Status,
    /// The JSON patch, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<Warnings>,
}

impl AdmissionOutcome {
    fn deny(&mut self, message: String, reason: &str, code: u16) {
        self.allowed = false;
        self.status = Status::failure(&message, reason).with_code(code);
        self.patch = None;
        self.patch_type = None;
    }
}

/// The apiVersion, the uid and the objects of an AdmissionReview, or why it is not one.
fn read_review(body: &Bytes) -> Result<(String, String, Objects), String> {
    let review: RawAdmissionReview<'_> =
        serde_json::from_slice(body).map_err(|error| error.to_string())?;
    if review.kind != "AdmissionReview"
        || !matches!(
            review.api_version.as_str(),
            "admission.k8s.io/v1" | "admission.k8s.io/v1beta1"
        )
    {
        return Err(format!(
            "expected kind AdmissionReview of admission.k8s.io/v1, got kind `{}` of `{}`",
            review.kind, review.api_version
        ));
    }
    let request = review
        .request
        .ok_or_else(|| "the review has no request".to_owned())?;
    Ok((
        review.api_version,
        request.uid,
        Objects {
            operation: request.operation,
            object: request
                .object
                .map(|object| body.slice_ref(object.get().as_bytes())),
            old_object: request
                .old_object
                .map(|object| body.slice_ref(object.get().as_bytes())),
        },
    ))
}

/// A ConversionReview as the server reads it: each object stays raw JSON, borrowed from the body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConversionReview<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<RawConversionRequest<'a>>,
}

#[derive(Deserialize)]
struct RawConversionRequest<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow, default)]
    objects: Vec<&'a RawValue>,
}

/// The answer to a ConversionReview, with the converted objects as JSON text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversionAnswer {
    api_version: String,
    kind: &'static str,
    response: ConversionOutcome,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversionOutcome {
    uid: String,
    result: Status,
    converted_objects: Vec<Box<RawValue>>,
}

/// The type of an object, read without reading the rest.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeOf<'a> {
    #[serde(borrow, default)]
    api_version: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
}

/// Answers a ConversionReview.
fn convert(conversions: &BTreeMap<(String, String), Arc<Conversion>>, body: Bytes) -> Response {
    let review: RawConversionReview<'_> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(error) => return bad_request(format!("malformed ConversionReview: {error}")),
    };
    if review.kind != "ConversionReview"
        || !matches!(
            review.api_version.as_str(),
            "apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1"
        )
    {
        return bad_request(format!(
            "malformed ConversionReview: expected kind ConversionReview of apiextensions.k8s.io/v1, got kind `{}` of `{}`",
            review.kind, review.api_version
        ));
    }
    let Some(request) = review.request else {
        return bad_request("malformed ConversionReview: the review has no request".to_owned());
    };
    let desired = request.desired_api_version;
    let converted = std::panic::catch_unwind(AssertUnwindSafe(|| {
        request
            .objects
            .iter()
            .map(|object| convert_one(conversions, object, &desired))
            .collect::<anyhow::Result<Vec<_>>>()
    }))
    .unwrap_or_else(|panic| {
        let message = panic_message(&*panic);
        tracing::error!(uid = %request.uid, "a conversion panicked: {message}");
        Err(anyhow::anyhow!("the conversion panicked: {message}"))
    });
    let uid = request.uid;
    let api_version = review.api_version;
    // The converted objects are all that is left of the request.
    drop(body);
    let (result, converted_objects) = match converted {
        Ok(objects) => (Status::success(), objects),
        Err(error) => {
            tracing::warn!("conversion to {desired} failed: {error:#}");
            (
                Status::failure(&format!("{error:#}"), "Invalid"),
                Vec::new(),
            )
        }
    };
    json(&ConversionAnswer {
        api_version,
        kind: "ConversionReview",
        response: ConversionOutcome {
            uid,
            result,
            converted_objects,
        },
    })
}

fn convert_one(
    conversions: &BTreeMap<(String, String), Arc<Conversion>>,
    object: &RawValue,
    desired: &str,
) -> anyhow::Result<Box<RawValue>> {
    let TypeOf { api_version, kind } = serde_json::from_str(object.get())
        .map_err(|error| anyhow::anyhow!("an object is not a Kubernetes object: {error}"))?;
    let (group, version) = api_version
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("an object has no group in apiVersion `{api_version}`"))?;
    let (desired_group, desired_version) = desired
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("invalid desiredAPIVersion `{desired}`"))?;
    anyhow::ensure!(
        group == desired_group,
        "cannot convert {kind} from group {group} to group {desired_group}"
    );
    let conversion = conversions
        .get(&(group.to_owned(), kind.clone().into_owned()))
        .ok_or_else(|| anyhow::anyhow!("no conversion is registered for {group}, Kind={kind}"))?;
    conversion
        .convert(object, version, desired_version)
        .map_err(|error| {
            error.context(format!(
                "cannot convert {kind} {version} to {desired_version}"
            ))
        })
}

#[cfg(test)]
pub(crate) mod tests;
