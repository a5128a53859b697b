//! Scaffold markers: `// +rsbuilder:scaffold:<name>` in Rust, `# +rsbuilder:scaffold:<name>`
//! in YAML, TOML and Makefiles. Fragments of several kinds that share a place each have a marker
//! of their own, `<name>.<kind>`, in a fixed order, so that the file is the same whatever order
//! the commands came in; a file without it takes them at `<name>`, in the order they come. A
//! fragment goes just above its marker, indented like it, unless
//! the file holds it already as one block: its lines in a row, blank lines aside, and anything
//! at all above a marker of its own (what later commands inserted there). So inserting twice
//! changes nothing, whatever the fragment holds. Otherwise each line of a fragment that the file
//! already has (a module, a list entry) is left out; a block fragment (an `impl`, a YAML list
//! item of several lines) goes in whole.

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
    let at = marker_at(path, &lines, name, &marker)?;
    let indent: String = lines[at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    // A fragment that is there as one block, as rsbuilder would indent it, is not added again,
    // whatever its lines are: blank lines, comments, lines other fragments have too.
    if holds_block(&lines, fragment, &indent) {
        return Ok(None);
    }
    let missing: Vec<&str> = if block {
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

/// Every marker of `content` (the text of `path`) that starts with `prefix` (`// +rsbuilder:rbac:`),
/// read by `parse`. A malformed one is an error naming the file and line, `what` the marker and
/// `help` how to write it.
pub fn read_source_markers<T>(
    path: &Path,
    content: &str,
    prefix: &str,
    (what, help): (&str, &str),
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, UserError> {
    let mut found = Vec::new();
    // Most sources have none: one search of the whole text settles that.
    if !content.contains(prefix) {
        return Ok(found);
    }
    for (index, line) in content.lines().enumerate() {
        let Some(body) = line.trim().strip_prefix(prefix) else {
            continue;
        };
        found.push(parse(body.trim()).map_err(|problem| {
            UserError::new(format!(
                "invalid {what} marker at {}:{}: {problem}",
                path.display(),
                index + 1
            ))
            .help(help)
        })?);
    }
    Ok(found)
}

/// The line of the marker `name` (written `marker`) in `lines`. A marker `<name>.<part>` orders
/// one kind of fragment among others at `<name>`; a file written before it had its own marker
/// takes the fragment at `<name>`.
fn marker_at(path: &Path, lines: &[&str], name: &str, marker: &str) -> Result<usize, UserError> {
    let fallback = name
        .split_once('.')
        .and_then(|(base, _)| marker_line(path, base));
    let found = lines
        .iter()
        .position(|line| line.trim() == marker)
        .or_else(|| {
            let fallback = fallback.as_deref()?;
            lines.iter().position(|line| line.trim() == fallback)
        });
    found.ok_or_else(|| {
        UserError::new(format!(
            "marker `{marker}` not found in `{}`",
            path.display()
        ))
        .help(format!(
            "put the line `{marker}` back where rsbuilder should add code, then run the command again; \
             a project made by an older rsbuilder may never have had it: `rsbuilder alpha update` \
             merges this rsbuilder's scaffold, with the line, into the project"
        ))
    })
}

/// Whether `lines` (a file's, with their line endings) hold every line of `fragment` that is not
/// blank, each after `indent`, in a row. Blank lines do not count on either side: inserting
/// drops a fragment's leading blank line where the file has one, and rustfmt may change them.
/// Where the fragment has a marker of its own, the file may have anything above that marker:
/// what later commands inserted there.
fn holds_block(lines: &[&str], fragment: &str, indent: &str) -> bool {
    let wanted: Vec<String> = fragment
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("{indent}{}", line.trim_end()))
        .collect();
    let have: Vec<&str> = lines
        .iter()
        .map(|line| line.trim_end())
        .filter(|line| !line.is_empty())
        .collect();
    let Some(first) = wanted.first() else {
        return true;
    };
    let is_marker = |line: &str| {
        let line = line.trim_start();
        ["// ", "# "].iter().any(|prefix| {
            line.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with("+rsbuilder:scaffold:"))
        })
    };
    (0..have.len())
        .filter(|&start| have[start] == first.as_str())
        .any(|start| {
            let mut at = start + 1;
            wanted[1..].iter().all(|line| {
                if is_marker(line) {
                    // Lines inserted above this marker sit between it and the line before.
                    match have[at..].iter().position(|have| *have == line.as_str()) {
                        Some(offset) => at += offset + 1,
                        None => return false,
                    }
                    true
                } else if have.get(at) == Some(&line.as_str()) {
                    at += 1;
                    true
                } else {
                    false
                }
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_file_has_its_comment() {
        for (path, prefix) in [
            ("operator/src/main.rs", Some("//")),
            ("config/rbac/kustomization.yaml", Some("#")),
            ("config/samples/x.yml", Some("#")),
            ("Cargo.toml", Some("#")),
            ("Makefile", Some("#")),
            ("hack/Dockerfile", Some("#")),
            ("README.md", None),
            ("PROJECT", None),
        ] {
            assert_eq!(comment_prefix(Path::new(path)), prefix, "{path}");
        }
        assert_eq!(
            marker_line(Path::new("Makefile"), "targets").as_deref(),
            Some("# +rsbuilder:scaffold:targets")
        );
    }

    /// A line-by-line insertion.
    fn insert(
        path: &Path,
        content: &str,
        name: &str,
        fragment: &str,
    ) -> Result<Option<String>, UserError> {
        super::insert(path, content, name, fragment, false)
    }

    /// `content` with `block` inserted whole at `name` of a kustomization.
    fn inserted_block(content: &str, name: &str, block: &str) -> String {
        block_again(content, name, block).expect("the block is inserted")
    }

    /// `content` with `block` inserted whole at `name`, or `None` when it holds it already.
    fn block_again(content: &str, name: &str, block: &str) -> Option<String> {
        super::insert(Path::new(KUSTOMIZATION), content, name, block, true).unwrap()
    }

    const KUSTOMIZATION: &str = "config/default/kustomization.yaml";

    #[test]
    fn blocks_go_in_whole_once() {
        let yaml = "patches:\n- path: a.yaml\n  target:\n    kind: Deployment\n# +rsbuilder:scaffold:patches\n";
        let block = "- path: b.yaml\n  target:\n    kind: Deployment\n";
        let once = inserted_block(yaml, "patches", block);
        assert_eq!(
            once,
            "patches:\n- path: a.yaml\n  target:\n    kind: Deployment\n- path: b.yaml\n  target:\n    kind: Deployment\n# +rsbuilder:scaffold:patches\n"
        );
        assert_eq!(block_again(&once, "patches", block), None);
        // Line by line, the block would lose the lines the file has.
        let lines = insert(Path::new(KUSTOMIZATION), yaml, "patches", block)
            .unwrap()
            .unwrap();
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

    /// What the fragments of `templates/insert/` need to render, for one kind.
    fn fragment_context(group: &str, version: &str, kind: &str) -> tera::Context {
        let names = crate::names::ResourceNames::new(group, version, kind, None, "example.com");
        let mut context = tera::Context::from_serialize(&names).unwrap();
        let spoke = ["v2", "v3"]
            .into_iter()
            .find(|spoke| *spoke != version)
            .unwrap();
        for (name, value) in [
            ("crate_ident", "my_operator".to_owned()),
            ("api_crate_ident", "my_operator_api".to_owned()),
            (
                "crd_file",
                crate::names::crd_file(&names.qualified_group, &names.plural),
            ),
            (
                "sample_file",
                format!("{}_{}_{}.yaml", names.group_dir, version, names.kind_file),
            ),
            ("defaulting_path", format!("/mutate-{}", names.kind_lower)),
            ("validation_path", format!("/validate-{}", names.kind_lower)),
            ("mutating_name", format!("m{}.kb.io", names.kind_lower)),
            ("validating_name", format!("v{}.kb.io", names.kind_lower)),
        ] {
            context.insert(name, &value);
        }
        context.insert("spoke", spoke);
        context
    }

    /// Every fragment of `templates/insert/`, rendered for kinds that share a group, a version
    /// or nothing, goes into files that hold the other kinds' fragments already (all kinds in
    /// one file, to share as many lines as can be shared); inserting any fragment a second
    /// time then changes nothing, and no marker is doubled.
    #[test]
    fn every_insert_template_inserted_twice_changes_nothing() {
        let kinds = [
            ("apps", "v1", "AppOTP"),
            ("apps", "v1", "Backup"),
            ("apps", "v2", "Backup"),
            ("ops", "v1", "Restore"),
        ];
        let contexts: Vec<_> = kinds
            .iter()
            .map(|(group, version, kind)| fragment_context(group, version, kind))
            .collect();
        // (file, marker, block) and the fragment for each kind, by the file they go into.
        type Fragment = (String, bool, Vec<String>);
        let mut files: std::collections::BTreeMap<String, Vec<Fragment>> = Default::default();
        for (path, text) in crate::scaffold::sources("insert/") {
            let name = path.strip_suffix(".tera").unwrap();
            // `insert/<set>/<file>/<marker>`: the file without its set.
            let (_, rest) = name["insert/".len()..].split_once('/').unwrap();
            let (file, marker) = rest.rsplit_once('/').unwrap();
            let (marker, block) = match marker.strip_suffix(".block") {
                Some(marker) => (marker, true),
                None => (marker, false),
            };
            let rendered = contexts
                .iter()
                .map(|context| {
                    tera::Tera::one_off(text, context, false).unwrap_or_else(|error| {
                        panic!("`{path}` does not render; add what it needs to fragment_context: {error:?}")
                    })
                })
                .collect();
            files
                .entry(file.to_owned())
                .or_default()
                .push((marker.to_owned(), block, rendered));
        }
        assert!(files.len() > 10, "{files:?}");

        for (file, mut fragments) in files {
            let path = Path::new(&file);
            let marker_of = |name: &str| marker_line(path, name).unwrap();
            // Fragments that bring markers go first, as the plans put them; the file has the
            // other markers from the start.
            let brings = |fragment: &Fragment, name: &str| {
                fragment.2[0]
                    .lines()
                    .any(|line| line.trim() == marker_of(name))
            };
            fragments.sort_by_key(|fragment| !fragments_bring_markers(path, &fragment.2[0]));
            // A file named after its kind (a webhook module) holds one kind's fragments; the
            // others are shared by all kinds.
            let sharing: Vec<Vec<usize>> = if file.contains("{kind}") {
                (0..kinds.len()).map(|kind| vec![kind]).collect()
            } else {
                vec![(0..kinds.len()).collect()]
            };
            for (indent, kinds_here) in ["", "    "]
                .into_iter()
                .flat_map(|indent| sharing.iter().map(move |kinds| (indent, kinds)))
            {
                let mut content = String::from("head\n");
                for (marker, _, _) in &fragments {
                    let line = format!("{indent}{}\n", marker_of(marker));
                    if !content.contains(&line)
                        && !fragments.iter().any(|fragment| brings(fragment, marker))
                    {
                        content.push_str(&line);
                        content.push_str("middle\n");
                    }
                }
                for &kind in kinds_here {
                    for (marker, block, rendered) in &fragments {
                        let fragment = &rendered[kind];
                        if let Some(updated) =
                            super::insert(path, &content, marker, fragment, *block)
                                .unwrap_or_else(|error| panic!("{file}: {error}\n{content}"))
                        {
                            content = updated;
                        }
                        assert_eq!(
                            super::insert(path, &content, marker, fragment, *block).unwrap(),
                            None,
                            "{file}: `{marker}` of {:?} went in twice into\n{content}",
                            kinds[kind]
                        );
                    }
                }
                for &kind in kinds_here {
                    for (marker, block, rendered) in &fragments {
                        assert_eq!(
                            super::insert(path, &content, marker, &rendered[kind], *block).unwrap(),
                            None,
                            "{file}: `{marker}` of {:?} went in again into\n{content}",
                            kinds[kind]
                        );
                    }
                }
                for (marker, _, _) in &fragments {
                    assert_eq!(
                        content
                            .lines()
                            .filter(|line| line.trim() == marker_of(marker))
                            .count(),
                        1,
                        "{file}: `{marker}` doubled in\n{content}"
                    );
                }
            }
        }
    }

    /// Whether `fragment` holds a marker line of `path`'s syntax.
    fn fragments_bring_markers(path: &Path, fragment: &str) -> bool {
        let prefix = format!("{} +rsbuilder:scaffold:", comment_prefix(path).unwrap());
        fragment
            .lines()
            .any(|line| line.trim().starts_with(&prefix))
    }

    /// A block is there only when its lines are, in a row: lines it shares with other blocks,
    /// scattered over the file, do not count.
    #[test]
    fn a_block_is_there_only_as_one_block() {
        let block = "- select:\n    kind: A\n  fieldPaths:\n  - x\n";
        let scattered = "- select:\n    kind: B\n  fieldPaths:\n  - y\n- select:\n    kind: A\n  fieldPaths:\n  - z\n  - x\n# +rsbuilder:scaffold:m\n";
        let once = inserted_block(scattered, "m", block);
        assert!(
            once.ends_with(&format!("{block}# +rsbuilder:scaffold:m\n")),
            "{once}"
        );
        assert_eq!(block_again(&once, "m", block), None);
        // Blank lines and comments of a block, and lines inserted above a marker of its own.
        let block = "# A comment.\nlist:\n# +rsbuilder:scaffold:entries\n\nother:\n- x\n";
        let yaml = "# +rsbuilder:scaffold:m\n";
        let once = inserted_block(yaml, "m", block);
        let filled = insert(Path::new(KUSTOMIZATION), &once, "entries", "- a\n- b\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            filled,
            "# A comment.\nlist:\n- a\n- b\n# +rsbuilder:scaffold:entries\n\nother:\n- x\n# +rsbuilder:scaffold:m\n"
        );
        assert_eq!(block_again(&filled, "m", block), None);
        let crlf = filled.replace('\n', "\r\n");
        assert_eq!(block_again(&crlf, "m", block), None);
        // The same lines without the comment are another block.
        let edited = filled.replace("# A comment.\n", "");
        assert!(block_again(&edited, "m", block).is_some());
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

    /// `text` after each `(marker, fragment)` is inserted in turn.
    fn inserted(path: &Path, text: &str, fragments: &[(&str, &str)]) -> String {
        fragments
            .iter()
            .fold(text.to_owned(), |text, (marker, fragment)| {
                insert(path, &text, marker, fragment).unwrap().unwrap()
            })
    }

    /// Fragments with markers of their own land in the markers' order, whatever the order of
    /// the insertions; a file with only the shared marker takes them there, in turn; a file
    /// with neither names the marker of the fragment.
    #[test]
    fn fragments_of_several_kinds_land_at_their_own_markers() {
        let path = Path::new("src/foo.rs");
        let ordered = "// +rsbuilder:scaffold:hooks.a\n// +rsbuilder:scaffold:hooks.b\nfn x() {}\n";
        let a = ("hooks.a", "fn a() {}");
        let b = ("hooks.b", "fn b() {}");
        let a_then_b = inserted(path, ordered, &[a, b]);
        assert_eq!(a_then_b, inserted(path, ordered, &[b, a]));
        assert_eq!(
            a_then_b,
            "fn a() {}\n// +rsbuilder:scaffold:hooks.a\nfn b() {}\n// +rsbuilder:scaffold:hooks.b\nfn x() {}\n"
        );
        let older = inserted(path, "// +rsbuilder:scaffold:hooks\n", &[b, a]);
        assert_eq!(
            older,
            "fn b() {}\nfn a() {}\n// +rsbuilder:scaffold:hooks\n"
        );
        let error = insert(path, "fn x() {}\n", "hooks.a", "fn a() {}").unwrap_err();
        assert_eq!(
            error.to_string(),
            "marker `// +rsbuilder:scaffold:hooks.a` not found in `src/foo.rs`"
        );
        // Only a name with a part falls back: `hooks` does not take `hook`'s place.
        assert!(insert(path, "// +rsbuilder:scaffold:hook\n", "hooks", "fn a() {}").is_err());
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
