//! The one writer of YAML scalars: every value rsbuilder puts into a YAML file goes through
//! [`scalar`], so that it reads back as the same string under YAML 1.2 (serde_yaml) and under
//! YAML 1.1, which Kubernetes' parser follows (`kind: No` would be `false` there).

/// Plain scalars that YAML 1.1 reads as booleans, and YAML 1.2's core schema as strings
/// (`true`, `null` and their kin are the same in both, and serde_yaml quotes them already).
/// The generated api crate quotes the same words in the CRDs crdgen prints.
pub const YAML_1_1_WORDS: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// `value` as a YAML scalar on one line, which reads back as `value` wherever it is put after
/// `key: ` or `- `, at any depth: as serde_yaml writes it (so that templates match what the
/// generated crdgen prints), single-quoted where YAML 1.1 would read it as something else
/// than a string, and double-quoted with escapes where serde_yaml would write more than one
/// line (a block scalar, `|-`, is indented for the top level only) or where a character would
/// not survive as it is.
pub fn scalar(value: &str) -> String {
    // controller-gen writes the core API group as `""`, and so does rsbuilder.
    if value.is_empty() {
        return "\"\"".to_owned();
    }
    if value.chars().any(needs_escape) {
        return double_quoted(value);
    }
    let written = match serde_yaml::to_string(value) {
        Ok(text) => text.trim_end_matches('\n').to_owned(),
        Err(_) => return double_quoted(value),
    };
    if written.contains('\n') {
        return double_quoted(value);
    }
    if YAML_1_1_WORDS.contains(&written.as_str()) {
        format!("'{written}'")
    } else {
        written
    }
}

/// `value` as serde_yaml writes it, but with every string YAML 1.1 would read as a boolean
/// (a key or a value: `on`, `No`, ...) single-quoted, as [`scalar`] quotes it: Helm and
/// Kubernetes read YAML 1.1, and `enum: [On, Off]` would become booleans there.
pub fn to_string(value: &serde_yaml::Value) -> Result<String, serde_yaml::Error> {
    // Each such string is swapped for a mark serde_yaml writes plain, then the mark for the
    // quoted word. A mark that could be mistaken is avoided: text that holds the mark's
    // characters already is written as serde_yaml writes it.
    let mut text = String::new();
    let mut words = Vec::new();
    let marked = mark_words(value, &mut words, &mut text);
    if text.contains([MARK_START, MARK_END]) {
        return serde_yaml::to_string(value);
    }
    let mut written = serde_yaml::to_string(&marked)?;
    for (index, word) in words.iter().enumerate() {
        written = written.replace(
            &format!("{MARK_START}{index}{MARK_END}"),
            &format!("'{word}'"),
        );
    }
    Ok(written)
}

const MARK_START: char = '\u{e000}';
const MARK_END: char = '\u{e001}';

/// `value` with each YAML 1.1 word replaced by its mark, the words in `words`, and every string
/// seen appended to `seen`.
fn mark_words(
    value: &serde_yaml::Value,
    words: &mut Vec<String>,
    seen: &mut String,
) -> serde_yaml::Value {
    use serde_yaml::Value;
    match value {
        Value::String(text) => {
            seen.push_str(text);
            if YAML_1_1_WORDS.contains(&text.as_str()) {
                words.push(text.clone());
                Value::String(format!("{MARK_START}{}{MARK_END}", words.len() - 1))
            } else {
                value.clone()
            }
        }
        Value::Sequence(items) => Value::Sequence(
            items
                .iter()
                .map(|item| mark_words(item, words, seen))
                .collect(),
        ),
        Value::Mapping(map) => Value::Mapping(
            map.iter()
                .map(|(key, item)| (mark_words(key, words, seen), mark_words(item, words, seen)))
                .collect(),
        ),
        Value::Tagged(tagged) => Value::Tagged(Box::new(serde_yaml::value::TaggedValue {
            tag: tagged.tag.clone(),
            value: mark_words(&tagged.value, words, seen),
        })),
        _ => value.clone(),
    }
}

