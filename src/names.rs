//! Validation of user-given names, and every name derived from them.
//!
//! Templates never compute names: they receive what this module derives.

use heck::ToSnakeCase;

use crate::ui::UserError;

/// Rust keywords (strict, reserved and edition 2018+ ones), which cannot name a crate.
const RUST_KEYWORDS: &[&str] = &[
    "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
    "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "gen", "if", "impl",
    "in", "let", "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref",
    "return", "self", "Self", "static", "struct", "super", "trait", "true", "try", "type",
    "typeof", "unsafe", "unsized", "use", "virtual", "where", "while", "yield",
];

/// Names cargo refuses for a package: the standard library's crates and its own directories.
const CARGO_RESERVED: &[&str] = &[
    "alloc",
    "core",
    "proc_macro",
    "std",
    "test",
    "build",
    "deps",
    "examples",
    "incremental",
];

/// Whether `value` is a DNS-1123 label: lowercase alphanumerics and `-`, starting and ending
/// with an alphanumeric, at most 63 characters.
pub fn is_dns1123_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Whether `value` is a DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253 characters.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253 && value.split('.').all(is_dns1123_label)
}

/// Checks `--domain`.
pub fn validate_domain(domain: &str) -> Result<(), UserError> {
    if is_dns1123_subdomain(domain) {
        return Ok(());
    }
    let suggestion = sanitize_subdomain(domain);
    let error = UserError::new(format!(
        "invalid domain `{domain}`: must be a lowercase RFC 1123 subdomain (lowercase letters, digits, `-` and `.`, at most 253 characters)"
    ));
    Err(match suggestion {
        Some(fixed) => error.help(format!("pass `--domain {fixed}`")),
        None => error.help("pass a domain you own, such as `--domain example.com`"),
    })
}

/// Checks a project name: a DNS-1123 label (it names Kubernetes objects) that starts with a
/// letter and is not reserved (it names the Rust crates).
pub fn validate_project_name(name: &str, from_directory: bool) -> Result<(), UserError> {
    let origin = if from_directory {
        "project name (from the directory name)"
    } else {
        "project name"
    };
    let problem = if !is_dns1123_label(name) {
        Some(
            "must be a lowercase RFC 1123 label (lowercase letters, digits and `-`, at most 63 characters, starting and ending with a letter or digit)",
        )
    } else if !name.as_bytes()[0].is_ascii_lowercase() {
        Some("must start with a letter, because it names the project's Rust crates")
    } else if RUST_KEYWORDS.contains(&crate_ident(name).as_str())
        || CARGO_RESERVED.contains(&crate_ident(name).as_str())
    {
        Some("is reserved by Rust or cargo and cannot name a crate")
    } else {
        None
    };
    let Some(problem) = problem else {
        return Ok(());
    };
    let error = UserError::new(format!("invalid {origin} `{name}`: {problem}"));
    Err(match sanitize_label(name) {
        Some(fixed) if fixed != name => error.help(format!("pass `--project-name {fixed}`")),
        _ => error.help("pass `--project-name my-operator`"),
    })
}

/// Checks free text that goes into TOML and YAML strings (`--repo`, `--owner`): not blank, and
/// without quotes, backslashes or control characters.
pub fn validate_text(flag: &str, value: &str, example: &str) -> Result<(), UserError> {
    if !value.trim().is_empty()
        && !value.contains(|c: char| c == '"' || c == '\\' || c.is_control())
    {
        return Ok(());
    }
    Err(UserError::new(format!(
        "invalid --{flag} `{value}`: must not be blank, nor hold quotes, backslashes or control characters"
    ))
    .help(format!("pass `--{flag} {example}`")))
}

/// A valid project name close to `name`, if one can be made.
fn sanitize_label(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_matches('-');
    let out: String = out.chars().take(63).collect();
    let out = out.trim_end_matches('-').to_owned();
    let valid = !out.is_empty()
        && !RUST_KEYWORDS.contains(&crate_ident(&out).as_str())
        && !CARGO_RESERVED.contains(&crate_ident(&out).as_str());
    valid.then_some(out)
}

