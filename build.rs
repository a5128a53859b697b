//! Rebuilds the binary when a template changes: `include_dir!` cannot see new files by itself.

fn main() {
    println!("cargo:rerun-if-changed=templates");
}
