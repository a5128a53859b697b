//! TLS for the HTTPS endpoints: certificates from a mounted directory (cert-manager) that are
//! reloaded when they change, or a self-signed certificate when no directory is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_util::sync::CancellationToken;

/// How often mounted certificate files are checked for changes.
const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// Where an HTTPS endpoint takes its certificate from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// A certificate made at startup for `localhost`, as controller-runtime does; Prometheus
    /// must then skip verification (`insecureSkipVerify` in `config/prometheus/monitor.yaml`).
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

    fn load(&self) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        match self {
            Self::SelfSigned => {
                let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                    .context("failed to generate a self-signed certificate")?;
                let key = PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der());
                Ok((vec![generated.cert.der().clone()], key.into()))
            }
            Self::Files { cert, key } => {
                let certs = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .with_context(|| format!("failed to read certificate `{}`", cert.display()))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .with_context(|| format!("failed to read private key `{}`", key.display()))?;
                Ok((certs, key))
            }
        }
    }

    fn modified(&self) -> Option<(SystemTime, SystemTime)> {
        match self {
            Self::SelfSigned => None,
            Self::Files { cert, key } => {
                let time = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
                Some((time(cert)?, time(key)?))
            }
        }
    }
}

/// Builds the rustls configuration of an HTTPS endpoint. HTTP/2 is offered only when `http2`.
pub fn server_config(source: &CertSource, http2: bool) -> anyhow::Result<Arc<ServerConfig>> {
    let (certs, key) = source.load()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("failed to select TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate does not match its key")?;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// Reloads `config` whenever the certificate files change, until `shutdown`. A change that
/// cannot be loaded (a half-written file) is logged and the previous certificate stays in use.
pub async fn reload_on_change(
    config: RustlsConfig,
    source: CertSource,
    http2: bool,
    shutdown: CancellationToken,
) {
    let mut seen = source.modified();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(RELOAD_INTERVAL) => {}
        }
        let now = source.modified();
        if now == seen {
            continue;
        }
        match server_config(&source, http2) {
            Ok(new) => {
                config.reload_from_config(new);
                seen = now;
                tracing::info!(?source, "reloaded the TLS certificate");
            }
            Err(error) => {
                tracing::warn!(?source, "keeping the previous TLS certificate: {error:#}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificates_are_made_on_demand() {
        let config = server_config(&CertSource::SelfSigned, false).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let config = server_config(&CertSource::SelfSigned, true).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2".to_vec());
    }

    #[test]
    fn missing_files_are_named_in_the_error() {
        let source = CertSource::from_flags(Some(Path::new("/nonexistent")), "tls.crt", "tls.key");
        let error = server_config(&source, false).unwrap_err();
        assert!(
            format!("{error:#}").contains("/nonexistent/tls.crt"),
            "{error:#}"
        );
    }
}
