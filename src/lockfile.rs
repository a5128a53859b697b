//! `Cargo.lock` for a new project: the registry packages of the tested dependency set (the
//! `init` template), with the workspace's own packages added as cargo writes them, so that
//! `cargo build --locked` works on a fresh project.

use std::collections::BTreeMap;

use anyhow::Context as _;

/// A package of the workspace: its name, version and its dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The package name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Every dependency, normal, dev or build, by package name, with the version requirement
    /// its entry states (`None` for `workspace = true` or a path).
    pub dependencies: BTreeMap<String, Option<String>>,
}

impl Member {
    /// The member described by `manifest` (its `Cargo.toml`), named `name` at `version`.
    pub fn from_manifest(name: &str, version: &str, manifest: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            dependencies: dependencies(manifest),
        }
    }
}

/// The dependencies under `[dependencies]`, `[dev-dependencies]` and `[build-dependencies]`,
/// with their requirements; the first table that states one wins.
fn dependencies(manifest: &str) -> BTreeMap<String, Option<String>> {
    let mut found = BTreeMap::new();
    let Some(document) = crate::manifest::parse(manifest) else {
        return found;
    };
    for path in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let Some(table) = crate::manifest::table(&document, path) else {
            continue;
        };
        for (name, entry) in table.iter() {
            let requirement = crate::manifest::requirement(entry).map(str::to_owned);
            let known: &mut Option<String> = found.entry(name.to_owned()).or_default();
            if known.is_none() {
                *known = requirement;
            }
        }
    }
    found
}

