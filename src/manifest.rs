//! Reading `Cargo.toml` files with `toml_edit`, the parser cargo itself uses: a table,
//! its `version`, a string of it, and the version a dependency asks for. Any TOML reads: dotted
//! keys, quoted names, `[workspace.dependencies.kube]` tables, inline tables.

use toml_edit::{DocumentMut, Item, TableLike};

/// `manifest`, parsed; `None` when it is not TOML.
pub fn parse(manifest: &str) -> Option<DocumentMut> {
    manifest.parse().ok()
}

/// The table at the dotted `path` (`workspace.dependencies`) of `document`.
pub fn table<'a>(document: &'a DocumentMut, path: &str) -> Option<&'a dyn TableLike> {
    let mut item: &Item = document.as_item();
    for part in path.split('.') {
        item = item.as_table_like()?.get(part)?;
    }
    item.as_table_like()
}

/// The `version` that the `[path]` table of `manifest` sets.
pub fn version(manifest: &str, path: &str) -> Option<String> {
    string(manifest, path, "version")
}

/// The string that `wanted` has in the `[path]` table of `manifest`: `license = "Apache-2.0"`,
/// or the first string of a list, `authors = ["The Authors"]`.
pub fn string(manifest: &str, path: &str, wanted: &str) -> Option<String> {
    let document = parse(manifest)?;
    let item = table(&document, path)?.get(wanted)?;
    match item.as_value()? {
        toml_edit::Value::String(text) => Some(text.value().clone()),
        toml_edit::Value::Array(list) => list.iter().find_map(|v| v.as_str()).map(str::to_owned),
        _ => None,
    }
}

/// The version requirement a dependency's entry asks for: `"1.2"`, or the `version` of an
/// inline table or of a table of its own.
pub fn requirement(entry: &Item) -> Option<&str> {
    match entry.as_str() {
        Some(text) => Some(text),
        None => entry.as_table_like()?.get("version")?.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[package]\nname = \"x\"\nversion = \"1.2.3\"\n\n[dependencies]\n# serde = \"1\"\nx-api.workspace = true\n\"kube\" = { version = \"5\" }\nversion = \"9\"\n\n[dependencies.clap]\nversion = \"4.5\"\n";

    #[test]
    fn tables_keys_and_versions_are_read() {
        let document = parse(MANIFEST).unwrap();
        let keys: Vec<&str> = table(&document, "dependencies")
            .unwrap()
            .iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(keys, ["x-api", "kube", "version", "clap"]);
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
        // A string with what TOML escapes reads back as it was.
        assert_eq!(
            string(
                "[workspace.package]\nauthors = [\"Ünï \\\"q\\\" \\\\ 🦀\"]\n",
                "workspace.package",
                "authors"
            )
            .as_deref(),
            Some("Ünï \"q\" \\ 🦀")
        );
        let document = parse(MANIFEST).unwrap();
        let dependencies = table(&document, "dependencies").unwrap();
        let versions: Vec<Option<&str>> = ["x-api", "kube", "version", "clap"]
            .iter()
            .map(|name| requirement(dependencies.get(name).unwrap()))
            .collect();
        assert_eq!(versions, [None, Some("5"), Some("9"), Some("4.5")]);
        assert!(parse("not [toml").is_none());
    }
}
