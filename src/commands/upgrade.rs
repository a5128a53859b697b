//! `rsbuilder upgrade`: replaces the project's runtime crate (`runtime/`) with the one of this
//! rsbuilder, and raises the workspace's version pins that the new runtime needs.
//!
//! The runtime is rsbuilder's code. PROJECT records the checksum of `runtime/CHECKSUMS`, which
//! lists the SHA-256 of every runtime file: a runtime whose files no longer match is the
//! user's work, and is replaced only with `--force`. So are the other files rsbuilder keeps
//! (`owned`: the harness under `hack/`, the api crate's schema plumbing), checked against
//! `hack/CHECKSUMS`; a project whose runtime comes from crates.io gets its pin moved instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use toml_edit::Item;

use crate::apply::{self, Options};
use crate::diff;
use crate::owned;
use crate::project::{self, Project, RuntimeRecord};
use crate::runtime;
use crate::scaffold::{Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};

/// The workspace manifest.
const MANIFEST: &str = "Cargo.toml";

/// How to upgrade.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpgradeOptions {
    /// Replace a runtime whose files were changed.
    pub force: bool,
    /// Show the diff and write nothing.
    pub dry_run: bool,
}

/// Runs `upgrade` in the project around the current directory.
pub fn run(options: UpgradeOptions) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    upgrade(root, options)
}

/// Upgrades the runtime of the project at `root`.
pub fn upgrade(root: &Path, options: UpgradeOptions) -> anyhow::Result<()> {
    let mut project = project::load(root)?;
    let Some(recorded) = project.runtime.clone() else {
        return Err(UserError::new(
            "PROJECT records no runtime crate: this project was scaffolded before rsbuilder kept its runtime in `runtime/`",
        )
        .help("scaffold a new project with `rsbuilder init` and `create api`, then move your types (api/src/) and controllers (operator/src/controllers/) into it")
        .into());
    };
    let form = recorded.form.clone();
    form.check(root, &runtime::version())?;
    let on_disk = if form.is_vendored() {
        read_runtime(root)?
    } else {
        BTreeMap::new()
    };
    let changed = if form.is_vendored() {
        changed_files(&recorded, &on_disk)
    } else {
        Vec::new()
    };
    let new_files = runtime::files();
    let new_record = crate::project::RuntimeRecord::current(form);
    let owned = refresh_owned(root, &project, options.force)?;

    if changed.is_empty() && new_record == recorded {
        if owned.is_empty() {
            ui::note(&format!(
                "the runtime is up to date (rsbuilder-runtime {})",
                recorded.version
            ));
            return Ok(());
        }
        return apply_owned(root, owned, options);
    }
    refuse_unless_forced(&recorded, &changed, options.force)?;

    let (mut plan, pins) = plan(root, &mut project, &on_disk, new_files, new_record)?;
    // PROJECT stays the last file written.
    let last = plan.files.len().saturating_sub(1);
    plan.files.splice(last..last, owned);
    if options.dry_run {
        show_diff(root, &plan)?;
    }
    apply::apply(
        root,
        plan,
        Options {
            force: true,
            dry_run: options.dry_run,
        },
    )?;
    let verb = if options.dry_run {
        "would raise"
    } else {
        "raised"
    };
    for pin in &pins {
        ui::note(&format!(
            "{verb} {} {} → {} in {MANIFEST} (the runtime needs it)",
            pin.name, pin.from, pin.to
        ));
    }
    if !options.dry_run {
        ui::note(&format!(
            "upgraded the runtime from rsbuilder-runtime {} to {}; `cargo build` updates Cargo.lock",
            recorded.version,
            runtime::version()
        ));
    }
    Ok(())
}

/// The files rsbuilder keeps besides the runtime (`owned::FILES`) that `upgrade` rewrites, as
/// this rsbuilder writes them, with `hack/CHECKSUMS`. Refused, naming them, when the user
/// changed any, unless `force`; a file `hack/CHECKSUMS` does not list (an older rsbuilder wrote
/// it) is kept with a note, unless `force`.
fn refresh_owned(root: &Path, project: &Project, force: bool) -> anyhow::Result<Vec<PlannedFile>> {
    let new = owned_texts(project)?;
    let tree = OnDisk(root);
    let mut current = BTreeMap::new();
    for path in new
        .keys()
        .map(PathBuf::as_path)
        .chain([Path::new(owned::CHECKSUMS)])
    {
        current.insert(path.to_path_buf(), tree.read_bytes(path)?);
    }
    let listed = current
        .get(Path::new(owned::CHECKSUMS))
        .and_then(Option::as_ref)
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
    let refresh = owned::refresh(&current, listed.as_deref(), &new, force);
    report_owned(&refresh, &current, force)?;
    Ok(refresh
        .files
        .into_iter()
        .map(|(path, contents)| PlannedFile {
            path,
            contents,
            policy: Policy::Regenerated,
        })
        .collect())
}

