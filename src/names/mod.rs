//! Validation of user-given names, and every name derived from them.
//!
//! Templates never compute names: they receive what this module derives.

pub mod builtin;
pub mod plural;

use heck::ToSnakeCase;
use serde::Serialize;

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
    } else if DEPENDENCIES.contains(&name) || DEPENDENCIES.contains(&format!("{name}-api").as_str())
    {
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

/// The help line of every refused `--image`.
const IMAGE_HELP: &str = "pass a reference such as `--image memcached:1.6.26-alpine3.19` or `--image registry.example.com:5000/team/app:v1`";

/// Checks `--image` against the grammar of image references (distribution's `reference`, which
/// docker and the kubelet follow): `[registry[:port]/]repository[:tag][@sha256:digest]`. The
/// repository is lowercase components separated by `/`; the image reaches the generated Rust,
/// YAML and the API server as it is.
pub fn validate_image(image: &str) -> Result<(), UserError> {
    match image_problem(image) {
        None => Ok(()),
        Some(problem) => Err(UserError::new(format!(
            "invalid image `{}`: {problem}",
            crate::ui::shown(image)
        ))
        .help(IMAGE_HELP)),
    }
}

/// What is wrong with `image` as an image reference, if anything.
fn image_problem(image: &str) -> Option<String> {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            return Some(format!(
                "the digest `{}` after `@` must be `sha256:` and 64 lowercase hexadecimal digits",
                crate::ui::shown(digest)
            ));
        }
    }
    // A `:` after the last `/` starts the tag; one before it is the registry's port.
    let (name, tag) = match rest.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (rest, None),
    };
    if let Some(tag) = tag {
        let valid = tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !valid {
            return Some(format!(
                "the tag `{}` after `:` must be 1 to 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`",
                crate::ui::shown(tag)
            ));
        }
    }
    if name.is_empty() {
        return Some(
            "the repository is empty: an image is `[registry[:port]/]repository[:tag][@sha256:digest]`"
                .to_owned(),
        );
    }
    if name.len() > 255 {
        return Some(format!("the name `{name}` is longer than 255 characters"));
    }
    let components: Vec<&str> = name.split('/').collect();
    let path = match components.as_slice() {
        [registry, path @ ..] if !path.is_empty() && is_registry(registry) => path,
        all => all,
    };
    path.iter()
        .find(|component| !is_repository_component(component))
        .map(|component| {
            format!(
                "the repository component `{}` must be lowercase letters and digits, joined by `.`, `_`, `__` or dashes, with components separated by `/`",
                crate::ui::shown(component)
            )
        })
}