fn sanitize_subdomain(domain: &str) -> Option<String> {
    let labels: Option<Vec<String>> = domain
        .split('.')
        .filter(|label| !label.is_empty())
        .map(|label| {
            let lowered: String = label
                .to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let trimmed = lowered.trim_matches('-').to_owned();
            is_dns1123_label(&trimmed).then_some(trimmed)
        })
        .collect();
    let fixed = labels?.join(".");
    is_dns1123_subdomain(&fixed).then_some(fixed)
}

/// The project name `init` takes when `--project-name` is not given: the directory's name,
/// lowercased.
pub fn default_project_name(dir: &std::path::Path) -> Option<String> {
    dir.file_name()
        .and_then(|name| name.to_str())
        .map(str::to_lowercase)
}

/// The Rust identifier of a crate named `name` (`otp-operator` → `otp_operator`).
pub fn crate_ident(name: &str) -> String {
    name.to_snake_case()
}

/// The name of the leader election Lease: as kubebuilder's, the FNV-1a hash of the project
/// followed by the domain (`2b6a4b1e.learn.com`). The same inputs always give the same name.
pub fn leader_election_id(project: &str, domain: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in project.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}.{domain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains() {
        for good in [
            "learn.com",
            "my.domain",
            "a",
            "x-1.example.org",
            "tutorial.kubebuilder.io",
        ] {
            assert!(validate_domain(good).is_ok(), "{good}");
        }
        for (bad, fix) in [
            ("Learn.COM", Some("learn.com")),
            ("learn_com.io", Some("learn-com.io")),
            ("-learn.com", Some("learn.com")),
            ("learn..com", Some("learn.com")),
            ("", None),
        ] {
            let error = validate_domain(bad).unwrap_err();
            assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
            match fix {
                Some(fix) => assert_eq!(
                    error.help_text(),
                    Some(format!("pass `--domain {fix}`").as_str())
                ),
                None => assert!(error.help_text().is_some()),
            }
        }
        assert!(
            validate_domain(&"a.".repeat(127)).is_err(),
            "over 253 characters"
        );
    }

    #[test]
    fn project_names() {
        for good in ["otp-operator", "memcached-operator", "a", "op2"] {
            assert!(validate_project_name(good, false).is_ok(), "{good}");
        }
        for (bad, fix) in [
            ("My_Operator", "my-operator"),
            ("my.operator", "my-operator"),
            ("1operator", "operator"),
            ("-op", "op"),
            ("test", "my-operator"),
            ("fn", "my-operator"),
            ("op-", "op"),
        ] {
            let error = validate_project_name(bad, false).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("invalid project name `{bad}`")),
                "{error}"
            );
            assert_eq!(
                error.help_text(),
                Some(format!("pass `--project-name {fix}`").as_str()),
                "{bad}"
            );
        }
        assert!(validate_project_name(&"a".repeat(64), false).is_err());
        let error = validate_project_name("My_Operator", true).unwrap_err();
        assert!(
            error.to_string().contains("from the directory name"),
            "{error}"
        );
    }

    #[test]
    fn free_text() {
        assert!(validate_text("owner", "The otp-operator Authors", "x").is_ok());
        for bad in ["", "  ", "say \"hi\"", "a\\b", "two\nlines"] {
            let error = validate_text("owner", bad, "x").unwrap_err();
            assert!(error.to_string().starts_with("invalid --owner"), "{error}");
        }
    }

    #[test]
    fn derived_names() {
        assert_eq!(crate_ident("otp-operator"), "otp_operator");
        assert_eq!(
            leader_election_id("otp-operator", "learn.com"),
            leader_election_id("otp-operator", "learn.com")
        );
        let id = leader_election_id("otp-operator", "learn.com");
        assert!(
            id.ends_with(".learn.com") && id.len() == 8 + ".learn.com".len(),
            "{id}"
        );
        assert_ne!(id, leader_election_id("other", "learn.com"));
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(leader_election_id("", "d"), "811c9dc5.d");
    }
}
