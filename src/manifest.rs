//! Reading the few parts of `Cargo.toml` files that rsbuilder needs, line by line: the lines of
//! a table, the key of a line, and a table's `version`. The manifests read are ones rsbuilder
//! wrote (the project's, the runtime's), so their tables are plain `[name]` headers.

/// The lines of the `[name]` table of `manifest`.
pub fn table<'a>(manifest: &'a str, name: &str) -> impl Iterator<Item = &'a str> + 'a {
    let header = format!("[{name}]");
    let mut inside = false;
    manifest.lines().filter(move |line| {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == header;
            return false;
        }
        inside
    })
}

/// The key a line sets, up to its first dot (`kube` for `kube.workspace = true`), unquoted;
/// `None` for blank lines and comments.
pub fn key(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (key, _) = line.split_once('=')?;
    let key = key.trim().split('.').next().unwrap_or_default().trim();
    let key = key.trim_matches('"');
    (!key.is_empty()).then_some(key)
}

/// The `version` that the `[name]` table of `manifest` sets.
pub fn version(manifest: &str, name: &str) -> Option<String> {
    string(manifest, name, "version")
}

/// The string that `wanted` has in the `[name]` table of `manifest`, unquoted: `license =
/// "Apache-2.0"`, or the one string of a list, `authors = ["The Authors"]`.
pub fn string(manifest: &str, name: &str, wanted: &str) -> Option<String> {
    table(manifest, name)
        .filter(|line| key(line) == Some(wanted))
        .find_map(|line| {
            let (_, value) = line.split_once('=')?;
            let value = value.trim();
            let value = value
                .strip_prefix('[')
                .and_then(|list| list.strip_suffix(']'))
                .map_or(value, str::trim);
            Some(value.trim_matches('"').to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[package]\nname = \"x\"\nversion = \"1.2.3\"\n\n[dependencies]\n# serde = \"1\"\nx-api.workspace = true\n\"kube\" = { version = \"5\" }\nversion = \"9\"\n";

    #[test]
    fn tables_keys_and_versions_are_read() {
        let keys: Vec<&str> = table(MANIFEST, "dependencies").filter_map(key).collect();
        assert_eq!(keys, ["x-api", "kube", "version"]);
        assert_eq!(version(MANIFEST, "package").as_deref(), Some("1.2.3"));
        assert_eq!(version(MANIFEST, "workspace.package"), None);
        assert_eq!(
            version(
                "[workspace.package]\nversion = \"0.1.0\"\n",
                "workspace.package"
            )
            .as_deref(),
            Some("0.1.0")
        );
        let package =
            "[workspace.package]\nlicense = \"Apache-2.0\"\nauthors = [\"The Authors\"]\n";
        assert_eq!(
            string(package, "workspace.package", "license").as_deref(),
            Some("Apache-2.0")
        );
        assert_eq!(
            string(package, "workspace.package", "authors").as_deref(),
            Some("The Authors")
        );
    }
}