/// A component of an image's repository: lowercase letters and digits in runs joined by one
/// separator (`.`, `_`, `__`, or any number of `-`).
fn is_repository_component(component: &str) -> bool {
    // Split at every letter and digit: what is left are the separators, and the empty strings
    // between adjacent letters and digits, before the first and after the last.
    let separators: Vec<&str> = component
        .split(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        .collect();
    !component.is_empty()
        && separators.first() == Some(&"")
        && separators.last() == Some(&"")
        && separators
            .iter()
            .all(|s| matches!(*s, "." | "_" | "__") || s.bytes().all(|b| b == b'-'))
}

/// The registry of an image: a host name of DNS components (any case), an IPv4 address or an
/// IPv6 one in brackets, with an optional `:port`.
fn is_registry(registry: &str) -> bool {
    let (host, port) = if let Some(inner) = registry.strip_prefix('[') {
        let Some((address, after)) = inner.split_once(']') else {
            return false;
        };
        if address.is_empty() || !address.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("", Some(port)),
                None => return false,
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    let port_ok =
        port.is_none_or(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = host.is_empty() && registry.starts_with('[')
        || !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
    port_ok && host_ok
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

/// `<group>.<domain>`, or the domain alone for the empty group.
/// `group` as a `--group` value in a command a message suggests: `''` for the domain's own
/// group, so that the shell passes an empty argument.
pub fn group_flag(group: &str) -> &str {
    if group.is_empty() { "''" } else { group }
}

/// An API group as kubebuilder's flags, markers and messages write it: `core` for the core
/// group, whose name is empty.
pub fn group_shown(api_group: &str) -> &str {
    if api_group.is_empty() {
        "core"
    } else {
        api_group
    }
}

/// The API group that a flag or a marker names: the empty core group for `core`.
pub fn api_group(written: &str) -> &str {
    if written == "core" { "" } else { written }
}

/// The path kubebuilder gives a webhook of `names`: `/<verb>-<group with dashes>-<version>-<kind>`
/// (`/mutate-example-com-v1-application`, `/validate--v1-pod` for the core group).
pub fn webhook_path(verb: &str, names: &ResourceNames) -> String {
    format!(
        "/{verb}-{}-{}-{}",
        names.qualified_group.replace('.', "-"),
        names.version,
        names.kind_lower
    )
}

/// The name of a webhook of `names` in its configuration, as kubebuilder writes it
/// (`mapplication-v1.kb.io`, `prefix` `m` or `v`), or with the group in it when `taken` has
/// that one already (the same kind in another group): `mapplication-example-com-v1.kb.io`.
pub fn webhook_name(prefix: char, names: &ResourceNames, taken: &[String]) -> String {
    let short = format!("{prefix}{}-{}.kb.io", names.kind_lower, names.version);
    if taken.contains(&short) {
        format!(
            "{prefix}{}-{}-{}.kb.io",
            names.kind_lower,
            names.qualified_group.replace('.', "-"),
            names.version
        )
    } else {
        short
    }
}

/// The file of a CRD in `config/crd/bases/`, as controller-gen names it:
/// `<qualified group>_<plural>.yaml`.
pub fn crd_file(qualified_group: &str, plural: &str) -> String {
    format!("{qualified_group}_{plural}.yaml")
}

pub fn qualified_group(group: &str, domain: &str) -> String {
    if group.is_empty() {
        domain.to_owned()
    } else {
        format!("{group}.{domain}")
    }
}

/// The API group of Kubernetes itself that `--group` names, as kubebuilder reads it: `core`
/// is the core group, `apps` is `apps`, and `networking` (or `networking.k8s.io`) is
/// `networking.k8s.io`. `None` when the group is none of Kubernetes' own.
fn builtin_group_of(group: &str) -> Option<String> {
    let candidates: Vec<String> = if group == "core" {
        vec![String::new()]
    } else if group.is_empty() {
        Vec::new()
    } else {
        vec![
            group.to_owned(),
            format!("{group}.k8s.io"),
            format!("{group}.apiserver.k8s.io"),
        ]
    };
    candidates.into_iter().find(|candidate| {
        builtin::BUILTINS
            .iter()
            .any(|b| b.group == candidate.as_str())
    })
}

/// The kind of Kubernetes itself that a group (as `--group` writes it), a version and a kind
/// name, if any: the lookup alone, for what PROJECT records. [`builtin`] explains a miss.
pub fn find_builtin(group: &str, version: &str, kind: &str) -> Option<&'static builtin::Builtin> {
    let api_group = builtin_group_of(group)?;
    builtin::BUILTINS
        .iter()
        .find(|b| b.group == api_group && b.version == version && b.kind == kind)
}

/// The kind of Kubernetes itself that `--group`, `--version` and `--kind` name (see
/// [`find_builtin`]). `Ok(None)` when the group is none of Kubernetes' own; an error naming
/// what Kubernetes has when the group is, but the version or the kind is not.
pub fn builtin(
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Option<&'static builtin::Builtin>, UserError> {
    if let Some(found) = find_builtin(group, version, kind) {
        return Ok(Some(found));
    }
    let Some(api_group) = builtin_group_of(group) else {
        return Ok(None);
    };
    let in_group: Vec<&builtin::Builtin> = builtin::BUILTINS
        .iter()
        .filter(|b| b.group == api_group.as_str())
        .collect();
    let shown = group_shown(&api_group);
    let mut versions: Vec<&str> = in_group.iter().map(|b| b.version).collect();
    versions.dedup();
    if !versions.contains(&version) {
        return Err(UserError::new(format!(
            "Kubernetes has no version `{version}` of the `{shown}` group"
        ))
        .help(format!("its versions are {}", versions.join(", "))));
    }
    let kinds: Vec<&str> = in_group
        .iter()
        .filter(|b| b.version == version)
        .map(|b| b.kind)
        .collect();
    Err(UserError::new(format!(
        "Kubernetes has no kind `{kind}` in {shown}/{version}"
    ))
    .help(format!("its kinds there are {}", kinds.join(", "))))
}

/// The prefix of the modules of Kubernetes' own kinds: `controllers/k8s_apps/deployment.rs`,
/// `webhooks/k8s_core/v1/pod.rs`. A group of the project's has the module of its name, so the
/// two meet only for a group called `k8s-apps` or `k8s.apps`, which `create api` refuses then.
pub const BUILTIN_MODULE_PREFIX: &str = "k8s_";

/// The names of a controller or webhook for one of Kubernetes' own kinds: its module is
/// `k8s_` and the group's k8s-openapi module (`k8s_apps`, `k8s_core`, `k8s_networking`), apart
/// from the project's groups (an `apps` group keeps `apps`); `qualified_group` is the real API
/// group (empty for the core group).
pub fn builtin_names(kind: &builtin::Builtin) -> ResourceNames {
    let mut names = builtin_names_unprefixed(kind);
    names.group_module = format!("{BUILTIN_MODULE_PREFIX}{}", names.group_module);
    names.group_dir = format!("{BUILTIN_MODULE_PREFIX}{}", names.group_dir);
    names
}

/// The names of one of Kubernetes' own kinds as rsbuilder made them before its modules moved to
/// `k8s_<group>`: a project made then has `controllers/apps/deployment.rs`, and a webhook added
/// to that kind's module must find it there.
pub fn builtin_names_unprefixed(kind: &builtin::Builtin) -> ResourceNames {
    let label = kind.module.split("::").next().unwrap_or(kind.module);
    let mut names = ResourceNames::new(label, kind.version, kind.kind, Some(kind.plural), "k8s.io");
    names.qualified_group = kind.group.to_owned();
    names.crd_name = String::new();
    names.short_name = None;
    names
}

/// Every name derived from one group, version and kind. Templates receive these and compute
/// none of their own.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ResourceNames {
    /// The group as given (`appotp`); empty for the domain's own group.
    pub group: String,
    /// `appotp.learn.com`.
    pub qualified_group: String,
    /// The group as a Rust module (`appotp`, `r#type`, `super_`).
    pub group_module: String,
    /// The folder of the group's modules (`appotp`).
    pub group_dir: String,
    /// `v1`.
    pub version: String,
    /// `AppOTP`.
    pub kind: String,
    /// `appotp`: the singular resource name.
    pub kind_lower: String,
    /// The kind's module (`app_otp`, `r#loop`).
    pub kind_module: String,
    /// The file stem of the kind's modules (`app_otp`).
    pub kind_file: String,
    /// `appotps`.
    pub plural: String,
    /// Whether `plural` differs from what `plural::plural` computes.
    pub plural_overridden: bool,
    /// The CRD's short name (`aotp`), if it has one.
    pub short_name: Option<String>,
    /// `appotps.appotp.learn.com`.
    pub crd_name: String,
    /// The controller's name (`appotp-appotp`): metrics label, field manager.
    pub controller_name: String,
    /// The controller's module (`app_otp`, or `captain_backup` for `--controller-name
    /// captain-backup`) and its file stem.
    pub controller_module: String,
    pub controller_file: String,
    /// The finalizer the controller keeps on objects it cleans up after.
    pub finalizer: String,
    /// The condition the controller reports its outcome in: `Ready`, or `CaptainBackupReady`
    /// for a controller that is not the kind's own.
    pub condition_type: String,
    /// Prefix of the kind's object names in config/ (`appotp-appotp`).
    pub object_prefix: String,
    /// Prefix of the kind's file names in config/ (`appotp_app_otp`).
    pub file_prefix: String,
}

impl ResourceNames {
    /// Derives every name; the inputs must have passed validation.
    pub fn new(group: &str, version: &str, kind: &str, plural: Option<&str>, domain: &str) -> Self {
        let qualified_group = qualified_group(group, domain);
        let group_label = if group.is_empty() { domain } else { group };
        let (group_module, group_dir) = module(&group_label.replace(['.', '-'], "_"));
        let (kind_module, kind_file) = module(&kind.to_snake_case());
        let (controller_module, controller_file) = (kind_module.clone(), kind_file.clone());
        let computed = plural::plural(kind);
        let plural = plural.map_or_else(|| computed.clone(), str::to_owned);
        let kind_lower = kind.to_lowercase();
        let initials: String = kind
            .chars()
            .filter(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            .collect::<String>()
            .to_lowercase();
        let short_name = Some(
            if initials.len() >= 2 && initials.starts_with(|c: char| c.is_ascii_lowercase()) {
                initials
            } else {
                kind_lower.clone()
            },
        );
        Self {
            group: group.to_owned(),
            group_module,
            version: version.to_owned(),
            kind: kind.to_owned(),
            kind_module,
            plural_overridden: plural != computed,
            crd_name: format!("{plural}.{qualified_group}"),
            controller_name: format!("{group_label}-{kind_lower}"),
            controller_module,
            controller_file,
            finalizer: format!("{qualified_group}/finalizer"),
            condition_type: "Ready".to_owned(),
            object_prefix: format!("{group_label}-{kind_lower}"),
            file_prefix: format!("{group_dir}_{kind_file}"),
            short_name,
            kind_lower,
            kind_file,
            group_dir,
            plural,
            qualified_group,
        }
    }
}

/// The module and file stem of the controller named `name` (`--controller-name`).
pub fn controller_module(name: &str) -> (String, String) {
    module(&name.to_snake_case())
}

impl ResourceNames {
    /// The names of the kind's controller called `name` (`--controller-name`, already
    /// validated). A name whose module is the kind's own is the kind's controller; any other
    /// gets its own module, field manager, finalizer and condition, so that two controllers of
    /// one kind never take each other's fields or finalizers.
    pub fn with_controller(mut self, name: &str) -> Self {
        let (module, file) = controller_module(name);
        if module == self.kind_module {
            return self;
        }
        let group_label = self
            .controller_name
            .strip_suffix(&format!("-{}", self.kind_lower))
            .unwrap_or_default()
            .to_owned();
        self.controller_name = format!("{group_label}-{name}");
        self.finalizer = format!("{}/{name}", self.qualified_group);
        self.condition_type = format!("{}Ready", heck::ToUpperCamelCase::to_upper_camel_case(name));
        self.controller_module = module;
        self.controller_file = file;
        self
    }

    /// Whether these are the names of a controller other than the kind's own.
    pub fn named_controller(&self) -> bool {
        self.controller_module != self.kind_module
    }
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
mod tests {
    use super::*;

    #[test]
    fn every_name_made_from_the_longest_domain_fits_its_limit() {
        let longest = format!(
            "{}.com",
            "a".repeat(60)
                + "."
                + &"b".repeat(60)
                + "."
                + &"c".repeat(60)
                + "."
                + &"d".repeat(MAX_DOMAIN - 4 - 183)
        );
        assert_eq!(longest.len(), MAX_DOMAIN);
        assert!(validate_domain(&longest).is_ok());
        assert!(leader_election_id("my-operator", &longest).len() <= 253);
        let over = format!("e{longest}");
        let error = validate_domain(&over).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("it has 245 characters, and may have 244"),
            "{error}"
        );
        assert_eq!(error.help_text(), Some("pass a shorter --domain"));
    }

    #[test]
    fn webhooks_are_named_as_kubebuilder_names_them() {
        let names = ResourceNames::new("example", "v1", "Application", None, "example.com");
        assert_eq!(
            webhook_path("mutate", &names),
            "/mutate-example-example-com-v1-application"
        );
        assert_eq!(webhook_name('m', &names, &[]), "mapplication-v1.kb.io");
        assert_eq!(
            webhook_name('m', &names, &["mapplication-v1.kb.io".to_owned()]),
            "mapplication-example-example-com-v1.kb.io"
        );
        let pod = builtin_names(find_builtin("core", "v1", "Pod").unwrap());
        assert_eq!(webhook_path("validate", &pod), "/validate--v1-pod");
        assert_eq!(group_shown(pod.qualified_group.as_str()), "core");
        assert_eq!(api_group("core"), "");
        assert_eq!(api_group("apps"), "apps");
        assert_eq!(crd_file("a.io", "bs"), "a.io_bs.yaml");
    }

    #[test]
    fn modules_never_take_the_files_of_crates_or_of_their_parents() {
        for stem in ["bin", "lib", "main", "mod", "schema", "support"] {
            let kind = format!("{}{}", stem[..1].to_uppercase(), &stem[1..]);
            let names = ResourceNames::new(stem, "v1", &kind, None, "learn.com");
            let suffixed = format!("{stem}_");
            assert_eq!(
                (names.group_module.as_str(), names.group_dir.as_str()),
                (suffixed.as_str(), suffixed.as_str())
            );
            assert_eq!(
                (names.kind_module.as_str(), names.kind_file.as_str()),
                (suffixed.as_str(), suffixed.as_str())
            );
            assert_eq!(names.qualified_group, format!("{stem}.learn.com"));
        }
    }

    #[test]
    fn groups_versions_kinds_plurals() {
        for good in ["appotp", "apps", "foo-bar", "foo.policy", ""] {
            assert!(validate_group(good, "learn.com").is_ok(), "{good:?}");
        }
        for (bad, help) in [
            ("app_otp", "pass `--group app-otp`"),
            ("AppOTP", "pass `--group appotp`"),
        ] {
            let error = validate_group(bad, "learn.com").unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("invalid group `{bad}`")),
                "{error}"
            );
            assert_eq!(error.help_text(), Some(help));
        }
        for good in ["v1", "v2", "v1beta1", "v2alpha3", "v10"] {
            assert!(validate_version(good).is_ok(), "{good}");
        }
        for (bad, fix) in [
            ("1", "v1"),
            ("V1", "v1"),
            ("v1beta", "v1"),
            ("v0", "v1"),
            ("v1gamma1", "v1"),
            ("", "v1"),
            ("V1Beta1", "v1beta1"),
        ] {
            let error = validate_version(bad).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("invalid version `{bad}`: must look like `v1`, `v1beta1` or `v2alpha1`")
            );
            assert_eq!(
                error.help_text(),
                Some(format!("pass `--version {fix}`").as_str()),
                "{bad}"
            );
        }
        for good in ["AppOTP", "Loop", "Client", "Memcached", "V2"] {
            assert!(validate_kind(good).is_ok(), "{good}");
        }
        for (bad, help) in [
            ("appOTP", "pass `--kind AppOtp`"),
            ("app_otp", "pass `--kind AppOtp`"),
            (
                "Self",
                "the kind names the generated Rust type: choose another name for it",
            ),
            (
                "Option",
                "the kind names the generated Rust type: choose another name for it",
            ),
            (
                "Vec",
                "the kind names the generated Rust type: choose another name for it",
            ),
            ("8ball", "pass a PascalCase kind such as `--kind AppOTP`"),
            ("App-OTP", "pass `--kind AppOtp`"),
        ] {
            let error = validate_kind(bad).unwrap_err();
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("invalid kind `{bad}`")),
                "{error}"
            );
            assert_eq!(error.help_text(), Some(help), "{bad}");
        }
        assert!(validate_kind(&format!("A{}", "b".repeat(62))).is_ok());
        let error = validate_kind(&format!("A{}", "b".repeat(63))).unwrap_err();
        assert!(
            error.to_string().ends_with("must be at most 63 characters"),
            "{error}"
        );
        assert!(validate_plural("appotps").is_ok());
        assert!(validate_plural("app_otps").is_err());
        assert!(validate_plural("9lives").is_err());
        let error = validate_domain("10.0.0.1").unwrap_err();
        assert!(
            error.to_string().contains("an IP address is not a domain"),
            "{error}"
        );
        assert!(validate_domain("localhost").is_ok());
        let error = validate_group("", "localhost").unwrap_err();
        assert_eq!(
            error.help_text(),
            Some("pass a group, such as `--group apps` for `apps.localhost`")
        );
        assert!(validate_group("g", "localhost").is_ok());
        let long = [
            "A".repeat(60),
            "a".repeat(60),
            "a".repeat(60),
            "a".repeat(60),
        ]
        .join(".");
        let error = validate_group(&long, "learn.example.com").unwrap_err();
        assert_eq!(
            error.help_text(),
            Some("pass a lowercase group such as `--group apps`"),
            "the lowercased group is no subdomain with the domain: 261 characters"
        );
        assert!(validate_group("", "learn.com").is_ok());
        for (bad, help) in [
            ("App_OTPs", "pass `--plural app-otps`"),
            (
                "9w",
                "leave out --plural to use the kind's plural, or pass one that starts with a letter, such as `--plural apps`",
            ),
            // Lowercased, still no label: no fix is offered.
            (
                "9W",
                "leave out --plural to use the kind's plural, or pass one that starts with a letter, such as `--plural apps`",
            ),
        ] {
            let error = validate_plural(bad).unwrap_err();
            assert_eq!(error.help_text(), Some(help), "{bad}");
        }
    }

    #[test]
    fn resource_names_are_valid_rust() {
        let names = ResourceNames::new("appotp", "v1", "AppOTP", None, "learn.com");
        assert_eq!(
            (
                names.group_module.as_str(),
                names.kind_module.as_str(),
                names.kind_file.as_str()
            ),
            ("appotp", "app_otp", "app_otp")
        );
        assert_eq!(names.crd_name, "appotps.appotp.learn.com");
        assert_eq!(names.short_name.as_deref(), Some("aotp"));
        assert_eq!(names.file_prefix, "appotp_app_otp");
        assert!(!names.plural_overridden);

        let names = ResourceNames::new("super", "v1", "Loop", Some("loopies"), "learn.com");
        assert_eq!(
            (names.group_module.as_str(), names.group_dir.as_str()),
            ("super_", "super_")
        );
        assert_eq!(
            (names.kind_module.as_str(), names.kind_file.as_str()),
            ("r#loop", "loop")
        );
        assert!(names.plural_overridden);

        let names = ResourceNames::new("type", "v1", "Client", None, "learn.com");
        assert_eq!(
            (names.group_module.as_str(), names.group_dir.as_str()),
            ("r#type", "type")
        );

        let names = ResourceNames::new("", "v1", "Widget", None, "learn.com");
        assert_eq!(names.qualified_group, "learn.com");
        assert_eq!(names.group_module, "learn_com");
        assert_eq!(names.short_name.as_deref(), Some("widget"));
    }

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
            ("my--op", "my-op"),
            ("kube", "my-operator"),
            ("tokio", "my-operator"),
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
        for bad in [
            "My_Operator",
            "Std",
            "Kube-Runtime",
            "a--b",
            "9-tokio",
            &"B".repeat(70),
            &format!("{}-b", "a".repeat(55)),
        ] {
            let help = validate_project_name(bad, false)
                .unwrap_err()
                .help_text()
                .unwrap()
                .to_owned();
            let fix = help
                .strip_prefix("pass `--project-name ")
                .and_then(|rest| rest.strip_suffix('`'))
                .unwrap();
            assert!(validate_project_name(fix, false).is_ok(), "{bad}: {help}");
        }
        assert!(validate_project_name(&"a".repeat(56), false).is_ok());
        assert!(validate_project_name(&"a".repeat(57), false).is_err());
        assert!(validate_group("bin", "learn.com").is_ok());
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
    fn images_follow_the_reference_grammar() {
        let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
        for good in [
            "nginx".to_owned(),
            "nginx:1.25".to_owned(),
            "library/nginx:latest".to_owned(),
            "memcached:1.6.26-alpine3.19".to_owned(),
            "registry.example.com:5000/team/app__x.y---z:V1.0_rc".to_owned(),
            "localhost:5000/a".to_owned(),
            "Registry.Example.COM/a".to_owned(),
            "[::1]:5000/a/b".to_owned(),
            "[fe80::1]/a".to_owned(),
            "192.168.0.1:80/a".to_owned(),
            format!("a@{digest}"),
            format!("reg.io/a:b@{digest}"),
            format!("a:{}", "x".repeat(128)),
            "reg.io:5000".to_owned(),
            "my-reg.io:5000/a".to_owned(),
            "a-b/c".to_owned(),
        ] {
            assert!(
                validate_image(&good).is_ok(),
                "{good}: {:?}",
                validate_image(&good)
            );
        }
        for (bad, problem) in [
            ("", "the repository is empty"),
            (":tag", "the repository is empty"),
            ("reg.io/:tag", "the repository component ``"),
            ("NGINX:1.0", "the repository component `NGINX`"),
            ("reg.io/Team/app", "the repository component `Team`"),
            ("nginx:", "the tag `` after `:`"),
            ("nginx:.1", "the tag `.1`"),
            ("nginx:a:b", "the repository component `nginx:a`"),
            ("a$b", "the repository component `a$b`"),
            ("reg.io/ng\"inx:1", "the repository component `ng\"inx`"),
            ("a\\b", "the repository component `a\\b`"),
            ("nginx latest", "the repository component `nginx latest`"),
            ("two\nlines", "the repository component `two\\nlines`"),
            ("a..b", "the repository component `a..b`"),
            ("a___b", "the repository component `a___b`"),
            ("-a", "the repository component `-a`"),
            ("a//b", "the repository component ``"),
            ("reg.io:port/a", "the repository component `reg.io:port`"),
            ("a@sha256:abc", "the digest `sha256:abc`"),
            ("a@md5:0123", "the digest `md5:0123`"),
            // Registries: a host of DNS labels, an address in brackets, or neither.
            ("[]/a", "the repository component `[]`"),
            ("[zz]/a", "the repository component `[zz]`"),
            ("[::1]x/a", "the repository component `[::1]x`"),
            ("[::1/a", "the repository component `[::1`"),
            (":5000/a", "the repository component `:5000`"),
            ("a_b:5000/c", "the repository component `a_b:5000`"),
            ("-reg.io:5000/a", "the repository component `-reg.io:5000`"),
            ("reg-.io:5000/a", "the repository component `reg-.io:5000`"),
            ("reg..io:5000/a", "the repository component `reg..io:5000`"),
            ("reg.io:/a", "the repository component `reg.io:`"),
            ("reg.io:50a0/a", "the repository component `reg.io:50a0`"),
        ] {
            let error = validate_image(bad).unwrap_err();
            assert!(
                error.to_string().contains(&format!(": {problem}")),
                "{bad:?}: {error}"
            );
            assert!(error.help_text().is_some(), "{bad:?}");
        }
        assert!(validate_image(&format!("{}:1", "a".repeat(255))).is_ok());
        let long = format!("{}:1", "a".repeat(256));
        assert!(
            validate_image(&long)
                .unwrap_err()
                .to_string()
                .contains("longer than 255")
        );
        assert!(validate_image(&format!("a:{}", "x".repeat(129))).is_err());
    }

    #[test]
    fn rust_strings_read_back_as_given() {
        assert_eq!(rust_string("nginx:1"), "\"nginx:1\"");
        assert_eq!(rust_string("a\\b \"c\"\n"), "\"a\\\\b \\\"c\\\"\\n\"");
        assert_eq!(rust_string("ünï ✓"), "\"ünï ✓\"");
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
        // FNV-1a of the empty string is its offset basis; the others are its test vectors, and
        // the Lease kubebuilder names for the same project.
        assert_eq!(leader_election_id("", "d"), "811c9dc5.d");
        assert_eq!(leader_election_id("a", "d"), "e40c292c.d");
        assert_eq!(leader_election_id("foobar", "d"), "bf9cf968.d");
        assert_eq!(id, "4881aefd.learn.com");
    }

    #[test]
    fn the_default_project_name_is_the_directory_lowercased() {
        let name = |dir: &str| default_project_name(std::path::Path::new(dir));
        assert_eq!(name("/work/My-Operator").as_deref(), Some("my-operator"));
        assert_eq!(name("otp").as_deref(), Some("otp"));
        assert_eq!(name("/"), None);
    }

    #[test]
    fn the_core_group_is_written_core_and_passed_empty() {
        assert_eq!(group_flag(""), "''");
        assert_eq!(group_flag("apps"), "apps");
        assert_eq!((group_shown(""), group_shown("apps")), ("core", "apps"));
        assert_eq!((api_group("core"), api_group("apps")), ("", "apps"));
    }

    #[test]
    fn kubernetes_groups_are_found_by_their_short_names() {
        assert_eq!(builtin_group_of("core").as_deref(), Some(""));
        assert_eq!(builtin_group_of("apps").as_deref(), Some("apps"));
        assert_eq!(
            builtin_group_of("networking").as_deref(),
            Some("networking.k8s.io")
        );
        assert_eq!(
            builtin_group_of("networking.k8s.io").as_deref(),
            Some("networking.k8s.io")
        );
        assert_eq!(
            builtin_group_of("flowcontrol").as_deref(),
            Some("flowcontrol.apiserver.k8s.io")
        );
        assert_eq!(builtin_group_of("appotp"), None);
        assert_eq!(builtin_group_of(""), None);

        let found = find_builtin("apps", "v1", "Deployment").unwrap();
        assert_eq!(
            (found.group, found.version, found.kind),
            ("apps", "v1", "Deployment")
        );
        let found = find_builtin("core", "v1", "Pod").unwrap();
        assert_eq!((found.group, found.version, found.kind), ("", "v1", "Pod"));
        assert!(find_builtin("apps", "v1", "Pod").is_none());
        assert!(find_builtin("apps", "v1beta1", "Deployment").is_none());
        assert!(find_builtin("batch", "v1", "Deployment").is_none());
        assert!(matches!(builtin("appotp", "v1", "AppOTP"), Ok(None)));
        assert_eq!(
            builtin("apps", "v1", "Deployment").unwrap().map(|b| b.kind),
            Some("Deployment")
        );
    }

    #[test]
    fn a_miss_in_a_kubernetes_group_names_what_the_group_has() {
        let error = builtin("apps", "v1beta1", "Deployment").unwrap_err();
        assert_eq!(
            error.to_string(),
            "Kubernetes has no version `v1beta1` of the `apps` group"
        );
        assert_eq!(error.help_text(), Some("its versions are v1"));
        let error = builtin("apps", "v1", "Pod").unwrap_err();
        assert_eq!(error.to_string(), "Kubernetes has no kind `Pod` in apps/v1");
        assert_eq!(
            error.help_text(),
            Some(
                "its kinds there are ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet"
            )
        );
        let error = builtin("core", "v2", "Pod").unwrap_err();
        assert_eq!(
            error.to_string(),
            "Kubernetes has no version `v2` of the `core` group"
        );
        assert_eq!(error.help_text(), Some("its versions are v1"));
    }

    #[test]
    fn a_named_controller_has_names_of_its_own_and_the_kinds_name_is_the_kinds_own() {
        assert_eq!(
            controller_module("captain-backup"),
            ("captain_backup".to_owned(), "captain_backup".to_owned())
        );
        assert_eq!(
            controller_module("type"),
            ("r#type".to_owned(), "type".to_owned())
        );
        let names = ResourceNames::new("appotp", "v1", "AppOTP", None, "learn.com");
        assert!(!names.named_controller());
        let own = names.clone().with_controller("app-otp");
        assert!(!own.named_controller());
        assert_eq!(
            (own.controller_name.as_str(), own.finalizer.as_str()),
            (names.controller_name.as_str(), names.finalizer.as_str())
        );
        let captain = names.clone().with_controller("captain");
        assert!(captain.named_controller());
        assert_eq!(
            (
                captain.controller_name.as_str(),
                captain.finalizer.as_str(),
                captain.condition_type.as_str(),
                captain.controller_module.as_str(),
                captain.controller_file.as_str(),
            ),
            (
                "appotp-captain",
                "appotp.learn.com/captain",
                "CaptainReady",
                "captain",
                "captain"
            )
        );
    }
}
