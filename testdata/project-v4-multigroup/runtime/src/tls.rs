//! Certificates for the HTTPS endpoints: from a mounted directory (a cert-manager Secret), reloaded
//! when the files change, or self-signed when no directory is given.
//!
//! The server holds a [`CertResolver`], which hands every new TLS connection the certificate of
//! the moment: a rotated certificate takes effect without a restart, and connections that are
//! open keep theirs.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

/// How often mounted certificate files are checked for changes. The kubelet updates a mounted
/// Secret within about a minute of its change, so this adds little to that.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The bytes of a certificate file and of its key file.
type Fingerprint = (Vec<u8>, Vec<u8>);

/// Where an HTTPS endpoint takes its certificate from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// A certificate made at startup for `localhost`, as controller-runtime does; clients must
    /// then skip verification (`insecureSkipVerify` in `config/prometheus/monitor.yaml`).
    SelfSigned,
    /// PEM files, typically a cert-manager Secret mounted into the pod.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
}

impl CertSource {
    /// The source for a `--*-cert-path` directory and its `--*-cert-name` and `--*-cert-key` files.
    pub fn from_flags(dir: Option<&Path>, cert_name: &str, key_name: &str) -> Self {
        match dir {
            None => Self::SelfSigned,
            Some(dir) => Self::Files {
                cert: dir.join(cert_name),
                key: dir.join(key_name),
            },
        }
    }

    /// The bytes of the files, to notice a change; `None` for a self-signed certificate or
    /// files that cannot be read right now.
    fn fingerprint(&self) -> Option<Fingerprint> {
        match self {
            Self::SelfSigned => None,
            Self::Files { cert, key } => {
                Some((std::fs::read(cert).ok()?, std::fs::read(key).ok()?))
            }
        }
    }

    /// The certificate, and the bytes it was made from.
    fn load(
        &self,
        provider: &CryptoProvider,
    ) -> anyhow::Result<(CertifiedKey, Option<Fingerprint>)> {
        let (certs, key, fingerprint) = match self {
            Self::SelfSigned => {
                let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                    .context("failed to generate a self-signed certificate")?;
                let key = PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der());
                (vec![generated.cert.der().clone()], key.into(), None)
            }
            Self::Files { cert, key } => {
                let cert_pem = std::fs::read(cert)
                    .with_context(|| format!("failed to read certificate `{}`", cert.display()))?;
                let key_pem = std::fs::read(key)
                    .with_context(|| format!("failed to read private key `{}`", key.display()))?;
                let certs = CertificateDer::pem_slice_iter(&cert_pem)
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("failed to read certificate `{}`", cert.display()))?;
                anyhow::ensure!(
                    !certs.is_empty(),
                    "certificate `{}` holds no PEM certificate",
                    cert.display()
                );
                let private: PrivateKeyDer<'static> = PrivateKeyDer::from_pem_slice(&key_pem)
                    .with_context(|| format!("failed to read private key `{}`", key.display()))?;
                (certs, private, Some((cert_pem, key_pem)))
            }
        };
        let certified = CertifiedKey::from_der(certs, key, provider)
            .with_context(|| format!("the certificate of {self} does not match its key"))?;
        Ok((certified, fingerprint))
    }
}

impl fmt::Display for CertSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SelfSigned => f.write_str("a self-signed certificate"),
            Self::Files { cert, .. } => write!(f, "`{}`", cert.display()),
        }
    }
}

/// The certificate an HTTPS server presents: loaded from a [`CertSource`] and replaced, for new
/// connections, when [`CertResolver::reload_on_change`] sees the files change.
pub struct CertResolver {
    source: CertSource,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes `current` was made from.
    loaded: RwLock<Option<Fingerprint>>,
}

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertResolver")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl CertResolver {
    /// Loads the certificate of `source`; fails, naming the file, when it cannot be read or
    /// does not match its key.
    pub fn new(source: CertSource) -> anyhow::Result<Arc<Self>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (current, loaded) = source.load(&provider)?;
        Ok(Arc::new(Self {
            source,
            provider,
            current: RwLock::new(Arc::new(current)),
            loaded: RwLock::new(loaded),
        }))
    }

    /// The certificate new connections get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Loads the files again. On failure (a half-written file) the previous certificate stays.
    pub fn reload(&self) -> anyhow::Result<()> {
        let (current, loaded) = self.source.load(&self.provider)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(current);
        *self.loaded.write().unwrap_or_else(PoisonError::into_inner) = loaded;
        Ok(())
    }

    /// Reloads the certificate whenever its files change, checking every `interval`, until
    /// `shutdown`. A change that cannot be loaded is logged and retried at the next check.
    pub async fn reload_on_change(
        self: Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
    ) {
        if self.source == CertSource::SelfSigned {
            return;
        }
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            if let Err(error) = self.reload_if_changed() {
                tracing::warn!(source = %self.source, "keeping the previous TLS certificate: {error:#}");
            }
        }
    }

    /// Loads the files again when their bytes changed; whether they did. Files that cannot be
    /// read now (a Secret being swapped) count as unchanged, to be read at the next check.
    pub fn reload_if_changed(&self) -> anyhow::Result<bool> {
        let Some(now) = self.source.fingerprint() else {
            return Ok(false);
        };
        if self
            .loaded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            == Some(&now)
        {
            return Ok(false);
        }
        self.reload()?;
        tracing::info!(source = %self.source, "reloaded the TLS certificate");
        Ok(true)
    }

    /// The rustls configuration of a server presenting this certificate. ALPN offers `h2` only
    /// when `http2`; the server must then also refuse HTTP/2 that a client speaks without ALPN
    /// (`crate::server` does).
    pub fn server_config(self: &Arc<Self>, http2: bool) -> anyhow::Result<Arc<ServerConfig>> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .context("failed to select TLS versions")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = if http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
