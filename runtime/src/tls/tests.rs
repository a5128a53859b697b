use super::*;

/// Writes a new self-signed certificate for `name` into `dir`, as cert-manager would.
pub(crate) fn write_certificate(dir: &Path, name: &str) -> Vec<u8> {
    let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    std::fs::write(dir.join("tls.crt"), generated.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem()).unwrap();
    generated.cert.der().to_vec()
}

fn files(dir: &Path) -> CertSource {
    CertSource::from_flags(Some(dir), "tls.crt", "tls.key")
}

#[test]
fn self_signed_certificates_are_made_on_demand() {
    let resolver = CertResolver::new(CertSource::SelfSigned).unwrap();
    assert_eq!(resolver.current().cert.len(), 1);
    let config = resolver.server_config(false).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let config = resolver.server_config(true).unwrap();
    assert_eq!(config.alpn_protocols[0], b"h2".to_vec());
}

#[test]
fn missing_files_are_named_in_the_error() {
    let source = CertSource::from_flags(Some(Path::new("/nonexistent")), "tls.crt", "tls.key");
    let error = CertResolver::new(source).unwrap_err();
    assert_eq!(
        format!("{error:#}").split(':').next(),
        Some("failed to read certificate `/nonexistent/tls.crt`")
    );
}

#[test]
fn a_key_that_does_not_match_is_refused() {
    let dir = tempdir();
    write_certificate(dir.path(), "one");
    let key = std::fs::read(dir.path().join("tls.key")).unwrap();
    write_certificate(dir.path(), "two");
    std::fs::write(dir.path().join("tls.key"), key).unwrap();
    let error = CertResolver::new(files(dir.path())).unwrap_err();
    let cert = dir.path().join("tls.crt");
    assert!(
        format!("{error:#}").starts_with(&format!(
            "the certificate of `{}` does not match its key",
            cert.display()
        )),
        "{error:#}"
    );
    assert_eq!(
        CertSource::SelfSigned.to_string(),
        "a self-signed certificate"
    );
}

/// A resolver's debug form names its source and nothing of the key it holds.
#[test]
fn the_debug_form_shows_the_source_and_no_key() {
    let resolver = CertResolver::new(CertSource::SelfSigned).unwrap();
    assert_eq!(
        format!("{resolver:?}"),
        "CertResolver { source: SelfSigned, .. }"
    );
}

#[tokio::test(start_paused = true)]
async fn rotated_certificates_are_reloaded_and_broken_ones_ignored() {
    let dir = tempdir();
    let first = write_certificate(dir.path(), "first");
    let resolver = CertResolver::new(files(dir.path())).unwrap();
    assert_eq!(resolver.current().cert[0].as_ref(), first);

    let shutdown = CancellationToken::new();
    let reloading = tokio::spawn(
        resolver
            .clone()
            .reload_on_change(Duration::from_secs(10), shutdown.clone()),
    );
    // A half-written certificate is not taken.
    std::fs::write(dir.path().join("tls.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(resolver.current().cert[0].as_ref(), first);

    let second = write_certificate(dir.path(), "second");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(resolver.current().cert[0].as_ref(), second);

    // Files that are gone for a moment, as while a Secret is swapped, do not stop reloading.
    std::fs::remove_file(dir.path().join("tls.crt")).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(resolver.current().cert[0].as_ref(), second);
    let third = write_certificate(dir.path(), "third");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(resolver.current().cert[0].as_ref(), third);

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(1), reloading)
        .await
        .expect("the reloader stops on shutdown")
        .unwrap();
}

/// A poll that finds the same bytes keeps the very certificate it has: the files are
/// parsed again only when their bytes change, not at every poll, nor when a file is
/// rewritten with the same bytes.
#[tokio::test(start_paused = true)]
async fn certificates_are_reloaded_only_when_the_bytes_change() {
    let dir = tempdir();
    write_certificate(dir.path(), "first");
    let resolver = CertResolver::new(files(dir.path())).unwrap();
    let loaded = resolver.current();

    let shutdown = CancellationToken::new();
    let reloading = tokio::spawn(
        resolver
            .clone()
            .reload_on_change(Duration::from_secs(10), shutdown.clone()),
    );
    // The checks below come halfway between polls (at 10, 20, ... s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    for poll in 1..=5 {
        if poll == 3 {
            // Rewritten, as a Secret update that changes nothing.
            for file in ["tls.crt", "tls.key"] {
                let bytes = std::fs::read(dir.path().join(file)).unwrap();
                std::fs::write(dir.path().join(file), bytes).unwrap();
            }
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            Arc::ptr_eq(&resolver.current(), &loaded),
            "reloaded at poll {poll} with unchanged files"
        );
    }

    let second = write_certificate(dir.path(), "second");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let reloaded = resolver.current();
    assert!(!Arc::ptr_eq(&reloaded, &loaded));
    assert_eq!(reloaded.cert[0].as_ref(), second);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(Arc::ptr_eq(&resolver.current(), &reloaded));

    shutdown.cancel();
    crate::testing::within(reloading).await.unwrap();
}

/// A temporary directory, removed when dropped.
pub(crate) fn tempdir() -> TempDir {
    let path = std::env::temp_dir().join(format!(
        "rsbuilder-runtime-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&path).unwrap();
    TempDir(path)
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
