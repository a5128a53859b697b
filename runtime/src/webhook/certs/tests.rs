use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::Value;

use super::*;
use crate::testing::within;
use crate::tls::tests::tempdir as tempfile_dir;

impl SelfManagedCerts {
    /// The same certificates, read against `clock` instead of the system's.
    fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }
}

const SECRETS: &str = "/api/v1/namespaces/operators/secrets";
const SECRET: &str = "/api/v1/namespaces/operators/secrets/webhook-server-cert";
const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// An API server that keeps objects by path, with resourceVersions, `409` on a stale update
/// or a second create, JSON patches, and a log of every request.
#[derive(Clone, Default)]
struct ApiServer {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    version: u64,
    log: Vec<String>,
    /// Answer every PATCH with 500.
    failing_patches: bool,
    /// Answer every create and update of a Secret with 403.
    forbidden_secret_writes: bool,
}

fn status(code: u16, reason: &str) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": reason, "reason": reason, "code": code});
    Response::builder()
        .status(code)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
}

fn ok(code: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

impl ApiServer {
    fn client(&self) -> Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let server = server.clone();
            async move { Ok::<_, std::convert::Infallible>(server.answer(request).await) }
        });
        Client::new(service, "default")
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let mut state = self.state.lock().unwrap();
        state.log.push(format!("{method} {path}"));
        let collection = [SECRETS, VALIDATING, MUTATING, CRDS].contains(&path.as_str());
        if state.forbidden_secret_writes
            && path.starts_with(SECRETS)
            && (method == Method::POST || method == Method::PUT)
        {
            return status(403, "Forbidden");
        }
        match (method, collection) {
            (Method::GET, true) => {
                let items: Vec<Value> = state
                    .objects
                    .iter()
                    .filter(|(key, _)| key.rsplit_once('/').unwrap().0 == path)
                    .map(|(_, object)| object.clone())
                    .collect();
                ok(
                    200,
                    &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
                )
            }
            (Method::POST, true) => {
                let key = format!("{path}/{}", body["metadata"]["name"].as_str().unwrap());
                if state.objects.contains_key(&key) {
                    return status(409, "AlreadyExists");
                }
                Self::store(&mut state, key, body)
            }
            (Method::GET, false) => match state.objects.get(&path) {
                Some(object) => ok(200, object),
                None => status(404, "NotFound"),
            },
            (Method::PUT, false) => {
                let Some(stored) = state.objects.get(&path) else {
                    return status(404, "NotFound");
                };
                if stored["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"] {
                    return status(409, "Conflict");
                }
                Self::store(&mut state, path, body)
            }
            (Method::PATCH, false) if state.failing_patches => status(500, "InternalError"),
            (Method::PATCH, false) => {
                let Some(mut object) = state.objects.get(&path).cloned() else {
                    return status(404, "NotFound");
                };
                let patch: json_patch::Patch = serde_json::from_value(body).unwrap();
                if json_patch::patch(&mut object, &patch).is_err() {
                    return status(422, "Invalid");
                }
                Self::store(&mut state, path, object)
            }
            _ => status(405, "MethodNotAllowed"),
        }
    }

    fn store(state: &mut State, key: String, mut object: Value) -> Response<Body> {
        state.version += 1;
        object["metadata"]["resourceVersion"] = json!(state.version.to_string());
        state.objects.insert(key, object.clone());
        ok(200, &object)
    }

    fn put(&self, key: &str, object: Value) {
        let mut state = self.state.lock().unwrap();
        Self::store(&mut state, key.to_owned(), object);
    }

    fn get(&self, key: &str) -> Value {
        self.state.lock().unwrap().objects[key].clone()
    }

    /// The requests since the last call, as `METHOD path`.
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.state.lock().unwrap().log)
    }

    fn writes(&self) -> Vec<String> {
        self.take_log()
            .into_iter()
            .filter(|request| !request.starts_with("GET"))
            .collect()
    }

    /// The CA bundle of a stored object at a JSON pointer, as text.
    fn bundle(&self, key: &str, pointer: &str) -> Option<String> {
        let object = self.get(key);
        let encoded = object.pointer(pointer)?.as_str()?;
        let bytes: ByteString = serde_json::from_value(json!(encoded)).unwrap();
        Some(String::from_utf8(bytes.0).unwrap())
    }
}

