//! Webhook serving certificates without cert-manager.
//!
//! With `--webhook-cert-secret`, every replica runs [`SelfManagedCerts`], which
//! - keeps a CA bundle, a serving certificate for the webhook Service and its key in one Secret
//!   of the manager's namespace. The first replica to find the Secret missing creates it; a
//!   second replica's create gets `409` and it reads the first one's. Every rotation replaces
//!   the Secret with its `resourceVersion`, so two replicas that rotate at once agree on one;
//! - writes them into `--webhook-cert-path`, where the webhook server's [`CertResolver`] reloads
//!   them for new connections, without a restart;
//! - sets that bundle as the `caBundle` of every webhook of the cluster's webhook
//!   configurations whose `clientConfig.service` is the webhook Service, and of the conversion
//!   webhook of the project's converted CRDs, and sets it again when someone edits it away; a
//!   bundle that trusts this replica's CA is left alone, since it may be a newer one;
//! - writes the certificate for the server only once the bundles trust it;
//! - makes a new CA and certificate when the certificate would not verify [`renew_before`]
//!   from now (or now): expiring, for other DNS names, not matching its key, or not PEM. The
//!   bundle keeps the previous CA next to the new one, so that a replica still serving the
//!   previous certificate is trusted until it reloads.
//!
//! The CA's private key is never stored: it signs the serving certificate and is dropped, so
//! the Secret cannot mint other certificates. Everything is checked again every
//! [`CHECK_INTERVAL`].
//!
//! The manager needs these permissions, which `config/webhook-self-certs` grants: `get`,
//! `create` and `update` on Secrets in its namespace; `list` and `patch` on
//! validatingwebhookconfigurations and mutatingwebhookconfigurations; `get` and `patch` on
//! customresourcedefinitions.
//!
//! [`renew_before`]: SelfManagedCerts::validity

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ServiceReference, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::tls::CertResolver;

/// How often the Secret, the files and the CA bundles are checked.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(60);

/// How long a generated CA and serving certificate are valid.
pub const VALIDITY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How long before it expires a certificate is replaced.
pub const RENEW_BEFORE: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// How long one check may take, its requests to the API server together.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// Certificates are valid from this long before they are made, for replicas whose clocks lag.
const BACKDATE: Duration = Duration::from_secs(60 * 60);

/// The Secret's keys: the serving certificate, its key, and the CA bundle.
const TLS_CRT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const CA_CRT: &str = "ca.crt";

/// A clock, replaced in tests.
type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// What the webhook server presents, and what clients trust: PEM text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The serving certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// The CA certificates that clients trust, the current one first.
    pub bundle: String,
}

impl Material {
    fn from_secret(secret: &Secret) -> Option<Self> {
        let data = secret.data.as_ref()?;
        let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
        Some(Self {
            cert: text(TLS_CRT)?,
            key: text(TLS_KEY)?,
            bundle: text(CA_CRT)?,
        })
    }

    fn data(&self) -> std::collections::BTreeMap<String, ByteString> {
        [
            (TLS_CRT, &self.cert),
            (TLS_KEY, &self.key),
            (CA_CRT, &self.bundle),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), ByteString(value.as_bytes().to_vec())))
        .collect()
    }

    /// The first certificate of the bundle: the CA that signed the current certificate.
    fn current_ca(&self) -> Option<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.bundle.as_bytes())
            .next()?
            .ok()
    }
}

/// Keeps the webhook server's certificate in a Secret and its CA in the cluster's webhook
/// configurations and converted CRDs (see the [module](self)).
pub struct SelfManagedCerts {
    client: Client,
    namespace: String,
    secret: String,
    service: String,
    crds: Vec<String>,
    dir: PathBuf,
    cert_name: String,
    key_name: String,
    validity: Duration,
    renew_before: Duration,
    interval: Duration,
    clock: Clock,
}

