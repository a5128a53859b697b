//! What PROJECT records of the project's runtime crate.

/// The version of the runtime crate a project has, and the checksum of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRecord {
    /// The runtime's version.
    pub version: String,
    /// `sha256:` and the SHA-256 of `runtime/CHECKSUMS`, in the vendored form.
    pub checksum: Option<String>,
    /// Where the project takes the crate from (`runtime` in PROJECT; vendored when absent).
    pub form: crate::runtime::Form,
}

impl RuntimeRecord {
    /// The runtime of this rsbuilder, taken in `form`.
    pub fn current(form: crate::runtime::Form) -> Self {
        let checksum = form.is_vendored().then(|| {
            let files = crate::runtime::files();
            let path = std::path::Path::new(crate::runtime::DIR).join(crate::runtime::CHECKSUMS);
            crate::runtime::record(&files[&path])
        });
        Self {
            version: crate::runtime::version(),
            checksum,
            form,
        }
    }
}
