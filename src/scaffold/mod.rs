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

/// Everything one command would change.
#[derive(Debug, Default)]
pub struct Plan {
    /// Whole files.
    pub files: Vec<PlannedFile>,
    /// Insertions at markers.
    pub insertions: Vec<Insertion>,
    /// Files to delete, relative to the project root; one that does not exist is skipped.
    pub removals: Vec<PathBuf>,
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

/// Renders every template under `templates/<dir>/`; returns (path without `.tera`, text), in
/// path order.
fn render(dir_name: &str, context: &tera::Context) -> anyhow::Result<Vec<(String, String)>> {
    let dir = TEMPLATES
        .get_dir(dir_name)
        .with_context(|| format!("no template set `{dir_name}` is built in"))?;
    let mut sources = Vec::new();
    collect(dir, &mut sources);
    sources.sort_by(|a, b| a.0.cmp(&b.0));

    let mut tera = tera::Tera::default();
    tera.autoescape_on(Vec::new());
    let prefix = format!("{dir_name}/");
    let mut names = Vec::new();
    let mut context = context.clone();
    let mut chunks = 0;
    for (path, text) in &sources {
        let name = path.strip_prefix(&prefix).unwrap_or(path);
        // Tera's parser takes most of the time of a command, and most tags are a plain name:
        // those are filled in first, and a template left without Tera syntax is its own
        // output (the generated Cargo.lock alone is 66 kB of text).
        let text = resolve_conditions(&substitute(text, &context), &context);
        if !has_tags(&text) {
            names.push((name.to_owned(), Some(text)));
            continue;
        }
        let condensed = condense(&text, &mut context, &mut chunks);
        tera.add_raw_template(name, &condensed)
            .with_context(|| format!("template `{dir_name}/{name}` does not parse"))?;
        names.push((name.to_owned(), None));
    }
    names
        .iter()
        .filter_map(|(name, verbatim)| name.strip_suffix(".tera").map(|out| (name, out, verbatim)))
        .map(|(name, out, verbatim)| {
            let text = match verbatim {
                Some(text) => text.clone(),
                None => tera
                    .render(name, &context)
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

/// Whether `text` has tags that give names values of their own, or hide tags from Tera
/// (`set`, `macro`, `raw`, ...): filling in names from the context there could be wrong.
fn defines_names(text: &str) -> bool {
    const KEYWORDS: &[&str] = &["set", "set_global", "macro", "raw", "import", "include"];
    let mut rest = text;
    while let Some(open) = rest.find("{%") {
        rest = &rest[open + 2..];
        let word = rest.trim_start_matches(|c: char| c == '-' || c.is_whitespace());
        let word = &word[..word
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(word.len())];
        if KEYWORDS.contains(&word) {
            return true;
        }
    }
    false
}

/// `text` with every `{{ name }}` tag outside a `{% for %}` loop replaced by the value of
/// `name` in `context`, when that is a string Tera would print as it is: no braces that Tera
/// would read again, no whitespace at either end that a neighbour's `{%-` or `-%}` would trim.
/// Other tags stay for Tera.
fn substitute(text: &str, context: &tera::Context) -> String {
    if !has_tags(text) || defines_names(text) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut loops = 0usize;
    for tag in tags(text) {
        out.push_str(&text[copied..tag.start]);
        copied = tag.end;
        let raw = &text[tag.start..tag.end];
        match tag.words.first().copied() {
            Some("for") => loops += 1,
            Some("endfor") => loops = loops.saturating_sub(1),
            _ => {}
        }
        let inner = &raw[2..raw.len() - 2];
        let name = inner.trim();
        let value = match context.get(name) {
            Some(tera::Value::String(value))
                if raw.starts_with("{{")
                    && loops == 0
                    && inner.starts_with(' ')
                    && inner.ends_with(' ')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && !value.is_empty()
                    && !value.contains(['{', '}'])
                    && value.trim() == value.as_str() =>
            {
                value.as_str()
            }
            _ => raw,
        };
        out.push_str(value);
    }
    out.push_str(&text[copied..]);
    out
}

/// A tag of a template: where it starts and ends, and what it is.
struct Tag<'a> {
    start: usize,
    end: usize,
    /// The words inside a `{% %}` tag (`["if", "not", "ssa"]`); empty for other tags.
    words: Vec<&'a str>,
}

/// The tags of `text`, in order.
fn tags(text: &str) -> Vec<Tag<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = next_tag(&text[from..]) {
        let start = from + found;
        let Some(length) = tag_length(&text[start..]) else {
            break;
        };
        let end = start + length;
        let words = if text[start..].starts_with("{%") {
            text[start + 2..end - 2]
                .trim_matches('-')
                .split_whitespace()
                .collect()
        } else {
            Vec::new()
        };
        out.push(Tag { start, end, words });
        from = end;
    }
    out
}

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

/// Tera's truth of a top-level value: missing, null, false, 0, "" and empty lists are false.
fn truthy(context: &tera::Context, name: &str) -> bool {
    match context.get(name) {
        None | Some(tera::Value::Null) => false,
        Some(tera::Value::Bool(value)) => *value,
        Some(tera::Value::String(value)) => !value.is_empty(),
        Some(tera::Value::Number(value)) => value.as_f64() != Some(0.0),
        Some(tera::Value::Array(value)) => !value.is_empty(),
        Some(tera::Value::Object(value)) => !value.is_empty(),
    }
}

/// The value of an `if` condition that `resolve_conditions` can decide: `name`, `not name`,
/// `a == b` or `a != b` of top-level names.
fn decide(context: &tera::Context, words: &[&str]) -> Option<bool> {
    // A name of the context, not a literal (`true`, `1`) nor an operator.
    let plain = |name: &str| {
        name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !matches!(name, "true" | "false" | "not" | "and" | "or" | "in" | "is")
    };
    match words {
        [name] if plain(name) => Some(truthy(context, name)),
        ["not", name] if plain(name) => Some(!truthy(context, name)),
        [a, op @ ("==" | "!="), b] if plain(a) && plain(b) => {
            match (context.get(a)?, context.get(b)?) {
                (tera::Value::String(a), tera::Value::String(b)) => Some((a == b) == (*op == "==")),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `text` with every `{% if %}` that `decide` can settle, outside `{% for %}` loops, replaced
/// by its branch. Only in a template without whitespace control (`{%-`, `-}}`): there, which
/// text a tag trims would change once the branch joins its neighbours.
fn resolve_conditions(text: &str, context: &tera::Context) -> String {
    let dashes = ["{%-", "-%}", "{{-", "-}}", "{#-", "-#}"];
    if dashes.iter().any(|dash| text.contains(dash))
        || !text.contains("{% if ")
        || defines_names(text)
    {
        return text.to_owned();
    }
    let mut text = text.to_owned();
    let mut skip = 0;
    'again: loop {
        let all = tags(&text);
        let mut loops = 0usize;
        for (index, tag) in all.iter().enumerate() {
            match tag.words.first().copied() {
                Some("for") => loops += 1,
                Some("endfor") => loops = loops.saturating_sub(1),
                Some("if") if loops == 0 && tag.start >= skip => {
                    let Some(value) = decide(context, &tag.words[1..]) else {
                        continue;
                    };
                    // The `else` and `endif` of this `if`, at its own depth.
                    let (mut depth, mut otherwise, mut end) = (0usize, None, None);
                    // A loop inside the branch may have an `else` of its own.
                    let mut inner_loops = 0usize;
                    for (later, other) in all.iter().enumerate().skip(index + 1) {
                        match other.words.first().copied() {
                            Some("for") => inner_loops += 1,
                            Some("endfor") => inner_loops = inner_loops.saturating_sub(1),
                            Some("else") if inner_loops > 0 => {}
                            Some("if") => depth += 1,
                            Some("endif") if depth == 0 => {
                                end = Some(later);
                                break;
                            }
                            Some("endif") => depth -= 1,
                            Some("else") if depth == 0 => otherwise = Some(later),
                            Some("elif") if depth == 0 => break,
                            _ => {}
                        }
                    }
                    let Some(end) = end else {
                        skip = tag.end;
                        continue 'again;
                    };
                    let end = &all[end];
                    let branch = match (value, otherwise.map(|o| &all[o])) {
                        (true, Some(otherwise)) => &text[tag.end..otherwise.start],
                        (true, None) => &text[tag.end..end.start],
                        (false, Some(otherwise)) => &text[otherwise.end..end.start],
                        (false, None) => "",
                    };
                    let start = tag.start;
                    text = format!("{}{}{}", &text[..start], branch, &text[end.end..]);
                    skip = start;
                    continue 'again;
                }
                _ => {}
            }
        }
        return text;
    }
}

/// Text runs shorter than this stay in the template.
const CONDENSE_MIN: usize = 64;

/// `text` with its long runs of plain text between Tera tags moved into `context`, as
/// `{{ __text_N }}`: Tera's parser takes about 150 ns a byte, and most of a template is plain
/// text. A run keeps its leading and trailing whitespace in the template, so that the
/// whitespace control of its neighbours (`{%-`, `-%}`) trims exactly what it trimmed before.
fn condense(text: &str, context: &mut tera::Context, chunks: &mut usize) -> String {
    if text.contains("{% raw") || text.contains("{%- raw") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() / 2);
    let mut rest = text;
    loop {
        let (plain, tail) = rest.split_at(next_tag(rest).unwrap_or(rest.len()));
        let body = plain.trim_matches(char::is_whitespace);
        if body.len() >= CONDENSE_MIN {
            let lead = &plain[..plain.len() - plain.trim_start().len()];
            let trail = &plain[plain.trim_end().len()..];
            let name = format!("__text_{chunks}");
            *chunks += 1;
            context.insert(&name, body);
            out.push_str(lead);
            out.push_str("{{ ");
            out.push_str(&name);
            out.push_str(" }}");
            out.push_str(trail);
        } else {
            out.push_str(plain);
        }
        if tail.is_empty() {
            return out;
        }
        let end = tag_length(tail).unwrap_or(tail.len());
        out.push_str(&tail[..end]);
        rest = &tail[end..];
    }
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

    /// Filling in plain names first must give what Tera alone gives, wherever Tera would read
    /// the result differently: loop variables, whitespace control, values Tera would parse.
    #[test]
    fn plain_names_filled_in_first_render_as_tera_renders_them() {
        let mut context = tera::Context::new();
        context.insert("kind", "AppOTP");
        context.insert("version", "v1");
        context.insert("spaced", " padded ");
        context.insert("braces", "{{ kind }}");
        context.insert("versions", &["v1", "v2"]);
        context.insert("flag", &true);
        context.insert("empty", "");
        for template in [
            "kind: {{ kind }}\n",
            "{% for version in versions %}- {{ version }}\n{% endfor %}top: {{ version }}\n",
            "{% if flag -%}\n  {{ spaced }}\n{%- endif %}|",
            "a {{ braces }} b",
            "{{- kind }} {{ kind -}} {{kind}} {# {{ kind }} #}",
            "{% if flag %}{{ kind }}{% endif %}{{ missing | default(value=\"x\") }}",
            "{% if flag %}a{% if not flag %}b{% else %}c{% endif %}d{% else %}e{% endif %}f",
            "{% if missing %}a{% endif %}{% if kind != version %}ne{% endif %}{% if kind == kind %}eq{% endif %}",
            "{% for version in versions %}{% if version %}{{ version }}{% endif %}{% endfor %}",
            "{% if flag %}a{% elif kind %}b{% endif %}",
            "x\n{% if flag %}\n{%- if flag %}y{% endif %}{% endif %}",
            "{% if flag %}{% for v in versions %}{{ v }}{% else %}n{% endfor %}{% endif %}",
            "{% if true %}a{% endif %}{% if 1 %}b{% endif %}",
            "{# c -#}{% if flag %}  x{% endif %}",
            "{% if flag -%}{{ empty }}  x{% endif %}",
            "{% raw %}{{ kind }}{% endraw %}{%raw%}{{ kind }}{%endraw%}",
            "{% set flag = false %}{% if flag %}a{% endif %}{{ kind }}",
        ] {
            let tera_alone = tera::Tera::one_off(template, &context, false).unwrap();
            let substituted = resolve_conditions(&substitute(template, &context), &context);
            let filled = if has_tags(&substituted) {
                tera::Tera::one_off(&substituted, &context, false).unwrap()
            } else {
                substituted.clone()
            };
            assert_eq!(filled, tera_alone, "{template:?} became {substituted:?}");
        }
        assert_eq!(substitute("kind: {{ kind }}", &context), "kind: AppOTP");
        assert_eq!(next_tag("a { b {% c"), Some(6));
        assert_eq!(next_tag("a { b } c"), None);
    }

    #[test]
    fn condensed_templates_render_the_same_bytes() {
        let long =
            "plain text, long enough to be moved out of the template by condense: 0123456789";
        let template = format!(
            "{long}\n  {{%- if on %}}\n  {long}\n{{%- else -%}}\n\n   {long}  \n{{% endif -%}}\n\n{long} {{{{ name }}}} {long}\n{{# a comment #}}{long}\n{{{{- name -}}}}\n  {long}\n"
        );
        for on in [true, false] {
            let mut context = tera::Context::new();
            context.insert("on", &on);
            context.insert("name", "x");
            let plain = tera::Tera::one_off(&template, &context, false).unwrap();
            let mut chunks = 0;
            let mut condensed_context = context.clone();
            let condensed = condense(&template, &mut condensed_context, &mut chunks);
            assert!(
                chunks >= 5 && condensed.len() < template.len() / 2,
                "{condensed}"
            );
            let rendered = tera::Tera::one_off(&condensed, &condensed_context, false).unwrap();
            assert_eq!(rendered, plain, "on: {on}");
        }
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
