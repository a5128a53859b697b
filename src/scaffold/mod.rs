//! Templates to plan: every file a command writes and every insertion it makes, rendered in
//! memory. Nothing here touches the disk; `apply` does.

pub mod markers;

use std::path::PathBuf;

use anyhow::Context as _;
use include_dir::{Dir, include_dir};

use crate::tree::Tree;

/// The templates, embedded: `templates/<set>/<path>.tera` renders `<path>`.
static TEMPLATES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/templates");

/// What to do when a planned file already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The file is rsbuilder's: an existing one with other contents is a conflict, unless
    /// `--force`.
    Owned,
    /// The file is commonly the user's own (README, .gitignore): an existing one is kept, even
    /// with `--force`.
    KeepExisting,
    /// The file is shared by several commands (a module file, a kustomization): it is created
    /// when missing and otherwise left as it is, even with `--force`, since it holds what other
    /// commands inserted.
    IfMissing,
    /// The file is derived from other files (PROJECT, the RBAC role, a CRD): always written.
    Regenerated,
}

/// One whole file to write.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    /// Path relative to the project root.
    pub path: PathBuf,
    /// The full contents.
    pub contents: String,
    /// What to do when the file exists.
    pub policy: Policy,
}

/// A fragment to put above a marker in a file that exists (or that the same plan writes).
#[derive(Debug, Clone)]
pub struct Insertion {
    /// Path relative to the project root.
    pub path: PathBuf,
    /// The marker name, as in `+rsbuilder:scaffold:<name>`.
    pub marker: String,
    /// The lines to insert.
    pub fragment: String,
    /// Insert the fragment whole unless the file has it whole already, rather than line by
    /// line: for blocks of code or YAML whose lines repeat elsewhere (`}`, `kind: Deployment`).
    /// A fragment template named `<marker>.block.tera` is a block.
    pub block: bool,
}

/// How a derived file is computed from a tree.
pub type Derive = Box<dyn Fn(&dyn Tree) -> anyhow::Result<String>>;

/// A file derived from other files of the project (the RBAC role from the markers of the
/// sources, the webhook configurations from theirs): `apply` computes it from the tree as the
/// rest of the plan leaves it (planned files, insertions, removals, and the files it keeps as
/// they are), and writes it whatever it held, like a `Regenerated` file.
pub struct Derived {
    /// Path relative to the project root.
    pub path: PathBuf,
    /// Its contents, from the tree the plan leaves.
    pub derive: Derive,
}

impl Derived {
    /// The file at `path`, computed by `derive`.
    pub fn new(
        path: impl Into<PathBuf>,
        derive: impl Fn(&dyn Tree) -> anyhow::Result<String> + 'static,
    ) -> Self {
        Self {
            path: path.into(),
            derive: Box::new(derive),
        }
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Derived").field("path", &self.path).finish()
    }
}

/// Everything one command would change.
#[derive(Debug, Default)]
pub struct Plan {
    /// Whole files.
    pub files: Vec<PlannedFile>,
    /// Insertions at markers.
    pub insertions: Vec<Insertion>,
    /// Files to delete, relative to the project root; one that does not exist is skipped.
    pub removals: Vec<PathBuf>,
    /// Files computed from the tree the rest of the plan leaves.
    pub derived: Vec<Derived>,
}

/// Renders every template of `set` (a folder under `templates/`) with `context`. In template
/// paths, `{name}` stands for the value of `name` in `paths`. `policy` decides, per output
/// path, what happens when the file exists.
pub fn render_set(
    set: &str,
    context: &tera::Context,
    paths: &[(&str, &str)],
    policy: impl Fn(&str) -> Policy,
) -> anyhow::Result<Vec<PlannedFile>> {
    render(set, context)?
        .into_iter()
        .map(|(name, contents)| {
            let out = fill(&name, paths)?;
            Ok(PlannedFile {
                policy: policy(&out),
                path: PathBuf::from(out),
                contents,
            })
        })
        .collect()
}

/// Renders the fragments of `templates/insert/<set>/`: `<file>/<marker>.tera` is inserted above
/// the marker `<marker>` of `<file>`, line by line, and `<file>/<marker>.block.tera` as a block.
pub fn render_insertions(
    set: &str,
    context: &tera::Context,
    paths: &[(&str, &str)],
) -> anyhow::Result<Vec<Insertion>> {
    render(&format!("insert/{set}"), context)?
        .into_iter()
        .map(|(name, fragment)| {
            let (file, marker) = name
                .rsplit_once('/')
                .with_context(|| format!("fragment `{name}` is not `<file>/<marker>`"))?;
            let (marker, block) = match marker.strip_suffix(".block") {
                Some(marker) => (marker, true),
                None => (marker, false),
            };
            Ok(Insertion {
                path: PathBuf::from(fill(file, paths)?),
                marker: marker.to_owned(),
                fragment,
                block,
            })
        })
        .collect()
}