/// `value` double-quoted, as kubebuilder writes the options of deploy-image in PROJECT: on one
/// line, with YAML's escapes for quotes, backslashes and every character that a YAML reader
/// would not keep as it is.
pub fn double_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let code = u32::from(c);
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02X}"));
                } else if code <= 0xffff {
                    out.push_str(&format!("\\u{code:04X}"));
                } else {
                    out.push_str(&format!("\\U{code:08X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `c` must be escaped to be read back as it is: it is not printable in YAML's
/// sense, or it is a line break YAML 1.1 knows (NEL, LS, PS), or a byte order mark.
fn needs_escape(c: char) -> bool {
    let printable =
        matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..);
    !printable || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// Strings that YAML reads otherwise unless they are written with care.
#[cfg(test)]
pub const TRICKY: &[&str] = &[
    "nginx,-g",
    "a\nb",
    "line one\nline two\n",
    "\n",
    "\r\n",
    "say \"hi\"",
    "it's",
    "'single'",
    "#x",
    "a #b",
    "a: b",
    "key:",
    "  leading spaces",
    "trailing spaces  ",
    "\ttab first",
    "a\tb",
    "back\\slash",
    "a\\b\"c\nd",
    "ünïcødé ✓ 日本語 🦀",
    "line\u{2028}separator\u{2029}paragraph\u{85}nel",
    "\u{feff}bom",
    "nul\u{0}del\u{7f}esc\u{1b}[0m",
    "- x",
    "|",
    ">",
    "*alias",
    "&anchor",
    "!tag",
    "%directive",
    "@at",
    "`tick",
    "---",
    "...",
    "{a: b}",
    "[a]",
    "?",
    "yes",
    "No",
    "null",
    "~",
    "1.0",
    "0x1f",
    "",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// What YAML 1.1 makes of a plain scalar: a boolean, null, or the string itself.
    fn yaml_1_1_reads_a_string(plain: &str) -> bool {
        !YAML_1_1_WORDS.contains(&plain)
    }

    /// A scalar is one line that reads back the same at any depth: in a nested map, in a list.
    #[test]
    fn every_value_reads_back_the_same_at_any_depth() {
        for value in TRICKY {
            let written = scalar(value);
            assert!(!written.contains(['\n', '\r']), "{value:?} as {written}");
            let yaml = format!("a:\n  b:\n    key: {written}\n    list:\n    - {written}\n");
            let read: serde_yaml::Value = serde_yaml::from_str(&yaml)
                .unwrap_or_else(|error| panic!("{value:?} as {written}: {error}"));
            assert_eq!(read["a"]["b"]["key"].as_str(), Some(*value), "{yaml}");
            assert_eq!(read["a"]["b"]["list"][0].as_str(), Some(*value), "{yaml}");
            let quoted = double_quoted(value);
            let read: serde_yaml::Value =
                serde_yaml::from_str(&format!("a:\n    key: {quoted}\n")).unwrap();
            assert_eq!(read["a"]["key"].as_str(), Some(*value), "{quoted}");
        }
    }

    /// Whole documents: every YAML 1.1 word, as a key, a value or an item, is quoted, and the
    /// document reads back the same; other text is as serde_yaml writes it.
    #[test]
    fn documents_quote_yaml_1_1_words_wherever_they_are() {
        let text = "on: 'yes'\nenum:\n- 'On'\n- 'Off'\n- 'on and off'\nlines: |-\n  on\n  off\nnested:\n  n: 'N'\n  'true': 3\n";
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let written = to_string(&value).unwrap();
        assert_eq!(
            written,
            "'on': 'yes'\nenum:\n- 'On'\n- 'Off'\n- on and off\nlines: |-\n  on\n  off\nnested:\n  'n': 'N'\n  'true': 3\n"
        );
        assert_eq!(
            serde_yaml::from_str::<serde_yaml::Value>(&written).unwrap(),
            value
        );
        for word in YAML_1_1_WORDS {
            let written = to_string(&serde_yaml::Value::String((*word).to_owned())).unwrap();
            assert_eq!(written, format!("'{word}'\n"));
        }
        let marked = serde_yaml::Value::String(format!("{MARK_START}0{MARK_END} on"));
        let list = serde_yaml::Value::Sequence(vec![marked.clone(), "on".into()]);
        assert_eq!(
            to_string(&list).unwrap(),
            serde_yaml::to_string(&list).unwrap()
        );
    }

    #[test]
    fn every_value_reads_back_the_same_under_yaml_1_1_and_1_2() {
        let values = [
            "AppOTP",
            "appotps",
            "y",
            "Y",
            "yes",
            "No",
            "on",
            "OFF",
            "null",
            "~",
            "true",
            "",
            "3",
            "1.0",
            "0x1f",
            "a: b",
            "#x",
            "- x",
            "it's",
            "say \"hi\"",
            "back\\slash",
            "multi\nline",
            "sha256:abc",
            "/mutate-a-b-v1-c",
            "*",
            "memcached:1.6.26-alpine3.19",
        ];
        for value in values {
            let written = scalar(value);
            let read: serde_yaml::Value = serde_yaml::from_str(&format!("key: {written}")).unwrap();
            assert_eq!(read["key"].as_str(), Some(value), "{value:?} as {written}");
            let quoted = written.starts_with(['\'', '"', '|', '>']);
            assert!(
                quoted || yaml_1_1_reads_a_string(&written),
                "{value:?} written plain as {written}, which YAML 1.1 reads otherwise"
            );
        }
        assert_eq!(scalar("No"), "'No'");
        assert_eq!(scalar("multi\nline"), "\"multi\\nline\"");
        assert_eq!(scalar("appotps"), "appotps");
    }
}
