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

    #[derive(kube::CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
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
    async fn validate_update(&self, _: &Application, _: &Application) -> Result<Warnings, Denied> {
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
    let answer = within(webhooks().review("/mutate", &review::create_json::<Application>(sent)))
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
    let response = within(webhooks().call("/validate", serde_json::to_vec(&review).unwrap())).await;
    let answer: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "abc-123");
    assert_eq!(answer["response"]["allowed"], true);
    // Not a review at all.
    review["kind"] = "ConversionReview".into();
    let response = within(webhooks().call("/validate", serde_json::to_vec(&review).unwrap())).await;
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
        serde_json::to_value(v2::Application::new("web", v2::ApplicationSpec::default())).unwrap();
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