/// The templates of one set, parsed: Tera with every template that has Tera syntax, and each
/// template's name with its text when it has none (its own output).
struct Parsed {
    tera: tera::Tera,
    templates: Vec<(String, Option<&'static str>)>,
}

/// Every set parsed so far: the templates are built in, so a set is parsed once a process
/// (a test that scaffolds hundreds of projects parses it once).
static PARSED: std::sync::Mutex<Vec<(String, std::sync::Arc<Parsed>)>> =
    std::sync::Mutex::new(Vec::new());

/// The templates under `templates/<dir_name>/`, parsed, in path order.
fn parsed(dir_name: &str) -> anyhow::Result<std::sync::Arc<Parsed>> {
    let mut cache = PARSED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, parsed)) = cache.iter().find(|(name, _)| name == dir_name) {
        return Ok(parsed.clone());
    }
    let dir = TEMPLATES
        .get_dir(dir_name)
        .with_context(|| format!("no template set `{dir_name}` is built in"))?;
    let mut sources = Vec::new();
    collect(dir, &mut sources);
    sources.sort_by(|a, b| a.0.cmp(&b.0));

    let mut tera = tera::Tera::default();
    tera.autoescape_on(Vec::new());
    let prefix = format!("{dir_name}/");
    let mut templates = Vec::new();
    for (path, text) in sources {
        let name = path.strip_prefix(&prefix).unwrap_or(&path).to_owned();
        // A template without Tera syntax is its own output (the generated Cargo.lock alone is
        // 66 kB of text that Tera need not parse).
        if !has_tags(text) {
            templates.push((name, Some(text)));
            continue;
        }
        tera.add_raw_template(&name, text)
            .with_context(|| format!("template `{dir_name}/{name}` does not parse"))?;
        templates.push((name, None));
    }
    let parsed = std::sync::Arc::new(Parsed { tera, templates });
    cache.push((dir_name.to_owned(), parsed.clone()));
    Ok(parsed)
}

/// Renders every template under `templates/<dir>/`; returns (path without `.tera`, text), in
/// path order.
fn render(dir_name: &str, context: &tera::Context) -> anyhow::Result<Vec<(String, String)>> {
    let parsed = parsed(dir_name)?;
    parsed
        .templates
        .iter()
        .filter_map(|(name, verbatim)| name.strip_suffix(".tera").map(|out| (name, out, verbatim)))
        .map(|(name, out, verbatim)| {
            let text = match verbatim {
                Some(text) => (*text).to_owned(),
                None => parsed
                    .tera
                    .render(name, context)
                    .with_context(|| format!("failed to render template `{dir_name}/{name}`"))?,
            };
            Ok((out.to_owned(), text))
        })
        .collect()
}

