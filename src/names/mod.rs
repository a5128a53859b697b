//! Validation of user-given names, and every name derived from them.
//!
//! Templates never compute names: they receive what this module derives.

pub mod builtin;
mod image;
pub mod plural;
mod resource;

pub use image::{container_command, container_port, run_as_user, validate_image};
pub use resource::*;

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

/// Keywords that cannot even be raw identifiers; a module named so gets a `_` suffix.
const NOT_RAW: &[&str] = &["crate", "self", "super", "Self", "_"];

/// File stems that a group's or a kind's module must not take: `lib` and `main` (a crate's
/// root: `api/src/lib.rs`, `operator/tests/controllers/main.rs`), `mod` (the parent module's
/// own `mod.rs`), `bin` (`api/src/bin/`, where cargo looks for binaries), `support` (the
/// controller tests' helpers) and `schema` (`api/src/schema.rs`, how the CRDs' schemas are
/// written).
const RESERVED_STEMS: &[&str] = &["bin", "lib", "main", "mod", "schema", "support"];

/// Names of Rust's prelude that a kind must not shadow: the derived code of a kind's module
/// uses them unqualified.
const PRELUDE: &[&str] = &[
    "AsMut",
    "AsRef",
    "Box",
    "Clone",
    "Copy",
    "Default",
    "DoubleEndedIterator",
    "Drop",
    "Eq",
    "Err",
    "ExactSizeIterator",
    "Extend",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "FromIterator",
    "Into",
    "IntoIterator",
    "Iterator",
    "None",
    "Ok",
    "Option",
    "Ord",
    "PartialEq",
    "PartialOrd",
    "Result",
    "Send",
    "Sized",
    "Some",
    "String",
    "Sync",
    "ToOwned",
    "ToString",
    "TryFrom",
    "TryInto",
    "Unpin",
    "Vec",
];

/// Crates the generated project depends on: a project named like one would shadow it.
const DEPENDENCIES: &[&str] = &[
    "anyhow",
    "assert-json-diff",
    "axum",
    "base64",
    "clap",
    "form-urlencoded",
    "futures",
    "http",
    "http-body",
    "http-body-util",
    "hyper",
    "hyper-rustls",
    "hyper-util",
    "json-patch",
    "k8s-openapi",
    "kube",
    "kube-runtime",
    "prometheus-client",
    "rcgen",
    "ring",
    "rsbuilder-runtime",
    "rustls",
    "schemars",
    "serde",
    "serde-json",
    "serde-yaml",
    "socket2",
    "thiserror",
    "tokio",
    "tokio-rustls",
    "tokio-util",
    "tower",
    "tower-test",
    "tracing",
    "tracing-subscriber",
];