/// The owned files as this rsbuilder writes them for `project`.
fn owned_texts(project: &Project) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let settings = crate::commands::init::Settings {
        owner: None,
        license: None,
        namespaced: project.namespaced,
        runtime: project
            .runtime
            .as_ref()
            .map(|r| r.form.clone())
            .unwrap_or_default(),
    };
    Ok(crate::commands::init::template_files(project, &settings)?
        .into_iter()
        .filter(|file| owned::is_owned(&file.path))
        .map(|file| (file.path, file.contents))
        .collect())
}

/// Refuses the refresh when the user changed an owned file, unless `force`; says what `force`
/// replaces and what is kept.
fn report_owned(
    refresh: &owned::Refresh,
    current: &BTreeMap<PathBuf, Option<Vec<u8>>>,
    force: bool,
) -> anyhow::Result<()> {
    let them = |list: &[String]| {
        if list.len() == 1 {
            ("does", "is", "it")
        } else {
            ("do", "are", "them")
        }
    };
    if !refresh.edited.is_empty() {
        let list: Vec<String> = refresh.edited.iter().map(|p| format!("`{p}`")).collect();
        let message = format!(
            "rsbuilder's files were changed since it wrote them: {} {} not match `{}`",
            list.join(", "),
            them(&list).0,
            owned::CHECKSUMS
        );
        if !force {
            return Err(UserError::new(message)
                .help("move your changes into files of your own (hack/ and api/src/schema.rs are rsbuilder's), or pass --force to replace them")
                .into());
        }
        ui::warn(&format!("{message}; --force replaces them"), None);
    }
    if !refresh.unlisted.is_empty() {
        let (_, is, it) = them(&refresh.unlisted);
        ui::warn(
            &format!(
                "{} {is} not listed in `{}` (an older rsbuilder wrote {it}, or you changed {it}); --force replaces {it}",
                refresh.unlisted.join(", "),
                owned::CHECKSUMS,
            ),
            None,
        );
    }
    for path in &refresh.kept {
        let missing = current.get(Path::new(path)).is_none_or(Option::is_none);
        ui::note(&if missing {
            format!("note: {path} is missing, and stays so")
        } else {
            format!(
                "note: {path} is older than `{}` and is kept: rsbuilder cannot tell your edits from its older text; `upgrade --force` replaces it",
                owned::CHECKSUMS
            )
        });
    }
    Ok(())
}

/// Writes the refreshed files of a project whose runtime is up to date.
fn apply_owned(
    root: &Path,
    files: Vec<PlannedFile>,
    options: UpgradeOptions,
) -> anyhow::Result<()> {
    let plan = Plan {
        files,
        ..Plan::default()
    };
    if options.dry_run {
        show_diff(root, &plan)?;
    }
    apply::apply(
        root,
        plan,
        Options {
            force: true,
            dry_run: options.dry_run,
        },
    )?;
    if !options.dry_run {
        ui::note("the runtime is up to date; refreshed rsbuilder's files under hack/ and api/src/");
    }
    Ok(())
}

/// Refuses, unless `force`, to downgrade the runtime or to replace files of it that were
/// changed; with `force`, warns.
fn refuse_unless_forced(
    recorded: &RuntimeRecord,
    changed: &[String],
    force: bool,
) -> anyhow::Result<()> {
    let installed = runtime::version();
    if parse_version(&recorded.version).ok() > parse_version(&installed).ok() {
        let message = format!(
            "the project's runtime ({}) is newer than this rsbuilder's ({installed}): upgrading would downgrade it",
            recorded.version
        );
        if !force {
            return Err(UserError::new(message)
                .help("install a newer rsbuilder (`cargo install rsbuilder`), or pass --force to downgrade")
                .into());
        }
        ui::warn(&format!("{message}; --force downgrades it"), None);
    }
    if !changed.is_empty() {
        let list: Vec<String> = changed.iter().map(|p| format!("`{p}`")).collect();
        let message = format!(
            "the runtime was changed since rsbuilder wrote it: {} {} not match PROJECT's checksum",
            list.join(", "),
            if list.len() == 1 { "does" } else { "do" }
        );
        if !force {
            return Err(UserError::new(message)
                .help("move your changes out of runtime/ (into operator/), or pass --force to replace them and lose the changes")
                .into());
        }
        ui::warn(&format!("{message}; --force replaces them"), None);
    }
    Ok(())
}

