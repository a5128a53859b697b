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
pub(crate) mod tests {
    use super::*;
    use crate::testing::within;
    use kube::ResourceExt as _;
    use serde::Deserialize;

    /// An application: version v1 is the hub.
    #[derive(kube::CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "example.com",
        version = "v1",
        kind = "Application",
        namespaced,
        status = "ApplicationStatus",
        schema = "disabled"
    )]
    pub(crate) struct ApplicationSpec {
        pub(crate) replicas: i32,
        #[serde(default)]
        pub(crate) image: String,
    }

    #[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
    #[serde(rename_all = "camelCase")]
    pub(crate) struct ApplicationStatus {
        available_replicas: i32,
    }

    /// Version v2 of Application, whose replicas are a string.
    pub(crate) mod v2 {
        use super::*;

        #[derive(
            kube::CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq,
        )]
        #[kube(
            group = "example.com",
            version = "v2",
            kind = "Application",
            namespaced,
            schema = "disabled"
        )]
        pub(crate) struct ApplicationSpec {
            pub(crate) scale: String,
            pub(crate) image: String,
        }
    }

    struct Defaults;

    impl Defaulter<Application> for Defaults {
        async fn default(&self, app: &mut Application) -> Result<(), Denied> {
            if app.spec.replicas == 0 {
                app.spec.replicas = 1;
            }
            if app.spec.image == "forbidden" {
                return Err(Denied::new("forbidden image"));
            }
            Ok(())
        }
    }

    struct Rules;

    impl Validator<Application> for Rules {
        async fn validate_create(&self, app: &Application) -> Result<Warnings, Denied> {
            check(app)
        }
        async fn validate_update(
            &self,
            old: &Application,
            new: &Application,
        ) -> Result<Warnings, Denied> {
            if new.spec.image != old.spec.image && new.spec.image.is_empty() {
                return Err(Denied::invalid("image cannot be removed"));
            }
            check(new)
        }
        async fn validate_delete(&self, app: &Application) -> Result<Warnings, Denied> {
            if app.labels().contains_key("protected") {
                return Err(Denied::new("the application is protected"));
            }
            Ok(Vec::new())
        }
    }

    fn check(app: &Application) -> Result<Warnings, Denied> {
        if app.spec.replicas < 1 {
            return Err(Denied::invalid("replicas must be at least 1"));
        }
        if app.spec.replicas > 5 {
            return Ok(vec!["more than 5 replicas".into()]);
        }
        Ok(Vec::new())
    }

    fn app(replicas: i32, image: &str) -> Application {
        let mut app = Application::new(
            "web",
            ApplicationSpec {
                replicas,
                image: image.into(),
            },
        );
        app.metadata.namespace = Some("default".into());
        app
    }

    pub(crate) fn webhooks() -> Webhooks {
        let mut conversion = Conversion::hub::<Application>();
        conversion.spoke(
            |spoke: v2::Application| {
                Ok(Application {
                    metadata: spoke.metadata,
                    spec: ApplicationSpec {
                        replicas: spoke.spec.scale.parse()?,
                        image: spoke.spec.image,
                    },
                    status: None,
                })
            },
            |hub: Application| {
                Ok(v2::Application {
                    metadata: hub.metadata,
                    spec: v2::ApplicationSpec {
                        scale: hub.spec.replicas.to_string(),
                        image: hub.spec.image,
                    },
                })
            },
        );
        let mut webhooks = Webhooks::new();
        webhooks
            .defaulting("/mutate", Defaults)
            .validating("/validate", Rules)
            .conversion(conversion);
        webhooks
    }

    #[tokio::test]
    async fn defaulting_answers_the_exact_patch() {
        let webhooks = webhooks();
        let answer = within(webhooks.review("/mutate", &review::create(&app(0, "nginx"))))
            .await
            .unwrap();
        assert!(answer.allowed);
        assert_eq!(answer.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(
            serde_json::to_value(answer.patch.as_ref().unwrap()).unwrap(),
            serde_json::json!([{"op": "replace", "path": "/spec/replicas", "value": 1}])
        );
        assert_eq!(
            answer.apply(&app(0, "nginx")).unwrap().spec,
            app(1, "nginx").spec
        );

        let unchanged = within(webhooks.review("/mutate", &review::create(&app(3, "nginx"))))
            .await
            .unwrap();
        assert!(unchanged.allowed);
        assert_eq!(unchanged.patch, None);

        let denied = within(webhooks.review("/mutate", &review::create(&app(1, "forbidden"))))
            .await
            .unwrap();
        assert!(!denied.allowed);
        assert_eq!(
            (denied.message.as_str(), denied.reason.as_str(), denied.code),
            ("forbidden image", "Forbidden", 403)
        );
    }

    #[tokio::test]
    async fn the_answer_is_written_as_the_api_defines_it() {
        // The bytes on the wire, not a typed read of them: `patch` is base64 text, and a
        // denial's status is a Failure with its reason and code.
        let webhooks = webhooks();
        let body = serde_json::to_vec(&review::create(&app(0, "nginx"))).unwrap();
        let response = within(webhooks.call("/mutate", body)).await;
        let answer: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            answer,
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "allowed": true,
                    "status": {"status": "Success"},
                    "patch": BASE64_STANDARD.encode(r#"[{"op":"replace","path":"/spec/replicas","value":1}]"#),
                    "patchType": "JSONPatch",
                },
            })
        );

        let body = serde_json::to_vec(&review::create(&app(1, "forbidden"))).unwrap();
        let response = within(webhooks.call("/mutate", body)).await;
        let answer: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            answer["response"],
            serde_json::json!({
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "allowed": false,
                "status": {"status": "Failure", "message": "forbidden image", "reason": "Forbidden", "code": 403},
            })
        );
    }

    #[tokio::test]
    async fn validation_denies_with_the_message_and_warns() {
        let webhooks = webhooks();
        let denied = within(webhooks.review("/validate", &review::create(&app(0, "nginx"))))
            .await
            .unwrap();
        assert!(!denied.allowed);
        assert_eq!(
            (denied.message.as_str(), denied.reason.as_str(), denied.code),
            ("replicas must be at least 1", "Invalid", 422)
        );

        let warned = within(webhooks.review("/validate", &review::create(&app(6, "nginx"))))
            .await
            .unwrap();
        assert!(warned.allowed);
        assert_eq!(warned.warnings, vec!["more than 5 replicas".to_owned()]);

        let update = review::update(&app(2, "nginx"), &app(2, ""));
        let denied = within(webhooks.review("/validate", &update)).await.unwrap();
        assert_eq!(denied.message, "image cannot be removed");
        let update = review::update(&app(2, "nginx"), &app(-1, "nginx"));
        let denied = within(webhooks.review("/validate", &update)).await.unwrap();
        assert_eq!(denied.message, "replicas must be at least 1");

        let mut protected = app(1, "nginx");
        protected
            .labels_mut()
            .insert("protected".into(), "yes".into());
        let denied = within(webhooks.review("/validate", &review::delete(&protected)))
            .await
            .unwrap();
        assert_eq!(denied.message, "the application is protected");
        let allowed = within(webhooks.review("/validate", &review::delete(&app(1, "nginx"))))
            .await
            .unwrap();
        assert!(allowed.allowed);
        assert!(allowed.warnings.is_empty());
    }

    #[tokio::test]
    async fn malformed_reviews_get_a_400_with_the_reason() {
        let webhooks = webhooks();
        for path in ["/mutate", "/validate", CONVERT_PATH] {
            let response = within(webhooks.call(path, "{not json")).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
            let body = String::from_utf8_lossy(response.body()).into_owned();
            assert!(body.starts_with("malformed "), "{path}: {body}");
        }
        // A review without a request.
        let response = within(webhooks.call(
            "/validate",
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        ))
        .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        // Only POST is served; unknown paths are not.
        assert_eq!(
            within(webhooks.call("/nowhere", "{}")).await.status(),
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn an_object_of_another_shape_is_denied_not_a_panic() {
        let mut review = review::create(&app(1, "nginx"));
        review["request"]["object"]["spec"]["replicas"] = serde_json::json!("three");
        let answer = within(webhooks().review("/validate", &review))
            .await
            .unwrap();
        assert!(!answer.allowed);
        assert!(
            answer.message.starts_with("cannot read the Application: "),
            "{}",
            answer.message
        );
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused() {
        let body = vec![b' '; MAX_BODY_BYTES + 1];
        let response = within(webhooks().call("/validate", body)).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    struct Slow;

    impl Validator<Application> for Slow {
        async fn validate_create(&self, _: &Application) -> Result<Warnings, Denied> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Vec::new())
        }
        async fn validate_update(
            &self,
            _: &Application,
            _: &Application,
        ) -> Result<Warnings, Denied> {
            Ok(Vec::new())
        }
        async fn validate_delete(&self, _: &Application) -> Result<Warnings, Denied> {
            Ok(Vec::new())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_handler_is_cut_off_at_the_timeout() {
        let mut webhooks = Webhooks::new();
        webhooks
            .timeout(Duration::from_secs(2))
            .validating("/slow", Slow);
        let body = serde_json::to_vec(&review::create(&app(1, "nginx"))).unwrap();
        let started = tokio::time::Instant::now();
        let response = within(webhooks.call("/slow", body)).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn conversion_round_trips_through_the_hub() {
        let webhooks = webhooks();
        let mut hub = app(3, "nginx");
        hub.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
        hub.metadata.resource_version = Some("42".into());
        let original = serde_json::to_value(&hub).unwrap();

        let spokes = within(webhooks.convert("example.com/v2", vec![original.clone()]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(spokes[0]["apiVersion"], "example.com/v2");
        assert_eq!(spokes[0]["spec"]["scale"], "3");
        assert_eq!(spokes[0]["metadata"], original["metadata"]);

        let back = within(webhooks.convert("example.com/v1", spokes))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, vec![original.clone()]);

        // Asking for the version an object has returns it as it is.
        let same = within(webhooks.convert("example.com/v1", vec![original.clone()]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(same, vec![original]);
    }

    #[tokio::test]
    async fn conversion_failures_name_the_cause() {
        let webhooks = webhooks();
        let unknown = within(webhooks.convert(
            "example.com/v3",
            vec![serde_json::to_value(app(1, "x")).unwrap()],
        ))
        .await
        .unwrap()
        .unwrap_err();
        assert_eq!(
            unknown,
            "cannot convert Application v1 to v3: Application has no version v3: it converts v1, v2"
        );
        let other =
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "Database", "metadata": {}});
        let error = within(webhooks.convert("example.com/v2", vec![other]))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(
            error,
            "no conversion is registered for example.com, Kind=Database"
        );
        let mut bad = serde_json::to_value(v2::Application::new(
            "web",
            v2::ApplicationSpec {
                scale: "many".into(),
                image: "x".into(),
            },
        ))
        .unwrap();
        bad["metadata"]["namespace"] = "default".into();
        let error = within(webhooks.convert("example.com/v1", vec![bad]))
            .await
            .unwrap()
            .unwrap_err();
        assert!(
            error.starts_with("cannot convert Application v2 to v1: invalid digit"),
            "{error}"
        );
    }

    /// What an HTTPS request got: the status, the body and the certificate the server presented.
    pub(crate) struct Answer {
        pub(crate) status: StatusCode,
        pub(crate) body: Vec<u8>,
        pub(crate) cert: Vec<u8>,
    }

    /// Posts `body` to `https://localhost:<port><path>`, trusting only `root`; over HTTP/2 with
    /// prior knowledge when `http2`, else HTTP/1.1.
    pub(crate) async fn https_post(
        port: u16,
        root: &[u8],
        http2: bool,
        path: &str,
        body: Vec<u8>,
    ) -> Result<Answer, String> {
        use http_body_util::{BodyExt as _, Full};
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use rustls::pki_types::{CertificateDer, ServerName};

        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(root.to_vec()))
            .map_err(|e| e.to_string())?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let request = http::Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| e.to_string())?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .map_err(|e| e.to_string())?;
            let cert = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
            let io = TokioIo::new(tls);
            let response = if http2 {
                let (mut sender, connection) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?
            } else {
                let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?
            };
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes()
                .to_vec();
            Ok(Answer { status, body, cert })
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .unwrap_or_else(|_| Err("timed out".into()))
    }

    #[tokio::test]
    async fn over_https_a_swapped_certificate_is_served_to_new_connections() {
        use crate::server::{ServeOptions, serve};
        use crate::tls::{CertResolver, CertSource};

        let dir = crate::tls::tests::tempdir();
        let first = crate::tls::tests::write_certificate(dir.path(), "localhost");
        let resolver = CertResolver::new(CertSource::from_flags(
            Some(dir.path()),
            "tls.crt",
            "tls.key",
        ))
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            webhooks().router(),
            ServeOptions {
                tls: Some(resolver.server_config(false).unwrap()),
                http2: false,
                ..ServeOptions::default()
            },
            shutdown.clone(),
        ));
        let body = serde_json::to_vec(&review::create(&app(0, "nginx"))).unwrap();

        let answer = https_post(port, &first, false, "/mutate", body.clone())
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.cert, first);
        let review: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(review["response"]["allowed"], true);
        assert_eq!(review["response"]["patchType"], "JSONPatch");

        // HTTP/2 is off: a client that insists on it gets nothing.
        assert!(
            https_post(port, &first, true, "/mutate", body.clone())
                .await
                .is_err()
        );

        // cert-manager rotates the Secret; the next check reloads it.
        let second = crate::tls::tests::write_certificate(dir.path(), "localhost");
        resolver.reload().unwrap();
        assert!(
            https_post(port, &first, false, "/mutate", body.clone())
                .await
                .is_err()
        );
        let answer = https_post(port, &second, false, "/mutate", body)
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.cert, second);

        shutdown.cancel();
        within(server).await.unwrap().unwrap();
    }

    #[test]
    fn same_fields_converts_and_refuses_to_lose_data() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Narrow {
            replicas: i32,
        }
        let wide = ApplicationSpec {
            replicas: 2,
            image: String::new(),
        };
        // An empty string is kept as a value, so the narrow version loses it.
        let error = same_fields::<_, Narrow>(&wide).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the field `image` has no place in the other version: convert it by hand"
        );
        let back: ApplicationSpec = same_fields(Narrow { replicas: 2 }).unwrap();
        assert_eq!(back, wide);
        let error = same_fields::<_, Narrow>(serde_json::json!({"replicas": "two"})).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the fields do not convert: invalid type"),
            "{error}"
        );
    }

    /// An Application as `kubectl apply` sends it, in a review as the API server sends it: no
    /// `image` (the Rust type reads it as ""), `replicas` 0, `creationTimestamp: null`,
    /// `managedFields`, a `null` and fields the Rust type does not know.
    fn raw_application() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "example.com/v1",
            "kind": "Application",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "creationTimestamp": null,
                "annotations": null,
                "managedFields": [{
                    "apiVersion": "example.com/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}, "f:replicas": {}, "f:future": {}}},
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "time": "2026-12-01T10:00:00Z"
                }]
            },
            "spec": {"replicas": 0, "future": {"tier": "gold", "weights": [1, 2.5]}},
            "unknownTopLevel": "kept"
        })
    }

    #[tokio::test]
    async fn a_defaulting_patch_applies_to_the_raw_object_and_keeps_what_the_type_does_not_know() {
        let sent = raw_application();
        let answer =
            within(webhooks().review("/mutate", &review::create_json::<Application>(sent.clone())))
                .await
                .unwrap();
        assert!(answer.allowed, "{}", answer.message);
        // `image` was left out: the patch adds it (a `replace` would be refused by the API
        // server, since RFC 6902 needs the target of `replace` to exist).
        assert_eq!(
            serde_json::to_value(answer.patch.as_ref().unwrap()).unwrap(),
            serde_json::json!([
                {"op": "add", "path": "/spec/image", "value": ""},
                {"op": "replace", "path": "/spec/replicas", "value": 1},
            ])
        );
        let stored = answer.apply_json(&sent).unwrap();
        let mut expected = sent.clone();
        expected["spec"]["replicas"] = 1.into();
        expected["spec"]["image"] = "".into();
        assert_eq!(stored, expected);
    }

    #[tokio::test]
    async fn a_defaulted_raw_object_gets_no_patch() {
        let mut sent = raw_application();
        sent["spec"]["replicas"] = 2.into();
        sent["spec"]["image"] = "nginx".into();
        let answer =
            within(webhooks().review("/mutate", &review::create_json::<Application>(sent)))
                .await
                .unwrap();
        assert!(answer.allowed, "{}", answer.message);
        assert_eq!(answer.patch, None);
    }

    #[tokio::test]
    async fn a_defaulter_admits_deletions_without_reading_them() {
        let mut delete = review::delete(&app(0, "forbidden"));
        // Not an Application: reading it would deny.
        delete["request"]["oldObject"]["spec"] = "garbage".into();
        let answer = within(webhooks().review("/mutate", &delete)).await.unwrap();
        assert!(answer.allowed, "{}", answer.message);
        assert_eq!(answer.patch, None);
    }

    #[tokio::test]
    async fn the_answer_echoes_the_uid_and_the_review_version() {
        let mut review = review::create(&app(2, "nginx"));
        review["apiVersion"] = "admission.k8s.io/v1beta1".into();
        review["request"]["uid"] = "abc-123".into();
        let response =
            within(webhooks().call("/validate", serde_json::to_vec(&review).unwrap())).await;
        let answer: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], "abc-123");
        assert_eq!(answer["response"]["allowed"], true);
        // Not a review at all.
        review["kind"] = "ConversionReview".into();
        let response =
            within(webhooks().call("/validate", serde_json::to_vec(&review).unwrap())).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_refused_with_415() {
        let body = serde_json::to_vec(&review::create(&app(1, "nginx"))).unwrap();
        for (content_type, expected) in [
            (Some("text/plain"), StatusCode::UNSUPPORTED_MEDIA_TYPE),
            (Some("application/yaml"), StatusCode::UNSUPPORTED_MEDIA_TYPE),
            (None, StatusCode::UNSUPPORTED_MEDIA_TYPE),
            (Some("application/json; charset=utf-8"), StatusCode::OK),
            (Some("Application/JSON"), StatusCode::OK),
        ] {
            let mut request = axum::http::Request::post("/validate");
            if let Some(content_type) = content_type {
                request = request.header(header::CONTENT_TYPE, content_type);
            }
            let request = request.body(Body::from(body.clone())).unwrap();
            let response = within(Webhooks::send(webhooks().router(), request)).await;
            assert_eq!(response.status(), expected, "{content_type:?}");
        }
    }

    struct Panics;

    impl Validator<Application> for Panics {
        async fn validate_create(&self, app: &Application) -> Result<Warnings, Denied> {
            panic!("no image in {}", app.spec.image);
        }
        async fn validate_update(&self, _: &Application, _: &Application) -> Verdict {
            Ok(Vec::new())
        }
        async fn validate_delete(&self, _: &Application) -> Verdict {
            Ok(Vec::new())
        }
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_a_500_review_with_the_uid() {
        let mut webhooks = Webhooks::new();
        webhooks.validating("/panics", Panics);
        let answer = within(webhooks.review("/panics", &review::create(&app(1, "x"))))
            .await
            .unwrap();
        assert!(!answer.allowed);
        assert_eq!(answer.uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(answer.code, 500);
        assert_eq!(answer.message, "the webhook panicked: no image in x");
    }

    #[tokio::test]
    async fn a_panicking_conversion_fails_the_review_not_the_connection() {
        let mut conversion = Conversion::hub::<Application>();
        conversion.spoke(
            |_: v2::Application| -> anyhow::Result<Application> { panic!("unconvertible") },
            |hub: Application| {
                Ok(v2::Application::new(
                    &hub.name_any(),
                    v2::ApplicationSpec::default(),
                ))
            },
        );
        let mut webhooks = Webhooks::new();
        webhooks.conversion(conversion);
        let spoke =
            serde_json::to_value(v2::Application::new("web", v2::ApplicationSpec::default()))
                .unwrap();
        let error = within(webhooks.convert("example.com/v1", vec![spoke]))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(error, "the conversion panicked: unconvertible");
    }

    #[tokio::test(start_paused = true)]
    async fn reviews_past_the_bytes_in_flight_get_429_at_once() {
        let mut webhooks = Webhooks::new();
        webhooks
            .max_in_flight_bytes(MAX_BODY_BYTES)
            .timeout(Duration::from_secs(10))
            .validating("/slow", Slow);
        let router = webhooks.router();
        // Two reviews of 4 MiB each: together more than the bound.
        let mut review = review::create(&app(1, "nginx"));
        review["request"]["object"]["metadata"]["annotations"] =
            serde_json::json!({"big": "x".repeat(4 * 1024 * 1024)});
        let body = serde_json::to_vec(&review).unwrap();
        let request = || {
            axum::http::Request::post("/slow")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, body.len())
                .body(Body::from(body.clone()))
                .unwrap()
        };
        let first = tokio::spawn(Webhooks::send(router.clone(), request()));
        // The first review is being validated, slowly.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let started = tokio::time::Instant::now();
        let second = within(Webhooks::send(router.clone(), request())).await;
        assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(second.headers()[header::RETRY_AFTER], "1");
        assert_eq!(started.elapsed(), Duration::ZERO, "the refusal waited");
        // The first is cut off by the timeout; its bytes are given back.
        assert_eq!(
            within(first).await.unwrap().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        // Another 4 MiB fit again: it reaches the (slow) handler.
        let third = within(Webhooks::send(router, request())).await;
        assert_eq!(
            third.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "the bytes were not given back"
        );
    }

    /// Two reviews whose bytes together pass the bound: the oldest waits for the bytes the other
    /// gives back when its own next bytes do not fit, so one of them is always served.
    #[tokio::test(start_paused = true)]
    async fn the_oldest_review_waits_for_bytes_and_the_younger_is_refused() {
        let mut webhooks = Webhooks::new();
        webhooks
            .max_in_flight_bytes(MAX_BODY_BYTES)
            .validating("/validate", Rules);
        let router = webhooks.router();
        let body = |size: usize| {
            let mut review = review::create(&app(1, "nginx"));
            review["request"]["object"]["metadata"]["annotations"] =
                serde_json::json!({"big": "x".repeat(size)});
            serde_json::to_vec(&review).unwrap()
        };
        let send = |body: &[u8]| {
            let (sender, receiver) =
                futures::channel::mpsc::unbounded::<Result<Bytes, std::convert::Infallible>>();
            let request = axum::http::Request::post("/validate")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, body.len())
                .body(Body::from_stream(receiver))
                .unwrap();
            (
                sender,
                tokio::spawn(Webhooks::send(router.clone(), request)),
            )
        };
        let settle = || tokio::time::sleep(Duration::from_millis(1));
        // Twice: a request that ended is no longer the oldest.
        for _ in 0..2 {
            let (older_body, younger_body) = (body(6 * 1024 * 1024), body(5 * 1024 * 1024));
            let (older, older_answer) = send(&older_body);
            settle().await;
            let (younger, younger_answer) = send(&younger_body);
            settle().await;
            // 4 MiB and 3 MiB: the bound is full.
            let (older_first, older_rest) = older_body.split_at(4 * 1024 * 1024);
            let (younger_first, younger_rest) = younger_body.split_at(3 * 1024 * 1024);
            older
                .unbounded_send(Ok(Bytes::copy_from_slice(older_first)))
                .unwrap();
            settle().await;
            younger
                .unbounded_send(Ok(Bytes::copy_from_slice(younger_first)))
                .unwrap();
            settle().await;
            // The older review's rest does not fit: it waits, and is not refused.
            older
                .unbounded_send(Ok(Bytes::copy_from_slice(older_rest)))
                .unwrap();
            older.close_channel();
            settle().await;
            assert!(
                !older_answer.is_finished(),
                "the oldest review was answered"
            );
            // The younger's next bytes do not fit: it is refused and gives its 3 MiB back.
            younger
                .unbounded_send(Ok(Bytes::copy_from_slice(younger_rest)))
                .unwrap();
            younger.close_channel();
            let younger_answer = within(younger_answer).await.unwrap();
            assert_eq!(younger_answer.status(), StatusCode::TOO_MANY_REQUESTS);
            let older_answer = within(older_answer).await.unwrap();
            assert_eq!(older_answer.status(), StatusCode::OK);
        }
    }

    /// Pins that bytes are counted as they arrive: clients that announce the largest bodies
    /// and send nothing hold none of the bound, and are answered 408 at the body timeout.
    #[tokio::test(start_paused = true)]
    async fn bodies_that_never_come_hold_no_bytes_and_time_out() {
        let mut webhooks = Webhooks::new();
        webhooks
            .max_in_flight_bytes(MAX_BODY_BYTES)
            .validating("/validate", Rules);
        let router = webhooks.router();
        let stalled = (0..4)
            .map(|_| {
                let never = futures::stream::pending::<Result<Bytes, std::convert::Infallible>>();
                let request = axum::http::Request::post("/validate")
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::CONTENT_LENGTH, MAX_BODY_BYTES)
                    .body(Body::from_stream(never))
                    .unwrap();
                tokio::spawn(Webhooks::send(router.clone(), request))
            })
            .collect::<Vec<_>>();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let body = serde_json::to_vec(&review::create(&app(2, "nginx"))).unwrap();
        let request = axum::http::Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .unwrap();
        let started = tokio::time::Instant::now();
        let answer = within(Webhooks::send(router, request)).await;
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(started.elapsed(), Duration::ZERO);
        for stalled in stalled {
            let response = within(stalled).await.unwrap();
            assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        }
        assert_eq!(BODY_READ_TIMEOUT, Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused_before_the_body_is_read() {
        let request = axum::http::Request::post("/validate")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, MAX_BODY_BYTES + 1)
            .body(Body::from("{}"))
            .unwrap();
        let response = within(Webhooks::send(webhooks().router(), request)).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(
            MAX_BODY_BYTES,
            7 * 1024 * 1024,
            "controller-runtime's limit"
        );
    }

    #[test]
    fn the_limits_are_controller_runtimes_and_half_a_review_more_in_flight() {
        assert_eq!(MAX_BODY_BYTES, 7 * 1024 * 1024);
        assert_eq!(
            DEFAULT_MAX_IN_FLIGHT_BYTES,
            7 * 1024 * 1024 + 7 * 1024 * 512
        );
    }

    #[test]
    fn a_denial_shows_its_message_and_a_conversion_its_versions() {
        let denied = Denied::new("the application is protected");
        assert_eq!(denied.to_string(), "the application is protected");
        assert_eq!((denied.reason.as_str(), denied.code), ("Forbidden", 403));
        let invalid = Denied::invalid("replicas must be at least 1");
        assert_eq!(invalid.to_string(), "replicas must be at least 1");
        assert_eq!((invalid.reason.as_str(), invalid.code), ("Invalid", 422));
        assert_eq!(
            format!("{:?}", Conversion::hub::<Application>()),
            r#"Conversion { group: "example.com", kind: "Application", hub: "v1", spokes: [] }"#
        );
    }

    #[test]
    fn a_field_is_lost_when_it_is_missing_or_holds_another_value_but_not_when_null() {
        use serde_json::json;
        let lost = |from, to| lost_field(&from, &to, "");
        assert_eq!(lost(json!({"a": {"b": 1}}), json!({"a": {"b": 1}})), None);
        assert_eq!(
            lost(json!({"a": {"b": 1}}), json!({"a": {"b": 2}})),
            Some("a.b".into())
        );
        assert_eq!(
            lost(json!({"a": {"b": 1}}), json!({"a": {}})),
            Some("a.b".into())
        );
        assert_eq!(lost(json!({"a": 1}), json!({"a": "1"})), Some("a".into()));
        // A null is no value: a version without the field keeps all there was.
        assert_eq!(lost(json!({"a": null, "b": 1}), json!({"b": 1})), None);
        assert_eq!(lost(json!({"a": null}), json!({})), None);
    }

    #[test]
    fn same_fields_keeps_a_missing_option_and_refuses_a_changed_value() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Optional {
            replicas: i32,
            image: Option<String>,
        }
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Narrow {
            replicas: i32,
        }
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct Rounded {
            #[serde(deserialize_with = "round")]
            replicas: i32,
        }
        fn round<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
            i32::deserialize(deserializer).map(|replicas| replicas.max(1))
        }
        let none = Optional {
            replicas: 2,
            image: None,
        };
        assert_eq!(
            same_fields::<_, Narrow>(&none).unwrap(),
            Narrow { replicas: 2 }
        );
        // The other version reads the field, but as another value.
        let error = same_fields::<_, Rounded>(Narrow { replicas: 0 }).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the field `replicas` has no place in the other version: convert it by hand"
        );
    }

    #[test]
    fn webhooks_list_their_paths_and_converted_crds() {
        let empty = Webhooks::new();
        assert!(empty.is_empty());
        assert_eq!(empty.paths(), Vec::<&str>::new());
        assert_eq!(empty.converted_crds(), Vec::<String>::new());

        let mut only_conversion = Webhooks::new();
        only_conversion.conversion(Conversion::hub::<Application>());
        assert!(!only_conversion.is_empty());
        assert_eq!(only_conversion.paths(), ["/convert"]);
        assert_eq!(
            only_conversion.converted_crds(),
            ["applications.example.com"]
        );

        let mut only_validation = Webhooks::new();
        only_validation.validating("/validate", Rules);
        assert!(!only_validation.is_empty());
        assert_eq!(only_validation.paths(), ["/validate"]);
        assert_eq!(only_validation.converted_crds(), Vec::<String>::new());

        let all = webhooks();
        assert_eq!(all.paths(), ["/convert", "/mutate", "/validate"]);
        assert_eq!(all.converted_crds(), ["applications.example.com"]);
        assert_eq!(
            format!("{all:?}"),
            r#"Webhooks { paths: ["/convert", "/mutate", "/validate"], timeout: 30s, max_in_flight_bytes: 11010048 }"#
        );
    }

    #[tokio::test]
    async fn a_conversion_review_of_another_kind_or_api_version_is_refused() {
        for (api_version, kind) in [
            ("apiextensions.k8s.io/v1", "AdmissionReview"),
            ("admission.k8s.io/v1", "ConversionReview"),
        ] {
            let review = serde_json::json!({
                "apiVersion": api_version,
                "kind": kind,
                "request": {
                    "uid": "00000000-0000-0000-0000-000000000000",
                    "desiredAPIVersion": "example.com/v1",
                    "objects": [],
                },
            });
            let response =
                within(webhooks().call(CONVERT_PATH, serde_json::to_vec(&review).unwrap())).await;
            assert_eq!(
                response.status(),
                StatusCode::BAD_REQUEST,
                "{kind} of {api_version}"
            );
            assert_eq!(
                String::from_utf8_lossy(response.body()),
                format!(
                    "malformed ConversionReview: expected kind ConversionReview of apiextensions.k8s.io/v1, got kind `{kind}` of `{api_version}`"
                )
            );
        }
    }

    /// A request without a `Content-Length`, its body in chunks of `chunk` bytes.
    fn streamed(path: &str, body: Vec<u8>, chunk: usize) -> axum::http::Request<Body> {
        let chunks = body
            .chunks(chunk)
            .map(|chunk| Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(chunk)))
            .collect::<Vec<_>>();
        axum::http::Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap()
    }

    #[tokio::test]
    async fn a_streamed_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused() {
        let mut body = serde_json::to_vec(&review::create(&app(2, "nginx"))).unwrap();
        body.resize(MAX_BODY_BYTES, b' ');
        let router = webhooks().router();
        let response = within(Webhooks::send(
            router.clone(),
            streamed("/validate", body.clone(), 1 << 20),
        ))
        .await;
        assert_eq!(response.status(), StatusCode::OK);
        body.push(b' ');
        let response = within(Webhooks::send(router, streamed("/validate", body, 1 << 20))).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    /// Pins how much of a refused body is drained: up to the body limit, so that the client,
    /// still sending, reads the `429`, and no further, so that a client sending without end
    /// holds the server no longer than a whole review would.
    #[tokio::test(start_paused = true)]
    async fn a_body_refused_for_want_of_bytes_is_drained_up_to_the_limit() {
        use futures::StreamExt as _;
        const MIB: usize = 1 << 20;
        let mut webhooks = Webhooks::new();
        webhooks
            .max_in_flight_bytes(MAX_BODY_BYTES)
            .timeout(Duration::from_secs(10))
            .validating("/slow", Slow);
        let router = webhooks.router();
        // The first review holds 4 MiB while it is validated, slowly.
        let mut review = review::create(&app(1, "nginx"));
        review["request"]["object"]["metadata"]["annotations"] =
            serde_json::json!({"big": "x".repeat(4 * MIB - 2000)});
        let body = serde_json::to_vec(&review).unwrap();
        assert!(
            (4 * MIB - 2000..4 * MIB).contains(&body.len()),
            "{}",
            body.len()
        );
        let first = tokio::spawn(Webhooks::send(router.clone(), streamed("/slow", body, MIB)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        // The second sends 1 MiB at a time, 20 times: 3 fit, the 4th does not.
        let pulled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = pulled.clone();
        let chunks = futures::stream::iter(0..20).map(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, std::convert::Infallible>(Bytes::from(vec![b' '; MIB]))
        });
        let request = axum::http::Request::post("/slow")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from_stream(chunks))
            .unwrap();
        let second = within(Webhooks::send(router, request)).await;
        assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
        // 4 before the refusal, then 7 more: 8 MiB seen, past the 7 MiB limit.
        assert_eq!(pulled.load(std::sync::atomic::Ordering::SeqCst), 11);
        first.abort();
    }

    #[test]
    #[should_panic(expected = "the webhook path `/mutate` is registered twice")]
    fn a_path_registered_twice_is_a_programming_error() {
        webhooks().defaulting("/mutate", Defaults);
    }
}