fn webhook(name: &str, service: &str) -> Value {
    json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"name": service, "namespace": "operators", "path": "/validate"}}})
}

/// The project's webhook configurations, another project's, and three CRDs: converted by
/// this Service, converted by another, and not converted.
fn cluster() -> ApiServer {
    let server = ApiServer::default();
    server.put(
            &format!("{VALIDATING}/my-operator-validating"),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "my-operator-validating"},
                   "webhooks": [webhook("vfirst.example.com", "my-operator-webhook-service"),
                                webhook("vsecond.example.com", "my-operator-webhook-service")]}),
        );
    server.put(
            &format!("{MUTATING}/my-operator-mutating"),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                   "metadata": {"name": "my-operator-mutating"},
                   "webhooks": [webhook("mfirst.example.com", "my-operator-webhook-service")]}),
        );
    server.put(
            &format!("{VALIDATING}/someone-else"),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": "someone-else"},
                   "webhooks": [webhook("vother.example.org", "other-service")]}),
        );
    for (name, service, strategy) in [
        ("apps.example.com", "my-operator-webhook-service", "Webhook"),
        ("others.example.com", "other-service", "Webhook"),
        ("plain.example.com", "my-operator-webhook-service", "None"),
    ] {
        let mut conversion = json!({"strategy": strategy});
        if strategy == "Webhook" {
            conversion["webhook"] = json!({"conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"name": service, "namespace": "operators", "path": "/convert"}}});
        }
        server.put(
            &format!("{CRDS}/{name}"),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": name},
                       "spec": {"group": "example.com", "scope": "Namespaced",
                                "names": {"plural": name.split('.').next().unwrap(), "kind": "App"},
                                "versions": [], "conversion": conversion}}),
        );
    }
    server.take_log();
    server
}

/// A clock that tests move forward.
fn clock() -> (Clock, Arc<AtomicU64>) {
    let offset = Arc::new(AtomicU64::new(0));
    let start = SystemTime::now();
    let moved = offset.clone();
    (
        Arc::new(move || start + Duration::from_secs(moved.load(Ordering::SeqCst))),
        offset,
    )
}

fn replica(server: &ApiServer, dir: &Path, clock: &Clock) -> SelfManagedCerts {
    SelfManagedCerts::new(
        server.client(),
        "operators",
        "webhook-server-cert",
        "my-operator-webhook-service",
        dir,
    )
    .crds([
        "apps.example.com".to_owned(),
        "others.example.com".to_owned(),
        "plain.example.com".to_owned(),
        "missing.example.com".to_owned(),
    ])
    .validity(Duration::from_secs(3 * 86_400), Duration::from_secs(86_400))
    .clock(clock.clone())
}

fn ca_count(bundle: &str) -> usize {
    CertificateDer::pem_slice_iter(bundle.as_bytes()).count()
}

/// The served bundle, wherever this Service is called, and nowhere else.
fn assert_injected(server: &ApiServer, bundle: &str) {
    let validating = format!("{VALIDATING}/my-operator-validating");
    for pointer in [
        "/webhooks/0/clientConfig/caBundle",
        "/webhooks/1/clientConfig/caBundle",
    ] {
        assert_eq!(server.bundle(&validating, pointer).as_deref(), Some(bundle));
    }
    let mutating = format!("{MUTATING}/my-operator-mutating");
    assert_eq!(
        server
            .bundle(&mutating, "/webhooks/0/clientConfig/caBundle")
            .as_deref(),
        Some(bundle)
    );
    let converted = format!("{CRDS}/apps.example.com");
    assert_eq!(
        server
            .bundle(&converted, "/spec/conversion/webhook/clientConfig/caBundle")
            .as_deref(),
        Some(bundle)
    );
    let others = format!("{VALIDATING}/someone-else");
    assert_eq!(
        server.bundle(&others, "/webhooks/0/clientConfig/caBundle"),
        None
    );
    let other_crd = format!("{CRDS}/others.example.com");
    assert_eq!(
        server.bundle(&other_crd, "/spec/conversion/webhook/clientConfig/caBundle"),
        None
    );
    assert!(
        server
            .get(&format!("{CRDS}/plain.example.com"))
            .pointer("/spec/conversion/webhook")
            .is_none()
    );
}

