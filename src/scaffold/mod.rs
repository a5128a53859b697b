//! Templates to plan: every file a command writes and every insertion it makes, rendered in
//! memory. Nothing here touches the disk; `apply` does.

pub mod markers;

use std::path::PathBuf;

use anyhow::Context as _;
use include_dir::{Dir, include_dir};

/// The templates, embedded: `templates/<set>/<path>.tera` renders `<path>`.
static TEMPLATES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/templates");

/// What to do when a planned file already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The file is rsbuilder's: an existing one with other contents is a conflict, unless
    /// `--force`.
    Owned,
    /// The file is commonly the user's own (README, .gitignore): an existing one is kept.
    KeepExisting,
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
}

/// Everything one command would change.
#[derive(Debug, Default)]
pub struct Plan {
    /// Whole files.
    pub files: Vec<PlannedFile>,
    /// Insertions at markers.
    pub insertions: Vec<Insertion>,
}

/// Renders every template of `set` (a folder under `templates/`) with `context`.
/// `policy` decides, per output path, what happens when the file exists.
pub fn render_set(
    set: &str,
    context: &tera::Context,
    policy: impl Fn(&str) -> Policy,
) -> anyhow::Result<Vec<PlannedFile>> {
    let dir = TEMPLATES
        .get_dir(set)
        .with_context(|| format!("no template set `{set}` is built in"))?;
    let mut sources = Vec::new();
    collect(dir, &mut sources);
    sources.sort_by(|a, b| a.0.cmp(&b.0));

    let mut tera = tera::Tera::default();
    tera.autoescape_on(Vec::new());
    let prefix = format!("{set}/");
    let mut names = Vec::new();
    for (path, text) in &sources {
        let name = path.strip_prefix(&prefix).unwrap_or(path);
        tera.add_raw_template(name, text)
            .with_context(|| format!("template `{set}/{name}` does not parse"))?;
        names.push(name.to_owned());
    }

    names
        .iter()
        .filter_map(|name| name.strip_suffix(".tera").map(|out| (name, out)))
        .map(|(name, out)| {
            let contents = tera
                .render(name, context)
                .with_context(|| format!("failed to render template `{set}/{name}`"))?;
            Ok(PlannedFile {
                path: PathBuf::from(out),
                contents,
                policy: policy(out),
            })
        })
        .collect()
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
    fn every_template_renders_with_a_full_context() {
        let context = crate::commands::init::sample_context();
        let files = render_set("init", &context, |_| Policy::Owned).unwrap();
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

    #[test]
    fn an_unknown_set_is_an_error() {
        assert!(render_set("nope", &tera::Context::new(), |_| Policy::Owned).is_err());
    }
}