/// Every file under `runtime/`, by path from the project root; `target/` is left out.
pub(crate) fn read_runtime(root: &Path) -> anyhow::Result<BTreeMap<PathBuf, Vec<u8>>> {
    let tree = OnDisk(root);
    let dir = Path::new(runtime::DIR);
    let target = dir.join("target");
    let mut files = BTreeMap::new();
    for relative in tree.files_below(dir, &|folder| folder == target)? {
        if relative == target {
            continue;
        }
        if let Some(bytes) = tree.read_bytes(&relative)? {
            files.insert(relative, bytes);
        }
    }
    Ok(files)
}

/// The runtime files that differ from what PROJECT recorded: a `CHECKSUMS` that does not match
/// PROJECT, files whose hash differs from `CHECKSUMS`, files it lists that are missing, and
/// files it does not list.
pub(crate) fn changed_files(
    recorded: &RuntimeRecord,
    on_disk: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<String> {
    let checksums_path = Path::new(runtime::DIR).join(runtime::CHECKSUMS);
    let name = |path: &Path| path.to_string_lossy().replace('\\', "/");
    let Some(checksums) = on_disk.get(&checksums_path) else {
        return vec![name(&checksums_path)];
    };
    // A checkout that turned line ends into CRLF (git's `core.autocrlf`) changed nothing.
    let text = String::from_utf8_lossy(&unix_line_ends(checksums)).into_owned();
    let listed = (Some(runtime::record(&text)) == recorded.checksum)
        .then(|| runtime::parse_checksums(&text))
        .flatten();
    let Some(listed) = listed else {
        return vec![name(&checksums_path)];
    };
    let mut changed = BTreeSet::new();
    for (relative, hash) in &listed {
        let path = Path::new(runtime::DIR).join(relative);
        match on_disk.get(&path) {
            Some(bytes) if runtime::sha256(&unix_line_ends(bytes)) == *hash => {}
            _ => {
                changed.insert(name(&path));
            }
        }
    }
    for path in on_disk.keys() {
        let relative = path.strip_prefix(runtime::DIR).unwrap_or(path);
        if path != &checksums_path && !listed.contains_key(relative) {
            changed.insert(name(path));
        }
    }
    changed.into_iter().collect()
}

/// `bytes` with every CRLF turned into LF.
fn unix_line_ends(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !bytes.windows(2).any(|pair| pair == b"\r\n") {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut iter = bytes.iter().peekable();
    while let Some(&byte) = iter.next() {
        if byte == b'\r' && iter.peek() == Some(&&b'\n') {
            continue;
        }
        out.push(byte);
    }
    std::borrow::Cow::Owned(out)
}

fn plan(
    root: &Path,
    project: &mut Project,
    on_disk: &BTreeMap<PathBuf, Vec<u8>>,
    new_files: BTreeMap<PathBuf, String>,
    new_record: RuntimeRecord,
) -> anyhow::Result<(Plan, Vec<Pin>)> {
    let removals = on_disk
        .keys()
        .filter(|path| !new_files.contains_key(*path))
        .cloned()
        .collect();
    let manifest = OnDisk(root)
        .read(Path::new(MANIFEST))
        .with_context(|| format!("failed to read `{MANIFEST}`"))?
        .with_context(|| format!("`{MANIFEST}` is missing"))?;
    let runtime_manifest = &new_files[&Path::new(runtime::DIR).join("Cargo.toml")];
    let (mut raised, pins, unread) = raise_pins(&manifest, runtime_manifest);
    if new_record.form == runtime::Form::Registry {
        raised = new_record.form.set_in(&raised, &new_record.version)?;
    }
    warn_git_revision(&new_record);
    // Only the vendored form has the crate's files in the project.
    let new_files = if new_record.form.is_vendored() {
        new_files
    } else {
        BTreeMap::new()
    };
    for (name, needed) in &unread {
        ui::warn(
            &format!(
                "cannot read the version of `{name}` in {MANIFEST}; the runtime needs {needed} or newer"
            ),
            Some(&format!(
                "set `{name}` in [workspace.dependencies] to {needed} or newer"
            )),
        );
    }

    let mut files: Vec<PlannedFile> = new_files
        .into_iter()
        .map(|(path, contents)| PlannedFile {
            path,
            contents,
            policy: Policy::Regenerated,
        })
        .collect();
    for pin in &pins {
        if pin.name == "kube" {
            project.kube_version = pin.version.clone();
        } else if pin.name == "k8s-openapi" {
            project.k8s_openapi_version = pin.version.clone();
        }
    }
    files.push(PlannedFile {
        path: MANIFEST.into(),
        contents: raised,
        policy: Policy::Regenerated,
    });
    project.runtime = Some(new_record);
    files.push(project.planned());
    Ok((
        Plan {
            files,
            insertions: Vec::new(),
            removals,
            derived: Vec::new(),
        },
        pins,
    ))
}

/// A runtime from git stays at the revision its entry names: says that moving it is the user's.
fn warn_git_revision(record: &RuntimeRecord) {
    if let runtime::Form::Git { url, .. } = &record.form {
        ui::warn(
            &format!(
                "the runtime comes from `{url}`: rsbuilder cannot move its revision; PROJECT now records rsbuilder-runtime {}",
                record.version
            ),
            Some(&format!(
                "set `rev` of rsbuilder-runtime in {MANIFEST} to the commit of rsbuilder-runtime {}",
                record.version
            )),
        );
    }
}

/// The text of `relative` as a diff shows it: `None` when it cannot be read (missing, a
/// folder), bytes that are not UTF-8 replaced.
fn shown(root: &Path, relative: &Path) -> Option<String> {
    let bytes = OnDisk(root).read_bytes(relative).ok()??;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Prints a unified diff of every file the plan changes, and the files it removes, to stdout:
/// the diff is what `--dry-run` was asked for, and `> upgrade.diff` keeps it.
///
/// The diff is whole, so that `git apply upgrade.diff` makes the upgrade: a file made is
/// `--- /dev/null`, a file removed `+++ /dev/null` with its every line.
fn show_diff(root: &Path, plan: &Plan) -> anyhow::Result<()> {
    let mut out = String::new();
    let mut push = |text: String| {
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    };
    for file in &plan.files {
        let current = shown(root, &file.path);
        if current.as_deref() != Some(file.contents.as_str()) {
            let path = file.path.to_string_lossy().replace('\\', "/");
            let before = current.as_deref().unwrap_or_default();
            let text = diff::unified(&path, before, &file.contents, usize::MAX);
            push(if current.is_some() {
                text
            } else {
                text.replacen(&format!("--- a/{path}\n"), "--- /dev/null\n", 1)
            });
        }
    }
    for path in &plan.removals {
        let current = shown(root, path).unwrap_or_default();
        let path = path.to_string_lossy().replace('\\', "/");
        push(diff::unified(&path, &current, "", usize::MAX).replacen(
            &format!("+++ b/{path}\n"),
            "+++ /dev/null\n",
            1,
        ));
    }
    ui::data(out.as_bytes())
}

/// A workspace dependency whose version the runtime needs raised.
#[derive(Debug, PartialEq, Eq)]
struct Pin {
    name: String,
    /// The requirement as it was, and as it becomes.
    from: String,
    to: String,
    /// The version the runtime needs, which PROJECT records for kube and k8s-openapi.
    version: String,
}

/// Raises every `[workspace.dependencies]` requirement of `workspace` whose lowest version is
/// lower than the version the runtime's `[dependencies]` require, keeping its operator (`=`,
/// `~`, `^`, `>=`) and everything else of the file, comments and layout included: `toml_edit`
/// edits the one string. Any form is read: `"1.2"`, an inline table's `version`, a
/// `[workspace.dependencies.kube]` table. Also returns the dependencies whose requirement has a
/// form that has no single lowest version (`>=1, <2`, `*`), with the version needed.
fn raise_pins(
    workspace: &str,
    runtime_manifest: &str,
) -> (String, Vec<Pin>, Vec<(String, String)>) {
    let required: Vec<(String, String)> = crate::manifest::parse(runtime_manifest)
        .and_then(|document| {
            let table = crate::manifest::table(&document, "dependencies")?;
            Some(
                table
                    .iter()
                    .filter_map(|(name, entry)| {
                        let version = crate::manifest::requirement(entry)?;
                        Some((name.to_owned(), version.to_owned()))
                    })
                    .collect(),
            )
        })
        .unwrap_or_default();
    let (mut pins, mut unread) = (Vec::new(), Vec::new());
    let Some(mut document) = crate::manifest::parse(workspace) else {
        return (workspace.to_owned(), pins, required);
    };
    let Some(dependencies) = document
        .get_mut("workspace")
        .and_then(|item| item.as_table_like_mut())
        .and_then(|workspace| workspace.get_mut("dependencies"))
        .and_then(|item| item.as_table_like_mut())
    else {
        return (workspace.to_owned(), pins, unread);
    };
    for (name, needed) in required {
        let Some(entry) = dependencies.get_mut(&name) else {
            continue;
        };
        let Ok(needed_version) = parse_version(&needed) else {
            continue;
        };
        let value = match entry.as_table_like_mut() {
            Some(table) => table.get_mut("version").and_then(Item::as_value_mut),
            None => entry.as_value_mut(),
        };
        let Some(value) = value else {
            // A path or git dependency: no version to raise.
            continue;
        };
        let Some(old) = value.as_str().map(str::to_owned) else {
            unread.push((name, needed));
            continue;
        };
        let Some((operator, lowest)) = lowest_version(&old) else {
            unread.push((name, needed));
            continue;
        };
        if lowest >= needed_version {
            continue;
        }
        let new = format!("{operator}{needed}");
        let decor = value.decor().clone();
        *value = toml_edit::Value::from(new.clone());
        *value.decor_mut() = decor;
        pins.push(Pin {
            name,
            from: old,
            to: new,
            version: needed,
        });
    }
    (document.to_string(), pins, unread)
}

/// The operator of a requirement with one comparator (`""` for the default caret) and the
/// lowest version it takes; `None` for one with no single lowest version.
fn lowest_version(requirement: &str) -> Option<(&str, semver::Version)> {
    let parsed = semver::VersionReq::parse(requirement).ok()?;
    let [comparator] = parsed.comparators.as_slice() else {
        return None;
    };
    let operator = match comparator.op {
        semver::Op::Exact => "=",
        semver::Op::Tilde => "~",
        semver::Op::Caret if requirement.trim_start().starts_with('^') => "^",
        semver::Op::Caret => "",
        semver::Op::GreaterEq => ">=",
        _ => return None,
    };
    let lowest = semver::Version {
        major: comparator.major,
        minor: comparator.minor.unwrap_or(0),
        patch: comparator.patch.unwrap_or(0),
        pre: comparator.pre.clone(),
        build: semver::BuildMetadata::EMPTY,
    };
    Some((operator, lowest))
}

/// A version as the runtime's manifest states it: `1.48.0`, or `1.48` for `1.48.0`.
fn parse_version(version: &str) -> Result<semver::Version, semver::Error> {
    semver::Version::parse(version).or_else(|error| {
        let parts = version.split('.').count();
        match parts {
            1 => semver::Version::parse(&format!("{version}.0.0")),
            2 => semver::Version::parse(&format!("{version}.0")),
            _ => Err(error),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pins `raise_pins` raises, after checking it reads every one and writes `want`.
    #[track_caller]
    fn raised(workspace: &str, runtime: &str, want: &str) -> Vec<Pin> {
        let (raised, pins, unread) = raise_pins(workspace, runtime);
        assert!(unread.is_empty(), "{unread:?}");
        assert_eq!(raised, want);
        pins
    }

    #[test]
    fn pins_lower_than_the_runtime_needs_are_raised_and_nothing_else_changes() {
        let workspace = "[workspace]\nmembers = [\"api\"]\n\n[workspace.dependencies]\nkube = { version = \"5.0.0\", default-features = false }\ntokio = { version = \"1.40.0\", features = [\"macros\"] }\nanyhow = \"1.0.100\"\nclap = \"4\"\n# serde = \"0.1\"\n\n[profile.release]\nversion = \"0.0.1\"\n";
        let runtime = "[package]\nname = \"rsbuilder-runtime\"\nversion = \"0.2.0\"\n\n[dependencies]\nkube = { version = \"5.1.0\", default-features = false, features = [\"client\"] }\ntokio = { version = \"1.48.0\", features = [\"net\"] }\nanyhow = \"1.0.90\"\nclap = { version = \"4.5.51\", features = [\"derive\"] }\nserde = \"1.0.228\"\n\n[dev-dependencies]\nanyhow = \"9.0.0\"\n";
        let pins = raised(
            workspace,
            runtime,
            "[workspace]\nmembers = [\"api\"]\n\n[workspace.dependencies]\nkube = { version = \"5.1.0\", default-features = false }\ntokio = { version = \"1.48.0\", features = [\"macros\"] }\nanyhow = \"1.0.100\"\nclap = \"4.5.51\"\n# serde = \"0.1\"\n\n[profile.release]\nversion = \"0.0.1\"\n",
        );
        let names: Vec<&str> = pins.iter().map(|pin| pin.name.as_str()).collect();
        assert_eq!(names, ["kube", "tokio", "clap"]);
        assert_eq!(
            pins[0],
            Pin {
                name: "kube".into(),
                from: "5.0.0".into(),
                to: "5.1.0".into(),
                version: "5.1.0".into(),
            }
        );
    }

    #[test]
    fn every_form_of_requirement_is_raised_keeping_its_operator() {
        // The workspace's requirements, the runtime's, and the workspace raised.
        let pins = raised(
            "[workspace.dependencies]\nkube = { version = \"=5.0.0\" }\ntokio = \"~1.40\" # pinned\n\"serde\" = \"^1.0.100\"\nhttp = \">=1.0\"\nrc = \"1.0.0-rc.1\"\n\n[workspace.dependencies.clap]\nversion = \"4.0.0\"\nfeatures = [\"derive\"]\n",
            "[dependencies]\nkube = \"5.1.0\"\ntokio = \"1.48.0\"\nclap = \"4.5.51\"\nserde = \"1.0.228\"\nhttp = \"1.3.1\"\nrc = \"1.0.0\"\n",
            "[workspace.dependencies]\nkube = { version = \"=5.1.0\" }\ntokio = \"~1.48.0\" # pinned\n\"serde\" = \"^1.0.228\"\nhttp = \">=1.3.1\"\nrc = \"1.0.0\"\n\n[workspace.dependencies.clap]\nversion = \"4.5.51\"\nfeatures = [\"derive\"]\n",
        );
        let pinned: Vec<(&str, &str, &str)> = pins
            .iter()
            .map(|pin| (pin.name.as_str(), pin.from.as_str(), pin.to.as_str()))
            .collect();
        assert_eq!(
            pinned,
            [
                ("kube", "=5.0.0", "=5.1.0"),
                ("tokio", "~1.40", "~1.48.0"),
                ("clap", "4.0.0", "4.5.51"),
                ("serde", "^1.0.100", "^1.0.228"),
                ("http", ">=1.0", ">=1.3.1"),
                ("rc", "1.0.0-rc.1", "1.0.0"),
            ]
        );
    }

    #[test]
    fn requirements_without_one_lowest_version_are_reported() {
        let workspace = "[workspace.dependencies]\nkube = \">=5, <6\"\ntokio = \"*\"\napi = { path = \"api\" }\n";
        let runtime = "[dependencies]\nkube = \"5.1.0\"\ntokio = \"1.48.0\"\napi = \"0.1.0\"\n";
        let (raised, pins, unread) = raise_pins(workspace, runtime);
        assert_eq!(raised, workspace);
        assert!(pins.is_empty());
        assert_eq!(
            unread,
            [
                ("kube".to_owned(), "5.1.0".to_owned()),
                ("tokio".to_owned(), "1.48.0".to_owned())
            ]
        );
    }

    #[test]
    fn versions_compare_numerically() {
        assert!(parse_version("0.10.0").unwrap() > parse_version("0.9.9").unwrap());
        assert_eq!(parse_version("4").unwrap(), semver::Version::new(4, 0, 0));
        assert!(parse_version("^4.1").is_err());
        assert!(parse_version("1.2.3.4").is_err());
    }
}