/// A TLS handshake with the files served, as the API server makes it: it trusts the bundle
/// and calls the Service by name.
async fn handshake(dir: &Path, bundle: &str, clock: &Clock) -> anyhow::Result<()> {
    let resolver = CertResolver::new(crate::tls::CertSource::from_flags(
        Some(dir),
        TLS_CRT,
        TLS_KEY,
    ))?;
    handshake_with(resolver, bundle, clock).await
}

/// The test's clock, for the client that checks the certificate's validity.
#[derive(Debug)]
struct At(SystemTime);

impl rustls::time_provider::TimeProvider for At {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(
            self.0.duration_since(SystemTime::UNIX_EPOCH).ok()?,
        ))
    }
}

async fn handshake_with(
    resolver: Arc<CertResolver>,
    bundle: &str,
    clock: &Clock,
) -> anyhow::Result<()> {
    let server_config = resolver.server_config(false)?;
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(ca?)?;
    }
    let client_config = rustls::ClientConfig::builder_with_details(
        Arc::new(rustls::crypto::ring::default_provider()),
        Arc::new(At(clock())),
    )
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let (client, server) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config);
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let name = ServerName::try_from("my-operator-webhook-service.operators.svc")?;
    let (accepted, connected) = tokio::join!(
        acceptor.accept(server),
        connector.connect(name.to_owned(), client)
    );
    accepted?;
    connected?;
    Ok(())
}

#[tokio::test]
async fn the_first_start_makes_the_secret_writes_the_files_and_sets_every_bundle() {
    let server = cluster();
    let dir = tempfile_dir();
    let (clock, _) = clock();
    let served = within(replica(&server, dir.path(), &clock).check())
        .await
        .unwrap();
    let secret = server.get(SECRET);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["metadata"]["namespace"], "operators");
    // The label a webhook on Secrets can leave out with an objectSelector.
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "rsbuilder-runtime"
    );
    assert_eq!(
        Material::from_secret(&serde_json::from_value(secret).unwrap()),
        Some(served.clone())
    );
    assert_eq!(ca_count(&served.bundle), 1);
    assert!(
        !served.bundle.contains("PRIVATE KEY"),
        "the bundle holds a key"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join(TLS_CRT)).unwrap(),
        served.cert
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join(TLS_KEY)).unwrap(),
        served.key
    );
    assert_injected(&server, &served.bundle);
    #[cfg(unix)]
    for file in [TLS_CRT, TLS_KEY] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    within(handshake(dir.path(), &served.bundle, &clock))
        .await
        .unwrap();
    // Another CA is not trusted: the handshake checks something.
    let stranger = rcgen::generate_simple_self_signed(vec!["x".to_owned()]).unwrap();
    assert!(
        within(handshake(dir.path(), &stranger.cert.pem(), &clock))
            .await
            .is_err()
    );
    // A second check changes nothing.
    server.take_log();
    let again = within(replica(&server, dir.path(), &clock).check())
        .await
        .unwrap();
    assert_eq!(again, served);
    assert_eq!(server.writes(), Vec::<String>::new());
}

#[tokio::test]
async fn a_second_replica_serves_the_first_ones_certificate() {
    let server = cluster();
    let (first_dir, second_dir) = (tempfile_dir(), tempfile_dir());
    let (clock, _) = clock();
    let first = replica(&server, first_dir.path(), &clock);
    let second = replica(&server, second_dir.path(), &clock);
    // Both start at once, find no Secret and create one: one create wins, the other
    // replica reads the winner's.
    let (a, b) = within(async { tokio::join!(first.check(), second.check()) }).await;
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a, b);
    let creates = server
        .writes()
        .into_iter()
        .filter(|request| request == &format!("POST {SECRETS}"))
        .count();
    assert_eq!(creates, 2, "both replicas tried to create the Secret");
    assert_eq!(
        std::fs::read(first_dir.path().join(TLS_CRT)).unwrap(),
        std::fs::read(second_dir.path().join(TLS_CRT)).unwrap()
    );
    assert_injected(&server, &a.bundle);
    // A replica started later reads it too, and writes nothing.
    let third_dir = tempfile_dir();
    let c = within(replica(&server, third_dir.path(), &clock).check())
        .await
        .unwrap();
    assert_eq!(c, a);
    assert_eq!(server.writes(), Vec::<String>::new());
}