impl std::fmt::Debug for SelfManagedCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfManagedCerts")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .field("service", &self.service)
            .field("crds", &self.crds)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl SelfManagedCerts {
    /// Certificates for the Service `service` of `namespace`, kept in the Secret `secret` of
    /// that namespace, written into `dir` as `tls.crt` and `tls.key`.
    pub fn new(
        client: Client,
        namespace: impl Into<String>,
        secret: impl Into<String>,
        service: impl Into<String>,
        dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            client,
            namespace: namespace.into(),
            secret: secret.into(),
            service: service.into(),
            crds: Vec::new(),
            dir: dir.into(),
            cert_name: TLS_CRT.to_owned(),
            key_name: TLS_KEY.to_owned(),
            validity: VALIDITY,
            renew_before: RENEW_BEFORE,
            interval: CHECK_INTERVAL,
            clock: Arc::new(SystemTime::now),
        }
    }

    /// The file names inside the directory (`--webhook-cert-name`, `--webhook-cert-key`).
    pub fn file_names(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.cert_name = cert.into();
        self.key_name = key.into();
        self
    }

    /// The CRDs (`<plural>.<group>`) whose conversion webhook gets the CA bundle.
    pub fn crds(mut self, crds: impl IntoIterator<Item = String>) -> Self {
        self.crds = crds.into_iter().collect();
        self
    }

    /// How long certificates are valid, and how long before expiry they are replaced
    /// (defaults [`VALIDITY`] and [`RENEW_BEFORE`]).
    pub fn validity(mut self, validity: Duration, renew_before: Duration) -> Self {
        assert!(
            renew_before < validity,
            "certificates must be renewed before they expire"
        );
        self.validity = validity;
        self.renew_before = renew_before;
        self
    }

    /// How often everything is checked (default [`CHECK_INTERVAL`]).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The names clients reach the Service by, as cert-manager's Certificate lists them.
    pub fn dns_names(&self) -> Vec<String> {
        let (service, namespace) = (&self.service, &self.namespace);
        vec![
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
        ]
    }

    /// One check: the Secret, the files, the CA bundles. Returns what is served.
    pub async fn check(&self) -> anyhow::Result<Material> {
        tokio::time::timeout(CHECK_TIMEOUT, async {
            let material = self.ensure_secret().await?;
            // The bundle first: it trusts the previous CA too, so the certificate served now
            // stays trusted, and the new one is served only once it is.
            self.inject(&material.bundle).await?;
            self.write_files(&material)?;
            Ok(material)
        })
        .await
        .with_context(|| {
            format!("checking the webhook certificate took longer than {CHECK_TIMEOUT:?}")
        })?
    }

    /// Checks every interval until `shutdown`; reloads `resolver` when the files change. A
    /// failed check is logged and tried again at the next.
    pub async fn run(self, resolver: Arc<CertResolver>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.interval) => {}
            }
            match self.check().await {
                Ok(_) => {
                    if let Err(error) = resolver.reload_if_changed() {
                        tracing::warn!("keeping the previous webhook certificate: {error:#}");
                    }
                }
                Err(error) => tracing::warn!("{error:#}"),
            }
        }
    }

    fn now(&self) -> SystemTime {
        (self.clock)()
    }

    /// The Secret's certificate when it is usable; else a new one, created or replaced.
    async fn ensure_secret(&self) -> anyhow::Result<Material> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let what = || format!("Secret {}/{}", self.namespace, self.secret);
        // Each conflict means another replica wrote a usable certificate, which the next
        // round reads; three in a row are a fight that is better retried later.
        for _ in 0..3 {
            let Some(mut secret) = api
                .get_opt(&self.secret)
                .await
                .with_context(|| format!("failed to read the {}", what()))?
            else {
                let material = self.generate(None)?;
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(self.secret.clone()),
                        namespace: Some(self.namespace.clone()),
                        labels: Some(
                            [(
                                "app.kubernetes.io/managed-by".to_owned(),
                                "rsbuilder-runtime".to_owned(),
                            )]
                            .into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".to_owned()),
                    data: Some(material.data()),
                    ..Secret::default()
                };
                match api.create(&PostParams::default(), &secret).await {
                    Ok(_) => {
                        tracing::info!(secret = %what(), "made the webhook serving certificate");
                        return Ok(material);
                    }
                    Err(kube::Error::Api(status)) if status.code == 409 => continue,
                    Err(error) => {
                        return Err(error)
                            .with_context(|| format!("failed to create the {}", what()));
                    }
                }
            };
            let found = Material::from_secret(&secret);
            if let Some(found) = found.as_ref().filter(|found| self.usable(found)) {
                return Ok(found.clone());
            }
            let material = self.generate(found.as_ref())?;
            // The update carries the resourceVersion that was read.
            secret.data = Some(material.data());
            match api
                .replace(&self.secret, &PostParams::default(), &secret)
                .await
            {
                Ok(_) => {
                    tracing::info!(secret = %what(), "renewed the webhook serving certificate");
                    return Ok(material);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => {
                    return Err(error).with_context(|| format!("failed to update the {}", what()));
                }
            }
        }
        anyhow::bail!("the {} changed under every attempt to update it", what())
    }

    /// Whether `material` verifies against its bundle, for the Service's name, with its key,
    /// now and [`RENEW_BEFORE`](Self::validity) from now.
    fn usable(&self, material: &Material) -> bool {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let Ok(chain) =
            CertificateDer::pem_slice_iter(material.cert.as_bytes()).collect::<Result<Vec<_>, _>>()
        else {
            return false;
        };
        let Ok(key) = PrivateKeyDer::from_pem_slice(material.key.as_bytes()) else {
            return false;
        };
        let Some((leaf, intermediates)) = chain.split_first() else {
            return false;
        };
        if rustls::sign::CertifiedKey::from_der(chain.clone(), key, &provider).is_err() {
            return false;
        }
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(material.bundle.as_bytes()) {
            let Ok(ca) = ca else { return false };
            if roots.add(ca).is_err() {
                return false;
            }
        }
        let Ok(verifier) =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()
        else {
            return false;
        };
        let Ok(name) = ServerName::try_from(self.dns_names().swap_remove(0)) else {
            return false;
        };
        let now = self.now();
        [now, now + self.renew_before].into_iter().all(|at| {
            let Ok(since_epoch) = at.duration_since(SystemTime::UNIX_EPOCH) else {
                return false;
            };
            verifier
                .verify_server_cert(
                    leaf,
                    intermediates,
                    &name,
                    &[],
                    UnixTime::since_unix_epoch(since_epoch),
                )
                .is_ok()
        })
    }

    /// A new CA and serving certificate; the bundle keeps the current CA of `previous`.
    fn generate(&self, previous: Option<&Material>) -> anyhow::Result<Material> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let now = self.now();
        // rcgen's dates, from the Unix epoch on.
        let time = |at: SystemTime| -> anyhow::Result<_> {
            let since_epoch = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .context("the clock is before 1970")?;
            Ok(rcgen::date_time_ymd(1970, 1, 1) + since_epoch)
        };
        let (not_before, not_after) = (time(now - BACKDATE)?, time(now + self.validity)?);

        let ca_key = KeyPair::generate().context("failed to make the CA's key")?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!("{}.{} webhook CA", self.service, self.namespace),
        );
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        (ca_params.not_before, ca_params.not_after) = (not_before, not_after);
        let ca = ca_params
            .self_signed(&ca_key)
            .context("failed to make the CA")?;
        let issuer = Issuer::new(ca_params, ca_key);

        let key = KeyPair::generate().context("failed to make the serving key")?;
        let mut params = CertificateParams::new(self.dns_names())
            .context("the webhook Service's name is not a DNS name")?;
        params
            .distinguished_name
            .push(DnType::CommonName, self.dns_names().swap_remove(0));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        (params.not_before, params.not_after) = (not_before, not_after);
        let cert = params
            .signed_by(&key, &issuer)
            .context("failed to sign the serving certificate")?;

        let mut bundle = ca.pem();
        if let Some(previous) = previous.and_then(Material::current_ca) {
            bundle.push_str(&pem_certificate(&previous));
        }
        Ok(Material {
            cert: cert.pem(),
            key: key.serialize_pem(),
            bundle,
        })
    }

    /// Writes the certificate and key into the directory when they differ, each through a
    /// temporary file and a rename, the key first.
    fn write_files(&self, material: &Material) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("failed to create `{}`", self.dir.display()))?;
        for (name, text) in [
            (&self.key_name, &material.key),
            (&self.cert_name, &material.cert),
        ] {
            let path = self.dir.join(name);
            if std::fs::read(&path).is_ok_and(|bytes| bytes == text.as_bytes()) {
                continue;
            }
            write_atomically(&path, text.as_bytes())?;
        }
        Ok(())
    }

    /// Sets `bundle` wherever the webhook Service is called: the webhook configurations and the
    /// converted CRDs. Every object is tried; the first failure is returned.
    async fn inject(&self, bundle: &str) -> anyhow::Result<()> {
        let mut failures = Vec::new();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        for configuration in validating
            .list(&ListParams::default())
            .await
            .context("failed to list the validating webhook configurations")?
        {
            let hooks = configuration.webhooks.iter().flatten().map(|hook| {
                (
                    hook.name.as_str(),
                    hook.client_config.service.as_ref(),
                    hook.client_config.ca_bundle.as_ref(),
                )
            });
            let patch = self.webhooks_patch(hooks, bundle);
            if let Err(error) = apply(&validating, configuration.metadata.name, patch).await {
                failures.push(error);
            }
        }
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        for configuration in mutating
            .list(&ListParams::default())
            .await
            .context("failed to list the mutating webhook configurations")?
        {
            let hooks = configuration.webhooks.iter().flatten().map(|hook| {
                (
                    hook.name.as_str(),
                    hook.client_config.service.as_ref(),
                    hook.client_config.ca_bundle.as_ref(),
                )
            });
            let patch = self.webhooks_patch(hooks, bundle);
            if let Err(error) = apply(&mutating, configuration.metadata.name, patch).await {
                failures.push(error);
            }
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for name in &self.crds {
            let crd = match crds.get_opt(name).await {
                Ok(Some(crd)) => crd,
                // Not installed (yet): nothing calls its conversion webhook.
                Ok(None) => continue,
                Err(error) => {
                    failures.push(
                        anyhow::Error::new(error).context(format!("failed to read the CRD {name}")),
                    );
                    continue;
                }
            };
            let client_config = crd
                .spec
                .conversion
                .as_ref()
                .filter(|conversion| conversion.strategy == "Webhook")
                .and_then(|conversion| conversion.webhook.as_ref())
                .and_then(|webhook| webhook.client_config.as_ref());
            let Some(client_config) = client_config else {
                continue;
            };
            let ours = client_config.service.as_ref().is_some_and(|service| {
                service.name == self.service && service.namespace == self.namespace
            });
            if !ours || trusts(client_config.ca_bundle.as_ref(), bundle) {
                continue;
            }
            let patch = json!([
                {"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"},
                {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle",
                 "value": ByteString(bundle.as_bytes().to_vec())},
            ]);
            if let Err(error) = apply(&crds, Some(name.clone()), Some(patch)).await {
                failures.push(error);
            }
        }
        match failures.into_iter().next() {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }

    /// A JSON patch setting `bundle` on the webhooks that call this Service; `None` when they
    /// all have it. Each change first tests the webhook's name at its index.
    fn webhooks_patch<'a>(
        &self,
        hooks: impl Iterator<
            Item = (
                &'a str,
                Option<&'a ServiceReference>,
                Option<&'a ByteString>,
            ),
        >,
        bundle: &str,
    ) -> Option<serde_json::Value> {
        let mut operations = Vec::new();
        for (index, (name, service, ca_bundle)) in hooks.enumerate() {
            let ours = service.is_some_and(|service| {
                service.name == self.service && service.namespace == self.namespace
            });
            if ours && !trusts(ca_bundle, bundle) {
                operations.push(
                    json!({"op": "test", "path": format!("/webhooks/{index}/name"), "value": name}),
                );
                operations.push(
                    json!({"op": "add", "path": format!("/webhooks/{index}/clientConfig/caBundle"),
                                        "value": ByteString(bundle.as_bytes().to_vec())}),
                );
            }
        }
        (!operations.is_empty()).then_some(serde_json::Value::Array(operations))
    }
}

