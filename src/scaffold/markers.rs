//! Scaffold markers: `// +rsbuilder:scaffold:<name>` in Rust, `# +rsbuilder:scaffold:<name>`
//! in YAML, TOML and Makefiles. A fragment goes just above its marker, indented like it; each
//! of its lines that the file already has (a module, a list entry) is left out, so inserting
//! twice changes nothing. A block fragment (an `impl`, a YAML list item of several lines) goes
//! in whole unless the file has it whole.

use std::path::Path;

use crate::ui::UserError;

/// The comment that starts a marker line in `path`, by its extension.
pub fn comment_prefix(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    if name == "Makefile" || name == "Dockerfile" {
        return Some("#");
    }
    match path.extension()?.to_str()? {
        "rs" => Some("//"),
        "yaml" | "yml" | "toml" => Some("#"),
        _ => None,
    }
}

/// The full marker line (trimmed) for `name` in `path`.
pub fn marker_line(path: &Path, name: &str) -> Option<String> {
    comment_prefix(path).map(|prefix| format!("{prefix} +rsbuilder:scaffold:{name}"))
}

/// Inserts `fragment` above the marker `name` in `content`, the text of `path`, line by line or
/// as a `block`. Returns `None` when the fragment is already there. Line endings follow the
/// file's own.
pub fn insert(
    path: &Path,
    content: &str,
    name: &str,
    fragment: &str,
    block: bool,
) -> Result<Option<String>, UserError> {
    let marker = marker_line(path, name).ok_or_else(|| {
        UserError::new(format!(
            "cannot insert into `{}`: rsbuilder has no marker syntax for this kind of file",
            path.display()
        ))
    })?;
    let newline = if content.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    let Some(at) = lines.iter().position(|line| line.trim() == marker) else {
        return Err(UserError::new(format!(
            "marker `{marker}` not found in `{}`",
            path.display()
        ))
        .help(format!(
            "put the line `{marker}` back where rsbuilder should add code, then run the command again"
        )));
    };

    let indent: String = lines[at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    let missing: Vec<&str> = if block {
        // A block is there when its lines are, in a row, as rsbuilder would indent them.
        let mut indented = String::new();
        for line in fragment.lines().filter(|line| !line.trim().is_empty()) {
            indented.push_str(&indent);
            indented.push_str(line);
            indented.push('\n');
        }
        if content.replace("\r\n", "\n").contains(&indented) {
            return Ok(None);
        }
        fragment.lines().collect()
    } else {
        // Fragments are lists of declarations or entries: a line the file has already is not
        // added again, even where the user moved it or edited its neighbours.
        let present: std::collections::HashSet<&str> =
            lines.iter().map(|line| line.trim()).collect();
        fragment
            .lines()
            .filter(|line| line.trim().is_empty() || !present.contains(line.trim()))
            .collect()
    };
    if missing.iter().all(|line| line.trim().is_empty()) {
        return Ok(None);
    }

    // A fragment that starts with a blank line wants a blank line above it, unless there is
    // one already (or nothing at all), so that rustfmt finds no doubled blank lines.
    let mut missing = missing.as_slice();
    if missing[0].trim().is_empty() && (at == 0 || lines[at - 1].trim().is_empty()) {
        missing = &missing[1..];
    }

    let mut out = String::with_capacity(content.len() + fragment.len() + 16);
    for line in &lines[..at] {
        out.push_str(line);
    }
    for line in missing {
        if line.trim().is_empty() {
            out.push_str(newline);
        } else {
            out.push_str(&indent);
            out.push_str(line);
            out.push_str(newline);
        }
    }
    for line in &lines[at..] {
        out.push_str(line);
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line-by-line insertion.
    fn insert(
        path: &Path,
        content: &str,
        name: &str,
        fragment: &str,
    ) -> Result<Option<String>, UserError> {
        super::insert(path, content, name, fragment, false)
    }

    #[test]
    fn blocks_go_in_whole_once() {
        let path = Path::new("config/default/kustomization.yaml");
        let yaml = "patches:\n- path: a.yaml\n  target:\n    kind: Deployment\n# +rsbuilder:scaffold:patches\n";
        let block = "- path: b.yaml\n  target:\n    kind: Deployment\n";
        let once = super::insert(path, yaml, "patches", block, true)
            .unwrap()
            .unwrap();
        assert_eq!(
            once,
            "patches:\n- path: a.yaml\n  target:\n    kind: Deployment\n- path: b.yaml\n  target:\n    kind: Deployment\n# +rsbuilder:scaffold:patches\n"
        );
        assert_eq!(
            super::insert(path, &once, "patches", block, true).unwrap(),
            None
        );
        // Line by line, the block would lose the lines the file has.
        let lines = insert(path, yaml, "patches", block).unwrap().unwrap();
        assert!(lines.contains("- path: b.yaml\n# +rsbuilder"), "{lines}");
    }

    const MAIN: &str = "fn main() {\n    let controllers = vec![\n        // +rsbuilder:scaffold:controllers\n    ];\n}\n";

    #[test]
    fn inserts_above_the_marker_with_its_indent() {
        let out = insert(
            Path::new("src/main.rs"),
            MAIN,
            "controllers",
            "a(),\nb(),\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            out,
            "fn main() {\n    let controllers = vec![\n        a(),\n        b(),\n        // +rsbuilder:scaffold:controllers\n    ];\n}\n"
        );
    }

    #[test]
    fn inserting_twice_changes_nothing() {
        let path = Path::new("src/main.rs");
        let once = insert(path, MAIN, "controllers", "a(),\n")
            .unwrap()
            .unwrap();
        assert_eq!(insert(path, &once, "controllers", "a(),\n").unwrap(), None);
        let twice = insert(path, &once, "controllers", "b(),\n")
            .unwrap()
            .unwrap();
        assert!(
            twice.contains("a(),\n        b(),\n        // +rsbuilder"),
            "{twice}"
        );
    }

    #[test]
    fn lines_the_file_has_already_are_left_out() {
        let path = Path::new("src/v1/mod.rs");
        let edited = "pub mod app_otp;\npub use app_otp::{AppOTP, AppOTPSpec};\n// +rsbuilder:scaffold:kinds\n";
        let fragment = "\npub mod app_otp;\npub use app_otp::AppOTP;\n";
        let out = insert(path, edited, "kinds", fragment).unwrap().unwrap();
        assert_eq!(out.matches("pub mod app_otp;").count(), 1, "{out}");
        let yaml = "resources:\n- a.yaml\n- c.yaml\n# +rsbuilder:scaffold:list\n";
        let out = insert(Path::new("k.yaml"), yaml, "list", "- a.yaml\n- b.yaml\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "resources:\n- a.yaml\n- c.yaml\n- b.yaml\n# +rsbuilder:scaffold:list\n"
        );
    }

    #[test]
    fn a_missing_marker_names_the_file_and_the_marker() {
        let error = insert(
            Path::new("operator/src/main.rs"),
            "fn main() {}\n",
            "controllers",
            "a()",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "marker `// +rsbuilder:scaffold:controllers` not found in `operator/src/main.rs`"
        );
    }

    #[test]
    fn yaml_markers_use_hash_comments() {
        let yaml = "resources:\n- bases/a.yaml\n# +rsbuilder:scaffold:crdkustomizeresource\n";
        let out = insert(
            Path::new("config/crd/kustomization.yaml"),
            yaml,
            "crdkustomizeresource",
            "- bases/b.yaml\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            out,
            "resources:\n- bases/a.yaml\n- bases/b.yaml\n# +rsbuilder:scaffold:crdkustomizeresource\n"
        );
        assert!(insert(Path::new("notes.txt"), yaml, "x", "y").is_err());
    }

    #[test]
    fn a_leading_blank_line_separates_fragments_without_doubling() {
        let path = Path::new("src/lib.rs");
        let lib = "//! Types.\n\n// +rsbuilder:scaffold:groups\n";
        let once = insert(path, lib, "groups", "\npub mod a;\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            once,
            "//! Types.\n\npub mod a;\n// +rsbuilder:scaffold:groups\n"
        );
        let twice = insert(path, &once, "groups", "\npub mod b;\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            twice,
            "//! Types.\n\npub mod a;\n\npub mod b;\n// +rsbuilder:scaffold:groups\n"
        );
    }

    #[test]
    fn crlf_files_keep_their_line_endings() {
        let content = "a\r\n# +rsbuilder:scaffold:list\r\n";
        let out = insert(Path::new("k.yaml"), content, "list", "- b\n")
            .unwrap()
            .unwrap();
        assert_eq!(out, "a\r\n- b\r\n# +rsbuilder:scaffold:list\r\n");
        assert_eq!(
            insert(Path::new("k.yaml"), &out, "list", "- b\n").unwrap(),
            None
        );
    }

    #[test]
    fn a_marker_is_found_only_on_its_own_line() {
        let content = "x // +rsbuilder:scaffold:list\n";
        assert!(insert(Path::new("a.rs"), content, "list", "y").is_err());
    }
}