/// Where the first Tera tag (`{{`, `{%` or `{#`) of `text` starts: one pass over the text.
fn next_tag(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find('{') {
        let at = from + found;
        if matches!(bytes.get(at + 1), Some(b'{' | b'%' | b'#')) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn has_tags(text: &str) -> bool {
    next_tag(text).is_some()
}

#[cfg(test)]
/// The length of the tag `tail` starts with, up to its closing `}}`, `%}` or `#}`; `None` when
/// it is not closed.
fn tag_length(tail: &str) -> Option<usize> {
    let close = match tail.get(..2)? {
        "{{" => "}}",
        "{%" => "%}",
        _ => "#}",
    };
    tail[2..].find(close).map(|length| 2 + length + close.len())
}

/// Every template whose path starts with `prefix`, unrendered: (path, text).
#[cfg(test)]
pub fn sources(prefix: &str) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    collect(&TEMPLATES, &mut out);
    out.retain(|(path, _)| path.starts_with(prefix));
    out
}

/// Replaces every `{name}` of a template path with its value.
fn fill(path: &str, values: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut out = path.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    anyhow::ensure!(
        !out.contains(['{', '}']),
        "template path `{path}` has an unknown placeholder"
    );
    Ok(out)
}

fn collect(dir: &Dir<'static>, out: &mut Vec<(String, &'static str)>) {
    for file in dir.files() {
        let path = file.path().to_string_lossy().replace('\\', "/");
        let text = file
            .contents_utf8()
            .unwrap_or_else(|| panic!("template `{path}` is not UTF-8"));
        out.push((path, text));
    }
    for sub in dir.dirs() {
        collect(sub, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn tags_are_found_in_one_pass() {
        assert_eq!(next_tag("a { b {% c"), Some(6));
        assert_eq!(next_tag("a { b } c"), None);
        assert_eq!(tag_length("{{ a }} b"), Some(7));
        assert_eq!(tag_length("{% if"), None);
    }

    #[test]
    fn every_template_renders_with_a_full_context() {
        let context = crate::commands::init::sample_context();
        let files = render_set("init", &context, &[], |_| Policy::Owned).unwrap();
        assert!(
            files
                .iter()
                .any(|f| f.path == Path::new("operator/src/main.rs"))
        );
        assert!(
            files
                .iter()
                .all(|f| !f.path.to_string_lossy().ends_with(".tera"))
        );
        let mut paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
        let sorted = paths.clone();
        paths.sort();
        assert_eq!(paths, sorted, "rendered in path order");
    }

    /// The `{{ name }}` tags inside Rust string literals on a line of a template, skipping
    /// comments and char literals.
    fn tags_in_rust_strings(line: &str) -> Vec<&str> {
        let bytes = line.as_bytes();
        let (mut at, mut in_string, mut names) = (0, false, Vec::new());
        while at < bytes.len() {
            let rest = &line[at..];
            if rest.starts_with(['{']) && next_tag(rest) == Some(0) {
                let length = tag_length(rest).unwrap_or(rest.len());
                if in_string && rest.starts_with("{{") {
                    names.push(rest[2..length - 2].trim().trim_matches('-').trim());
                }
                at += length;
                continue;
            }
            match bytes[at] {
                b'/' if !in_string && rest.starts_with("//") => break,
                b'\'' if !in_string && rest.starts_with("'\"'") => at += 2,
                b'"' => in_string = !in_string,
                b'\\' if in_string => at += 1,
                _ => {}
            }
            // On to the next character, which may take several bytes.
            at += 1;
            while at < bytes.len() && !line.is_char_boundary(at) {
                at += 1;
            }
        }
        names
    }

    /// A value reaches a Rust string literal of a template only as a name that validation keeps
    /// free of quotes, backslashes and control characters, or whole, as a literal made by
    /// `names::rust_string` (`{{ image_rust }}`), outside quotes.
    #[test]
    fn only_names_that_need_no_escapes_go_inside_rust_strings() {
        const NAMES: &[&str] = &[
            "kind",
            "kind_lower",
            "plural",
            "version",
            "qualified_group",
            "controller_name",
            "finalizer",
            "condition_type",
            "short_name",
            "project_name",
            "leader_election_id",
            "defaulting_path",
            "validation_path",
            "spoke",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (path, text) in sources("") {
            if !(path.ends_with(".rs.tera") || path.contains(".rs/")) {
                continue;
            }
            for line in text.lines() {
                for name in tags_in_rust_strings(line) {
                    assert!(
                        NAMES.contains(&name),
                        "{path}: `{{{{ {name} }}}}` inside a Rust string: pass it as a literal made by `names::rust_string`, outside quotes, or add it here if validation keeps it free of quotes, backslashes and control characters\n{line}"
                    );
                    seen.insert(name);
                }
            }
        }
        assert!(
            seen.contains("finalizer") && seen.contains("kind"),
            "{seen:?}"
        );
        assert_eq!(
            tags_in_rust_strings(
                r#"a("{{ x }}", '"', {{ y }}, "\\\"{{ z }}", "\"{{ v }}") // "{{ w }}""#
            ),
            ["x", "z", "v"]
        );
    }

    #[test]
    fn placeholders_in_paths_are_filled() {
        assert_eq!(
            fill(
                "api/src/{group}/{version}/{kind}.rs",
                &[("group", "appotp"), ("version", "v1"), ("kind", "app_otp")]
            )
            .unwrap(),
            "api/src/appotp/v1/app_otp.rs"
        );
        assert!(fill("api/src/{nope}.rs", &[("group", "appotp")]).is_err());
    }

    #[test]
    fn an_unknown_set_is_an_error() {
        assert!(render_set("nope", &tera::Context::new(), &[], |_| Policy::Owned).is_err());
    }
}