/// Whether the `caBundle` found trusts the current CA of `bundle`. A bundle that does is left
/// alone: it may be a newer one, which another replica set after a renewal this one has not
/// read yet, and which still holds this replica's CA as the previous one.
fn trusts(current: Option<&ByteString>, bundle: &str) -> bool {
    let Some(ours) = CertificateDer::pem_slice_iter(bundle.as_bytes())
        .next()
        .and_then(Result::ok)
    else {
        return false;
    };
    current.is_some_and(|current| {
        CertificateDer::pem_slice_iter(&current.0)
            .filter_map(Result::ok)
            .any(|ca| ca == ours)
    })
}

/// Applies a JSON patch, when there is one, to the object `name`.
async fn apply<K>(
    api: &Api<K>,
    name: Option<String>,
    patch: Option<serde_json::Value>,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let (Some(name), Some(patch)) = (name, patch) else {
        return Ok(());
    };
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    api.patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .with_context(|| format!("failed to set the CA bundle of {name}"))?;
    tracing::info!(%name, "set the webhook CA bundle");
    Ok(())
}

fn pem_certificate(der: &CertificateDer<'_>) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`: a reader
/// sees the old file or the new one, never half of one.
///
/// The file is readable by its owner only, as the key must be, and the temporary file is
/// created anew, never opened through a link that was there.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    // One left by a process that died while writing it.
    match std::fs::remove_file(&temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error)
                .with_context(|| format!("failed to remove `{}`", temporary.display()));
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&temporary)
        .with_context(|| format!("failed to create `{}`", temporary.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("failed to write `{}`", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("failed to write `{}`", path.display()))
}
