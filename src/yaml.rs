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

/// `value` as a YAML scalar: as serde_yaml writes it (so that templates match what the
/// generated crdgen prints), single-quoted where YAML 1.1 would read it as something else
/// than a string.
pub fn scalar(value: &str) -> String {
    // controller-gen writes the core API group as `""`, and so does rsbuilder.
    if value.is_empty() {
        return "\"\"".to_owned();
    }
    let written = serde_yaml::to_string(value)
        .map(|text| text.trim_end_matches('\n').to_owned())
        .unwrap_or_else(|_| format!("\"{}\"", value.escape_default()));
    if YAML_1_1_WORDS.contains(&written.as_str()) {
        format!("'{written}'")
    } else {
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What YAML 1.1 makes of a plain scalar: a boolean, null, or the string itself.
    fn yaml_1_1_reads_a_string(plain: &str) -> bool {
        !YAML_1_1_WORDS.contains(&plain)
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
        assert_eq!(scalar("appotps"), "appotps");
    }
}