/// `lock` with `members` added, every package sorted by name as cargo sorts them. A dependency
/// on a crate the lock has in several versions is written as cargo writes it, `"name version"`,
/// with the one version its requirement matches; one whose requirement the member does not
/// state (`workspace = true`), or which matches several, is an error. The lock is read and
/// written with toml_edit: the packages it has keep their bytes, and the members are laid out
/// as cargo lays them out.
pub fn with_members(lock: &str, members: &[Member]) -> anyhow::Result<String> {
    let mut document: toml_edit::DocumentMut = lock
        .parse()
        .context("the template's Cargo.lock is not TOML")?;
    let mut packages: Vec<toml_edit::Table> = document
        .remove("package")
        .and_then(|item| item.into_array_of_tables().ok())
        .map(|packages| packages.into_iter().collect())
        .unwrap_or_default();
    let field = |table: &toml_edit::Table, key: &str| -> String {
        table
            .get(key)
            .and_then(toml_edit::Item::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut added = Vec::new();
    for member in members {
        let mut table = toml_edit::Table::new();
        table.decor_mut().set_prefix("\n");
        table.insert("name", toml_edit::value(member.name.as_str()));
        table.insert("version", toml_edit::value(member.version.as_str()));
        if !member.dependencies.is_empty() {
            let mut list = toml_edit::Array::new();
            for (dependency, requirement) in &member.dependencies {
                let versions: Vec<String> = packages
                    .iter()
                    .filter(|package| field(package, "name") == *dependency)
                    .map(|package| field(package, "version"))
                    .collect();
                let entry = if versions.len() <= 1 {
                    dependency.clone()
                } else {
                    let version = locked_version(dependency, requirement.as_deref(), &versions)
                        .with_context(|| {
                            format!(
                                "`{dependency}` of `{}` has {} versions in Cargo.lock",
                                member.name,
                                versions.len()
                            )
                        })?;
                    format!("{dependency} {version}")
                };
                // Cargo's layout: one entry a line, indented by a space, a comma after each.
                let mut entry = toml_edit::Value::from(entry);
                entry.decor_mut().set_prefix("\n ");
                list.push_formatted(entry);
            }
            list.set_trailing_comma(true);
            list.set_trailing("\n");
            table.insert("dependencies", toml_edit::value(list));
        }
        added.push(table);
    }
    packages.extend(added);
    packages.sort_by_key(|package| field(package, "name"));
    let mut all = toml_edit::ArrayOfTables::new();
    for package in packages {
        all.push(package);
    }
    document.insert("package", toml_edit::Item::ArrayOfTables(all));
    Ok(document.to_string())
}

/// `lock` as `init` writes it for a runtime in another form: without the `rsbuilder-runtime`
/// package and every mention of it; then, for a vendored `runtime` (its member), with it, and
/// in the dependencies of the packages named `dependents`. Every other package keeps its bytes.
pub fn with_runtime(
    lock: &str,
    dependents: &[&str],
    runtime: Option<&Member>,
) -> anyhow::Result<String> {
    let mut document: toml_edit::DocumentMut = lock.parse().map_err(|error| {
        crate::ui::UserError::new(format!("Cargo.lock is not TOML: {error}"))
            .help("resolve what is wrong in Cargo.lock, or remove it (cargo writes it again), then run the command again")
    })?;
    let name = "rsbuilder-runtime";
    let is_runtime = |entry: &toml_edit::Value| {
        entry
            .as_str()
            .is_some_and(|text| text.split(' ').next() == Some(name))
    };
    if let Some(packages) = document
        .get_mut("package")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
    {
        packages.retain(|package| package.get("name").and_then(|n| n.as_str()) != Some(name));
        for package in packages.iter_mut() {
            let dependent = package
                .get("name")
                .and_then(|n| n.as_str())
                .is_some_and(|n| dependents.contains(&n));
            let Some(list) = package
                .get_mut("dependencies")
                .and_then(toml_edit::Item::as_array_mut)
            else {
                continue;
            };
            list.retain(|entry| !is_runtime(entry));
            if runtime.is_none() || !dependent {
                continue;
            }
            let mut entries: Vec<String> = list
                .iter()
                .filter_map(|entry| entry.as_str().map(str::to_owned))
                .collect();
            entries.push(name.to_owned());
            entries.sort();
            // Cargo's layout: one entry a line, indented by a space, a comma after each.
            let mut sorted = toml_edit::Array::new();
            for entry in entries {
                let mut entry = toml_edit::Value::from(entry);
                entry.decor_mut().set_prefix("\n ");
                sorted.push_formatted(entry);
            }
            sorted.set_trailing_comma(true);
            sorted.set_trailing("\n");
            *list = sorted;
        }
    }
    let lock = document.to_string();
    match runtime {
        Some(member) => with_members(&lock, std::slice::from_ref(member)),
        None => Ok(lock),
    }
}

/// The one version of `versions` that `requirement` matches, as cargo resolves it.
fn locked_version<'a>(
    dependency: &str,
    requirement: Option<&str>,
    versions: &'a [String],
) -> anyhow::Result<&'a str> {
    let requirement = requirement.with_context(|| {
        format!("its entry states no version requirement to tell which `{dependency}` it takes")
    })?;
    let parsed = semver::VersionReq::parse(requirement)
        .with_context(|| format!("invalid requirement `{requirement}`"))?;
    let matching: Vec<&str> = versions
        .iter()
        .filter(|version| {
            semver::Version::parse(version).is_ok_and(|version| parsed.matches(&version))
        })
        .map(String::as_str)
        .collect();
    match matching[..] {
        [version] => Ok(version),
        _ => anyhow::bail!(
            "its requirement `{requirement}` matches {} of {}",
            matching.len(),
            versions.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"anyhow\"\nversion = \"1.0.100\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"abc\"\n\n[[package]]\nname = \"tokio\"\nversion = \"1.48.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n";

    #[test]
    fn the_runtime_leaves_the_lock_and_comes_back_as_init_writes_it() {
        let member = |name: &str, dependencies: &[&str]| Member {
            name: name.into(),
            version: "0.1.0".into(),
            dependencies: dependencies
                .iter()
                .map(|d| ((*d).to_owned(), None))
                .collect(),
        };
        let runtime = member("rsbuilder-runtime", &["tokio"]);
        let operator = member("otp-operator", &["anyhow", "rsbuilder-runtime", "tokio"]);
        let vendored = with_members(LOCK, &[operator.clone(), runtime.clone()]).unwrap();
        let mut without = operator.clone();
        without.dependencies.remove("rsbuilder-runtime");
        let external = with_members(LOCK, &[without]).unwrap();
        assert_eq!(
            with_runtime(&vendored, &["otp-operator"], None).unwrap(),
            external
        );
        assert_eq!(
            with_runtime(&external, &["otp-operator"], Some(&runtime)).unwrap(),
            vendored
        );
        // Twice is once.
        assert_eq!(
            with_runtime(&vendored, &["otp-operator"], Some(&runtime)).unwrap(),
            vendored
        );
        assert_eq!(
            with_runtime(&external, &["otp-operator"], None).unwrap(),
            external
        );
    }

    #[test]
    fn dependencies_are_read_from_every_dependency_table() {
        let manifest = "[package]\nname = \"x\"\nversion.workspace = true\n\n[dependencies]\nx-api.workspace = true\nkube = { workspace = true, features = [\"derive\"] }\n# serde = \"1\"\n\n[dev-dependencies]\ntower-test.workspace = true\n\n[lints]\nworkspace = true\n";
        let names: Vec<String> = dependencies(manifest).into_keys().collect();
        assert_eq!(names, ["kube", "tower-test", "x-api"]);
    }

    #[test]
    fn members_are_added_in_name_order() {
        let members = [
            Member {
                name: "otp-operator".into(),
                version: "0.1.0".into(),
                dependencies: [("tokio".to_owned(), None), ("anyhow".to_owned(), None)].into(),
            },
            Member {
                name: "api".into(),
                version: "0.1.0".into(),
                dependencies: BTreeMap::new(),
            },
        ];
        let lock = with_members(LOCK, &members).unwrap();
        assert_eq!(
            lock,
            "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"anyhow\"\nversion = \"1.0.100\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"abc\"\n\n[[package]]\nname = \"api\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"otp-operator\"\nversion = \"0.1.0\"\ndependencies = [\n \"anyhow\",\n \"tokio\",\n]\n\n[[package]]\nname = \"tokio\"\nversion = \"1.48.0\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n"
        );
    }

    #[test]
    fn a_dependency_in_several_versions_is_locked_to_the_one_its_requirement_matches() {
        let lock = format!("{LOCK}\n[[package]]\nname = \"tokio\"\nversion = \"0.1.0\"\n");
        let member = |requirement: Option<&str>| Member {
            name: "x".into(),
            version: "0.1.0".into(),
            dependencies: [("tokio".to_owned(), requirement.map(str::to_owned))].into(),
        };
        let locked = with_members(&lock, &[member(Some("1.48"))]).unwrap();
        assert!(
            locked.contains(
                "name = \"x\"\nversion = \"0.1.0\"\ndependencies = [\n \"tokio 1.48.0\",\n]"
            ),
            "{locked}"
        );
        let locked = with_members(&lock, &[member(Some("0.1.0"))]).unwrap();
        assert!(locked.contains(" \"tokio 0.1.0\",\n"), "{locked}");
        for (requirement, why) in [
            (
                None,
                "its entry states no version requirement to tell which `tokio` it takes",
            ),
            (Some("2"), "its requirement `2` matches 0 of 1.48.0, 0.1.0"),
            (
                Some(">=0.1"),
                "its requirement `>=0.1` matches 2 of 1.48.0, 0.1.0",
            ),
        ] {
            let error = with_members(&lock, &[member(requirement)]).unwrap_err();
            assert_eq!(
                format!("{error:#}"),
                format!("`tokio` of `x` has 2 versions in Cargo.lock: {why}")
            );
        }
    }

    #[test]
    fn requirements_are_read_as_stated() {
        let manifest = "[dependencies]\nbase64 = \"0.23.1\"\nkube = { version = \"5\", features = [\"derive\"] }\napi = { path = \"../api\" }\nx.workspace = true\n\n[dev-dependencies]\nkube = { version = \"5.0.0\" }\n";
        let found = dependencies(manifest);
        assert_eq!(found["base64"].as_deref(), Some("0.23.1"));
        assert_eq!(found["kube"].as_deref(), Some("5"));
        assert_eq!(found["api"], None);
        assert_eq!(found["x"], None);
    }
}
