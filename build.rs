//! Rebuilds the binary when a template or the runtime crate changes (`include_dir!` cannot see
//! new files by itself), and writes the runtime's `CHECKSUMS` file once, at build time: hashing
//! the runtime's sources was a quarter of the instructions of `rsbuilder init`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    println!("cargo:rerun-if-changed=templates");
    println!("cargo:rerun-if-changed=runtime/Cargo.toml");
    println!("cargo:rerun-if-changed=runtime/src");
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let runtime = root.join("runtime");
    // What `runtime.rs` embeds: `Cargo.toml` and every `.rs` file under `src/`.
    let mut files = vec![PathBuf::from("Cargo.toml")];
    collect(&runtime, Path::new("src"), &mut files);
    files.sort();
    let mut checksums = String::new();
    for path in &files {
        let bytes = std::fs::read(runtime.join(path)).expect("a runtime file reads");
        let digest = Sha256::digest(&bytes);
        let hex: String = digest.iter().fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        });
        let shown = path.to_string_lossy().replace('\\', "/");
        let _ = writeln!(checksums, "{hex}  {shown}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out.join("runtime-checksums"), checksums).expect("OUT_DIR is writable");
}

/// Every `.rs` file under `runtime/<dir>`, as paths relative to `runtime/`.
fn collect(runtime: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(runtime.join(dir)).expect("runtime/src reads");
    for entry in entries {
        let entry = entry.expect("runtime/src reads");
        let path = dir.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            collect(runtime, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