/// Longest project name: `<name>-system` names the manager's namespace, a DNS-1123 label.
const MAX_PROJECT_NAME: usize = 63 - "-system".len();

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
    if domain.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(UserError::new(format!(
            "invalid domain `{domain}`: an IP address is not a domain, and API groups are named after domains"
        ))
        .help("pass a domain you own, such as `--domain example.com`"));
    }
    if is_dns1123_subdomain(domain) {
        if domain.len() > MAX_DOMAIN {
            return Err(UserError::new(format!(
                "invalid domain `{}...`: it has {} characters, and may have {MAX_DOMAIN}, so that the names made from it fit Kubernetes' limits (the leader election Lease `<hash>.<domain>` has 253)",
                &domain[..20],
                domain.len()
            ))
            .help("pass a shorter --domain"));
        }
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

/// The longest domain: the leader election Lease is named `<8 hex digits>.<domain>`, and a
/// Kubernetes name has at most 253 characters.
const MAX_DOMAIN: usize = 253 - 9;

/// Checks a project name: a DNS-1123 label (it names Kubernetes objects) that starts with a
/// letter and is not reserved (it names the Rust crates).
pub fn validate_project_name(name: &str, from_directory: bool) -> Result<(), UserError> {
    let origin = if from_directory {
        "project name (from the directory name)"
    } else {
        "project name"
    };
    let Some(problem) = project_name_problem(name) else {
        return Ok(());
    };
    let error = UserError::new(format!("invalid {origin} `{name}`: {problem}"));
    // The fix is a valid name, so never the refused one.
    Err(match sanitize_label(name) {
        Some(fixed) => error.help(format!("pass `--project-name {fixed}`")),
        None => error.help("pass `--project-name my-operator`"),
    })
}

/// The rule of a project name that `name` breaks, if any.
fn project_name_problem(name: &str) -> Option<&'static str> {
    if !is_dns1123_label(name) {
        Some(
            "must be a lowercase RFC 1123 label (lowercase letters, digits and `-`, at most 63 characters, starting and ending with a letter or digit)",
        )
    } else if name.len() > MAX_PROJECT_NAME {
        Some("must be at most 56 characters, so that `<name>-system` names a namespace")
    } else if !name.as_bytes()[0].is_ascii_lowercase() {
        Some("must start with a letter, because it names the project's Rust crates")
    } else if name.contains("--") {
        Some("must not hold `--`, because it names the project's Rust crates")
    } else if DEPENDENCIES.contains(&name) || DEPENDENCIES.contains(&api_crate(name).as_str()) {
        Some("is the name of a crate the project depends on")
    } else if RUST_KEYWORDS.contains(&crate_ident(name).as_str())
        || CARGO_RESERVED.contains(&crate_ident(name).as_str())
    {
        Some("is reserved by Rust or cargo and cannot name a crate")
    } else {
        None
    }
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

/// `value` as a Rust string literal, quotes included, that the compiler reads back as `value`:
/// quotes, backslashes and control characters escaped. Every value a template puts into a Rust
/// string goes through this (`image_rust`, `container_command_rust`).
pub fn rust_string(value: &str) -> String {
    // `Debug` of a `str` writes exactly Rust's escapes: `\"`, `\\`, `\n`, `\u{..}`.
    format!("{value:?}")
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
    let out: String = out.chars().take(MAX_PROJECT_NAME).collect();
    let out = out.trim_end_matches('-').to_owned();
    project_name_problem(&out).is_none().then_some(out)
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

/// Checks `--group`: `<group>.<domain>` must be a DNS-1123 subdomain; empty means the domain.
pub fn validate_group(group: &str, domain: &str) -> Result<(), UserError> {
    if group.is_empty() && !domain.contains('.') {
        return Err(UserError::new(format!(
            "invalid group: without `--group` the API group is the domain `{domain}`, and the API server requires a CRD's group to contain a dot"
        ))
        .help(format!("pass a group, such as `--group apps` for `apps.{domain}`")));
    }
    if group.is_empty() || is_dns1123_subdomain(&format!("{group}.{domain}")) {
        return Ok(());
    }
    let error = UserError::new(format!(
        "invalid group `{group}`: `{group}.{domain}` must be a lowercase RFC 1123 subdomain (lowercase letters, digits, `-` and `.`)"
    ));
    Err(match sanitize_subdomain(group) {
        Some(fixed) if is_dns1123_subdomain(&format!("{fixed}.{domain}")) => {
            error.help(format!("pass `--group {fixed}`"))
        }
        _ => error.help("pass a lowercase group such as `--group apps`"),
    })
}

/// Checks `--version`: `v1`, `v1beta1`, `v2alpha1`, the forms Kubernetes orders.
pub fn validate_version(version: &str) -> Result<(), UserError> {
    let rest = version.strip_prefix('v').unwrap_or("");
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (major, tail) = rest.split_at(digits);
    let tail_ok = tail.is_empty()
        || ["alpha", "beta"].iter().any(|stage| {
            tail.strip_prefix(stage).is_some_and(|n| {
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0')
            })
        });
    if !major.is_empty() && !major.starts_with('0') && tail_ok {
        return Ok(());
    }
    let lowered = version.to_lowercase();
    let suggestion = if lowered != version && validate_version(&lowered).is_ok() {
        lowered
    } else if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) {
        format!("v{version}")
    } else {
        "v1".to_owned()
    };
    Err(UserError::new(format!(
        "invalid version `{version}`: must look like `v1`, `v1beta1` or `v2alpha1`"
    ))
    .help(format!("pass `--version {suggestion}`")))
}

/// Checks `--kind`: PascalCase, at most 63 characters, and usable as a Rust type name.
pub fn validate_kind(kind: &str) -> Result<(), UserError> {
    let pascal = kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.chars().all(|c| c.is_ascii_alphanumeric());
    let problem = if !pascal {
        Some("must be PascalCase: an uppercase letter, then letters and digits".to_owned())
    } else if kind.len() > 63 {
        Some("must be at most 63 characters".to_owned())
    } else if kind == "Self" {
        Some("is a Rust keyword".to_owned())
    } else if PRELUDE.contains(&kind) {
        Some(format!(
            "would shadow `{kind}` from Rust's prelude in the generated code"
        ))
    } else {
        None
    };
    let Some(problem) = problem else {
        return Ok(());
    };
    let error = UserError::new(format!("invalid kind `{kind}`: {problem}"));
    let fixed = heck::ToUpperCamelCase::to_upper_camel_case(kind);
    Err(if fixed != kind && validate_kind(&fixed).is_ok() {
        error.help(format!("pass `--kind {fixed}`"))
    } else if pascal && kind.len() <= 63 {
        // PascalCase already: the name itself is taken by Rust.
        error.help("the kind names the generated Rust type: choose another name for it")
    } else {
        error.help("pass a PascalCase kind such as `--kind AppOTP`")
    })
}

/// Whether `value` is a DNS-1035 label: a DNS-1123 label that starts with a letter.
fn is_dns1035_label(value: &str) -> bool {
    is_dns1123_label(value) && value.starts_with(|c: char| c.is_ascii_lowercase())
}

/// Checks `value`, the value of `--<flag>`, against the DNS-1035 label rule, worded as
/// `rule`; the help suggests `fixed` when that is one, `otherwise` when not.
fn validate_dns1035(
    flag: &str,
    value: &str,
    what: &str,
    rule: &str,
    fixed: &str,
    otherwise: &str,
) -> Result<(), UserError> {
    if is_dns1035_label(value) {
        return Ok(());
    }
    let error = UserError::new(format!(
        "invalid {what} `{value}`: must be {rule} (lowercase letters, digits and `-`, starting with a letter, at most 63 characters)"
    ));
    // A fix that is a label is never the refused value.
    Err(if is_dns1035_label(fixed) {
        error.help(format!("pass `--{flag} {fixed}`"))
    } else {
        error.help(otherwise)
    })
}

/// Checks `--plural`: a DNS-1035 label (it names the resource in URLs and RBAC rules).
pub fn validate_plural(plural: &str) -> Result<(), UserError> {
    validate_dns1035(
        "plural",
        plural,
        "plural",
        "a lowercase RFC 1035 label",
        &plural.to_lowercase().replace(['_', '.'], "-"),
        "leave out --plural to use the kind's plural, or pass one that starts with a letter, such as `--plural apps`",
    )
}

/// Checks `--controller-name`: a DNS-1035 label, as kubebuilder requires, since it names the
/// controller's module and its field manager.
pub fn validate_controller_name(name: &str) -> Result<(), UserError> {
    validate_dns1035(
        "controller-name",
        name,
        "controller name",
        "a DNS-1035 label",
        &heck::ToKebabCase::to_kebab_case(name),
        "pass a name such as `--controller-name captain-backup`",
    )
}

/// A Rust module name for `name` (already snake_case): raw when it is a keyword that can be one,
/// with a `_` suffix when it cannot, with a `g` prefix when it starts with a digit. Returns the
/// identifier and the file or folder name it lives in.
fn module(name: &str) -> (String, String) {
    if NOT_RAW.contains(&name) || RESERVED_STEMS.contains(&name) {
        let suffixed = format!("{name}_");
        return (suffixed.clone(), suffixed);
    }
    if RUST_KEYWORDS.contains(&name) {
        return (format!("r#{name}"), name.to_owned());
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        let prefixed = format!("g{name}");
        return (prefixed.clone(), prefixed);
    }
    (name.to_owned(), name.to_owned())
}

#[cfg(test)]
mod scope_tests {
    /// Where a template imports the user's kind, or names it as a Rust type outside a path
    /// (`{{ kind }}`, `{{ kind }}Spec` not right after `::`), in code rather than in comments
    /// or strings.
    fn bare_uses(source: &str) -> Vec<String> {
        let mut found = Vec::new();
        for line in source.lines() {
            let code = line.split("//").next().unwrap_or_default();
            let import = code.trim_start().starts_with("use ") || code.contains(" use ");
            if import && code.contains("{{ kind }}") {
                found.push(line.trim().to_owned());
                continue;
            }
            let mut rest = code;
            while let Some(at) = rest.find("{{ kind }}") {
                let before = &rest[..at];
                let in_string = before.matches('"').count() % 2 == 1;
                if !before.ends_with("::") && !in_string {
                    found.push(line.trim().to_owned());
                }
                rest = &rest[at + "{{ kind }}".len()..];
            }
        }
        found
    }

    #[test]
    fn generated_code_names_the_kind_by_its_path_only() {
        let mut sources = crate::scaffold::sources("controller");
        sources.extend(crate::scaffold::sources("webhook"));
        sources.extend(crate::scaffold::sources("insert/webhook-"));
        sources.retain(|(path, _)| path.contains(".rs"));
        assert!(sources.len() >= 10, "{sources:?}");
        let bare: Vec<String> = sources
            .iter()
            .flat_map(|(path, text)| {
                bare_uses(text)
                    .into_iter()
                    .map(move |line| format!("{path}: {line}"))
            })
            .collect();
        assert!(
            bare.is_empty(),
            "name the kind through its path (`::api::group::v1::Kind`), never by a bare import, so that no kind clashes with a name of the module: {bare:?}"
        );
    }

    #[test]
    fn a_bare_kind_is_found_and_a_path_is_not() {
        let source = "use x::{{ kind }};\ntype A = ::x::{{ kind }};\n// {{ kind }} in a comment\nlet s = \"{{ kind }}\";\nfn f(o: {{ kind }}Spec) {}\n";
        assert_eq!(
            bare_uses(source),
            ["use x::{{ kind }};", "fn f(o: {{ kind }}Spec) {}"]
        );
    }

    /// The keys of the `[section]` of a manifest, with `_` read as `-`.
    fn dependency_names(manifest: &str, section: &str) -> Vec<String> {
        let Some((_, rest)) = manifest.split_once(&format!("[{section}]\n")) else {
            return Vec::new();
        };
        rest.lines()
            .take_while(|line| !line.starts_with('['))
            .filter_map(|line| line.split_once(" = ").map(|(key, _)| key.trim()))
            .filter(|key| !key.is_empty() && !key.starts_with('#') && !key.contains('{'))
            .map(|key| key.replace('_', "-"))
            .collect()
    }

    #[test]
    fn every_crate_the_project_depends_on_is_in_the_dependency_list() {
        let workspace = crate::scaffold::sources("init/Cargo.toml.tera");
        let mut names = dependency_names(workspace[0].1, "workspace.dependencies");
        let runtime = crate::runtime::files()
            .into_iter()
            .find(|(path, _)| path.ends_with("Cargo.toml"))
            .map(|(_, text)| text)
            .expect("the runtime's manifest");
        names.extend(dependency_names(&runtime, "dependencies"));
        assert!(names.len() > 20, "{names:?}");
        let missing: Vec<&String> = names
            .iter()
            .filter(|name| !super::DEPENDENCIES.contains(&name.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "add these to DEPENDENCIES, so that no project is named like them: {missing:?}"
        );
    }
}

#[cfg(test)]
mod tests;