#[tokio::test]
async fn a_certificate_is_renewed_before_it_expires_and_the_previous_ca_stays_trusted() {
    let server = cluster();
    let (first_dir, second_dir) = (tempfile_dir(), tempfile_dir());
    let (clock, offset) = clock();
    let first = replica(&server, first_dir.path(), &clock);
    let second = replica(&server, second_dir.path(), &clock);
    let old = within(first.check()).await.unwrap();
    within(second.check()).await.unwrap();
    // Valid for 3 days, renewed 1 day before: after 1 day and 23 hours it is kept.
    offset.store(2 * 86_400 - 3_600, Ordering::SeqCst);
    assert_eq!(within(first.check()).await.unwrap(), old);
    // After 2 days and an hour it is renewed, once, by one of the replicas.
    offset.store(2 * 86_400 + 3_600, Ordering::SeqCst);
    server.take_log();
    let (a, b) = within(async { tokio::join!(first.check(), second.check()) }).await;
    let (new, also_new) = (a.unwrap(), b.unwrap());
    assert_eq!(new, also_new);
    assert_ne!(new.cert, old.cert);
    assert_ne!(new.key, old.key);
    let updates = server
        .writes()
        .into_iter()
        .filter(|request| request == &format!("PUT {SECRET}"))
        .count();
    assert!(
        (1..=2).contains(&updates),
        "{updates} updates of the Secret"
    );
    // The bundle holds the new CA and the previous one.
    assert_eq!(ca_count(&new.bundle), 2);
    assert!(new.bundle.ends_with(&old.bundle));
    assert_injected(&server, &new.bundle);
    // The new bundle trusts what a replica that has not reloaded yet still serves.
    let stale = tempfile_dir();
    std::fs::write(stale.path().join(TLS_CRT), &old.cert).unwrap();
    std::fs::write(stale.path().join(TLS_KEY), &old.key).unwrap();
    within(handshake(stale.path(), &new.bundle, &clock))
        .await
        .unwrap();
    within(handshake(first_dir.path(), &new.bundle, &clock))
        .await
        .unwrap();
    // The next renewal drops the CA before the previous one.
    offset.store(4 * 86_400 + 7_200, Ordering::SeqCst);
    let newer = within(first.check()).await.unwrap();
    assert_eq!(ca_count(&newer.bundle), 2);
    assert!(newer.bundle.ends_with(new.current_ca_pem().as_str()));
    assert!(!newer.bundle.contains(old.bundle.as_str()));
}

#[tokio::test(start_paused = true)]
async fn the_running_server_takes_the_renewed_certificate_without_a_restart() {
    let server = cluster();
    let dir = tempfile_dir();
    let (clock, offset) = clock();
    let certs = replica(&server, dir.path(), &clock).interval(Duration::from_secs(60));
    let old = within(certs.check()).await.unwrap();
    let resolver = CertResolver::new(crate::tls::CertSource::from_flags(
        Some(dir.path()),
        TLS_CRT,
        TLS_KEY,
    ))
    .unwrap();
    let served = resolver.current();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(certs.run(resolver.clone(), shutdown.clone()));
    offset.store(2 * 86_400 + 3_600, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(61)).await;
    let renewed =
        Material::from_secret(&serde_json::from_value(server.get(SECRET)).unwrap()).unwrap();
    assert_ne!(renewed, old);
    let now_served = resolver.current();
    assert!(
        !Arc::ptr_eq(&served, &now_served),
        "the server still presents the old certificate"
    );
    within(handshake_with(resolver, &renewed.bundle, &clock))
        .await
        .unwrap();
    shutdown.cancel();
    within(running).await.unwrap();
}

