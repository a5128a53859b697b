//! Rebuilds the binary when a template or the runtime crate changes: `include_dir!` cannot see
//! new files by itself.

fn main() {
    println!("cargo:rerun-if-changed=templates");
    println!("cargo:rerun-if-changed=runtime/Cargo.toml");
    println!("cargo:rerun-if-changed=runtime/src");
}
