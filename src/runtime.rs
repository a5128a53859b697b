//! The runtime crate that generated projects use: `runtime/` of this repository, embedded
//! without its tests and written into every project that vendors it (the default form) as
//! `runtime/`, with a `CHECKSUMS` file (in `sha256sum` format) that lets `rsbuilder upgrade` tell
//! an untouched runtime from one the user changed.
//!
//! PROJECT records the runtime's version and the SHA-256 of its `CHECKSUMS` file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};
use sha2::{Digest, Sha256};

pub mod form;

pub use form::Form;

/// The runtime crate as projects vendor it: its `Cargo.toml`, the library's `src/` and
/// `CHECKSUMS`, as `build.rs` wrote them (without the runtime's tests).
static RUNTIME: Dir<'static> = include_dir!("$OUT_DIR/runtime");

/// Where the runtime lives in a generated project.
pub const DIR: &str = "runtime";
/// The checksum file inside [`DIR`].
pub const CHECKSUMS: &str = "CHECKSUMS";

/// The runtime as this rsbuilder writes it: every file by its path in the project.
pub fn files() -> BTreeMap<PathBuf, String> {
    let mut files = BTreeMap::new();
    collect(&RUNTIME, &mut files);
    files
}

fn collect(dir: &Dir<'static>, out: &mut BTreeMap<PathBuf, String>) {
    for file in dir.files() {
        let path = file.path();
        let text = file
            .contents_utf8()
            .unwrap_or_else(|| panic!("runtime file `{}` is not UTF-8", path.display()));
        out.insert(Path::new(DIR).join(path), text.to_owned());
    }
    for sub in dir.dirs() {
        collect(sub, out);
    }
}

/// The runtime's version, from its `Cargo.toml`.
pub fn version() -> String {
    let manifest = RUNTIME
        .get_file("Cargo.toml")
        .and_then(|file| file.contents_utf8())
        .expect("the runtime has a Cargo.toml");
    crate::manifest::version(manifest, "package").expect("the runtime's Cargo.toml has a version")
}

/// The hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The `CHECKSUMS` file for `files` (paths under [`DIR`]), as `build.rs` writes it for the embedded
/// runtime: `<sha256>  <path>` per file, paths
/// relative to [`DIR`], sorted, as `sha256sum` writes them, so `sha256sum -c CHECKSUMS` checks
/// them too.
#[cfg(test)]
pub fn checksums(files: &BTreeMap<PathBuf, String>) -> String {
    let mut out = String::new();
    for (path, text) in files {
        let relative = path.strip_prefix(DIR).unwrap_or(path);
        if relative == Path::new(CHECKSUMS) {
            continue;
        }
        let _ = writeln!(
            out,
            "{}  {}",
            sha256(text.as_bytes()),
            relative.to_string_lossy().replace('\\', "/")
        );
    }
    out
}

/// What PROJECT records: `sha256:` and the hash of the `CHECKSUMS` text.
pub fn record(checksums: &str) -> String {
    format!("sha256:{}", sha256(checksums.as_bytes()))
}

/// Parses a `CHECKSUMS` file into path (relative to [`DIR`]) → hash; `None` if a line is not
/// `<64 hex digits>  <path>`.
pub fn parse_checksums(text: &str) -> Option<BTreeMap<PathBuf, String>> {
    text.lines()
        .map(|line| {
            let (hash, path) = line.split_once("  ")?;
            let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
            (valid && !path.is_empty()).then(|| (PathBuf::from(path), hash.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_is_embedded_with_its_checksums() {
        let files = files();
        for path in [
            "runtime/Cargo.toml",
            "runtime/src/lib.rs",
            "runtime/src/leader.rs",
        ] {
            assert!(files.contains_key(Path::new(path)), "{path}");
        }
        assert!(files.keys().all(|path| path.starts_with(DIR)));
        let checksums = &files[&Path::new(DIR).join(CHECKSUMS)];
        let parsed = parse_checksums(checksums).unwrap();
        assert_eq!(parsed.len(), files.len() - 1);
        assert_eq!(
            parsed[Path::new("src/lib.rs")],
            sha256(files[Path::new("runtime/src/lib.rs")].as_bytes())
        );
        // What build.rs hashed is what rsbuilder embeds.
        let mut sources = files.clone();
        sources.remove(&Path::new(DIR).join(CHECKSUMS));
        assert_eq!(*checksums, super::checksums(&sources));
    }

    #[test]
    fn a_project_gets_the_library_without_its_tests() {
        let files = files();
        for (path, text) in &files {
            for test in [
                "#[test]",
                "#[tokio::test",
                "mod tests",
                "mod testing",
                "cfg(test)",
            ] {
                assert!(!text.contains(test), "`{test}` in {}", path.display());
            }
        }
        let manifest = &files[Path::new("runtime/Cargo.toml")];
        assert!(!manifest.contains("[dev-dependencies]"), "{manifest}");
        assert!(manifest.contains("\n[dependencies]\n"), "{manifest}");
        assert!(manifest.contains("\n\n[lints.rust]\n"), "{manifest}");
        // The runtime in this repository has them: the embedding is what leaves them out.
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime");
        let lib = std::fs::read_to_string(here.join("src/leader.rs")).unwrap();
        assert!(lib.contains("#[cfg(test)]\npub(crate) mod tests;\n"));
        assert!(here.join("src/leader/tests.rs").exists());
        assert!(!files.contains_key(Path::new("runtime/src/leader/tests.rs")));
        assert!(!files.contains_key(Path::new("runtime/src/testing.rs")));
        let text = &files[Path::new("runtime/src/leader.rs")];
        assert_eq!(
            text.as_str(),
            lib.replace("\n#[cfg(test)]\npub(crate) mod tests;\n", "")
        );
    }

    #[test]
    fn the_version_comes_from_the_manifest() {
        assert!(version().split('.').all(|part| part.parse::<u32>().is_ok()));
    }

    #[test]
    fn sha256_is_the_standard_one() {
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn malformed_checksum_files_are_refused() {
        assert!(parse_checksums("abc  src/lib.rs\n").is_none());
        assert!(parse_checksums(&format!("{}  \n", "a".repeat(64))).is_none());
        assert_eq!(parse_checksums("").unwrap().len(), 0);
    }
}
