//! Image references: `--image` checked as a container runtime reads it.

use crate::ui::UserError;

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

/// `--image-container-port`: a port from 1 to 65535.
pub fn container_port(text: &str) -> Result<u16, UserError> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(UserError::new(format!(
            "invalid --image-container-port `{text}`: a port is a number from 1 to 65535"
        ))
        .help("pass the port the image listens on, such as `--image-container-port 11211`")),
    }
}

/// `--run-as-user`: a user ID other than root's that a pod can run as.
pub fn run_as_user(text: &str) -> Result<i64, UserError> {
    match text.parse::<i64>() {
        Ok(uid) if (1..=i64::from(i32::MAX)).contains(&uid) => Ok(uid),
        _ => Err(UserError::new(format!(
            "invalid --run-as-user `{text}`: a user ID is a number from 1 to 2147483647 (the pod runs as non-root)"
        ))
        .help("pass the image's non-root user, such as `--run-as-user 1001`")),
    }
}

/// `--image-container-command`: arguments separated by commas, on one line.
pub fn container_command(text: &str) -> Result<Vec<String>, UserError> {
    // An argv of one line: a newline or a tab in it is a slip of the shell far more often than
    // an argument, and a script does not fit between commas anyway.
    if text.chars().any(char::is_control) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{}`: a command is one line of arguments separated by commas, without newlines, tabs or other control characters",
            crate::ui::shown(text)
        ))
        .help("pass the command on one line, such as `--image-container-command memcached,-m,64`; for a script, edit `COMMAND` in the controller"));
    }
    let parts: Vec<String> = text.split(',').map(str::to_owned).collect();
    if parts.iter().any(|part| part.trim().is_empty()) {
        return Err(UserError::new(format!(
            "invalid --image-container-command `{text}`: it has an empty argument"
        ))
        .help("separate the command and its arguments with single commas: `memcached,-m,64`"));
    }
    Ok(parts)
}