#[tokio::test]
async fn a_bundle_edited_away_is_set_again() {
    let server = cluster();
    let dir = tempfile_dir();
    let (clock, _) = clock();
    let certs = replica(&server, dir.path(), &clock);
    let served = within(certs.check()).await.unwrap();
    // Someone applies the configurations again, without caBundle, and breaks the CRD's.
    let validating = format!("{VALIDATING}/my-operator-validating");
    let mut edited = server.get(&validating);
    edited["webhooks"][1]["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    server.put(&validating, edited);
    let crd = format!("{CRDS}/apps.example.com");
    let mut edited = server.get(&crd);
    edited["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = json!("AAAA");
    server.put(&crd, edited);
    server.take_log();
    within(certs.check()).await.unwrap();
    assert_injected(&server, &served.bundle);
    assert_eq!(
        server.writes(),
        [format!("PATCH {validating}"), format!("PATCH {crd}")]
    );
}

#[tokio::test]
async fn a_secret_that_does_not_serve_this_service_is_replaced() {
    let (clock, _) = clock();
    for (edit, why) in [
        ("not pem", "a certificate that is not PEM"),
        ("other service", "a certificate for another Service"),
        ("other key", "a key of another certificate"),
        ("other ca", "a bundle without the signing CA"),
    ] {
        let server = cluster();
        let dir = tempfile_dir();
        let certs = replica(&server, dir.path(), &clock);
        let served = within(certs.check()).await.unwrap();
        let other = within(
            SelfManagedCerts::new(
                server.client(),
                "operators",
                "x",
                "other-service",
                dir.path(),
            )
            .clock(clock.clone())
            .ensure_secret(),
        )
        .await
        .unwrap();
        let broken = match edit {
            "not pem" => Material {
                cert: "garbage".to_owned(),
                ..served.clone()
            },
            "other service" => Material {
                bundle: served.bundle.clone() + &other.bundle,
                ..other.clone()
            },
            "other key" => Material {
                key: other.key.clone(),
                ..served.clone()
            },
            _ => Material {
                bundle: other.bundle.clone(),
                ..served.clone()
            },
        };
        let mut secret = server.get(SECRET);
        secret["data"] = serde_json::to_value(broken.data()).unwrap();
        server.put(SECRET, secret);
        let renewed = within(certs.check()).await.unwrap();
        assert_ne!(renewed.cert, served.cert, "{why} was kept");
        assert_ne!(renewed.cert, broken.cert, "{why} was kept");
        within(handshake(dir.path(), &renewed.bundle, &clock))
            .await
            .unwrap_or_else(|error| panic!("after {why}: {error:#}"));
    }
}

/// Pins `Debug`: it names where the certificate lives and which CRDs get it.
#[tokio::test]
async fn debug_names_the_secret_the_service_and_the_crds() {
    let certs = SelfManagedCerts::new(
        cluster().client(),
        "operators",
        "webhook-server-cert",
        "my-operator-webhook-service",
        "/certs",
    )
    .crds(["apps.example.com".to_owned()]);
    assert_eq!(
        format!("{certs:?}"),
        "SelfManagedCerts { namespace: \"operators\", secret: \"webhook-server-cert\", service: \"my-operator-webhook-service\", crds: [\"apps.example.com\"], dir: \"/certs\", .. }"
    );
}

/// The defaults the README states: valid for a year, renewed 90 days before it expires, and
/// valid from an hour before it was made, for replicas whose clocks lag.
#[tokio::test]
async fn a_default_certificate_lives_a_year_is_renewed_90_days_before_and_is_backdated() {
    let (clock, offset) = clock();
    let server = cluster();
    let day = 86_400;
    // Made at day 2, so that the clock can go back by an hour and more.
    offset.store(2 * day, Ordering::SeqCst);
    let certs = SelfManagedCerts::new(
        server.client(),
        "operators",
        "webhook-server-cert",
        "my-operator-webhook-service",
        "/nonexistent",
    )
    .clock(clock.clone());
    let material = certs.generate(None).unwrap();
    let usable_at = |seconds: u64| {
        offset.store(seconds, Ordering::SeqCst);
        certs.usable(&material)
    };
    assert!(usable_at(2 * day));
    assert!(usable_at(2 * day + 274 * day), "renewed too early");
    assert!(
        !usable_at(2 * day + 276 * day),
        "not renewed 90 days before expiry"
    );
    // Checked now and 90 days on: an hour back it verifies, more than an hour back not.
    assert!(usable_at(2 * day - 3_540));
    assert!(!usable_at(2 * day - 3_660));
}

/// A bundle is not patched away to the old one by a replica that has not read the renewal
/// yet: the newer bundle trusts its CA.
#[tokio::test]
async fn a_bundle_that_trusts_this_replicas_ca_is_left_alone() {
    let (clock, _) = clock();
    let server = cluster();
    let certs = replica(&server, Path::new("/nonexistent"), &clock);
    let old = certs.generate(None).unwrap();
    let new = certs.generate(Some(&old)).unwrap();
    let bytes = |bundle: &str| ByteString(bundle.as_bytes().to_vec());
    assert!(trusts(Some(&bytes(&new.bundle)), &old.bundle));
    assert!(!trusts(Some(&bytes(&old.bundle)), &new.bundle));
    assert!(!trusts(Some(&bytes("AAAA")), &old.bundle));
    assert!(!trusts(None, &old.bundle));
    let service = ServiceReference {
        name: "my-operator-webhook-service".to_owned(),
        namespace: "operators".to_owned(),
        ..ServiceReference::default()
    };
    let newer = bytes(&new.bundle);
    let hooks = [("vfirst.example.com", Some(&service), Some(&newer))];
    assert_eq!(certs.webhooks_patch(hooks.into_iter(), &old.bundle), None);
    let older = bytes(&old.bundle);
    let hooks = [("vfirst.example.com", Some(&service), Some(&older))];
    assert!(
        certs
            .webhooks_patch(hooks.into_iter(), &new.bundle)
            .is_some()
    );
}

/// The server is given a certificate only once the bundles trust it: a check whose patches
/// fail writes no file.
#[tokio::test]
async fn no_certificate_is_served_before_the_bundles_trust_it() {
    let server = cluster();
    let dir = tempfile_dir();
    let (clock, _) = clock();
    server.state.lock().unwrap().failing_patches = true;
    let certs = replica(&server, dir.path(), &clock);
    assert!(within(certs.check()).await.is_err());
    assert!(!dir.path().join(TLS_CRT).exists());
    server.state.lock().unwrap().failing_patches = false;
    let served = within(certs.check()).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join(TLS_CRT)).unwrap(),
        served.cert
    );
}

/// A refused write is reported as the API server's refusal, not as a conflict to retry.
#[tokio::test]
async fn a_refused_create_or_update_is_reported_as_such() {
    let server = cluster();
    let dir = tempfile_dir();
    let (clock, offset) = clock();
    let certs = replica(&server, dir.path(), &clock);
    server.state.lock().unwrap().forbidden_secret_writes = true;
    let error = format!("{:#}", within(certs.check()).await.unwrap_err());
    assert!(
        error.contains("failed to create the Secret operators/webhook-server-cert"),
        "{error}"
    );
    assert!(error.contains("Forbidden"), "{error}");
    server.state.lock().unwrap().forbidden_secret_writes = false;
    within(certs.check()).await.unwrap();
    // Due for renewal, and the update refused.
    offset.store(2 * 86_400 + 3_600, Ordering::SeqCst);
    server.state.lock().unwrap().forbidden_secret_writes = true;
    let error = format!("{:#}", within(certs.check()).await.unwrap_err());
    assert!(
        error.contains("failed to update the Secret operators/webhook-server-cert"),
        "{error}"
    );
}

/// A temporary file left by a writer that died is replaced, and only the new bytes remain.
#[test]
fn a_temporary_file_left_by_a_dead_writer_is_replaced() {
    let dir = tempfile_dir();
    let path = dir.path().join(TLS_KEY);
    let temporary = dir.path().join(format!(".{TLS_KEY}.tmp"));
    std::fs::write(&temporary, "half a key from the last process").unwrap();
    write_atomically(&path, b"the key").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"the key");
    assert!(!temporary.exists());
}

/// A temporary path that cannot be removed (here a directory) is named as what failed,
/// and nothing is written.
#[test]
fn a_temporary_path_that_cannot_be_removed_is_the_error() {
    let dir = tempfile_dir();
    let path = dir.path().join(TLS_KEY);
    let temporary = dir.path().join(format!(".{TLS_KEY}.tmp"));
    std::fs::create_dir(&temporary).unwrap();
    std::fs::write(temporary.join("inside"), "").unwrap();
    let error = format!("{:#}", write_atomically(&path, b"the key").unwrap_err());
    assert!(
        error.starts_with(&format!("failed to remove `{}`", temporary.display())),
        "{error}"
    );
    assert!(!path.exists());
}

impl Material {
    fn current_ca_pem(&self) -> String {
        pem_certificate(&self.current_ca().unwrap())
    }
}
