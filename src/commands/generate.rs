//! `rsbuilder generate`: the manifests, regenerated from the code. CRDs come from the compiled
//! types (the api crate's `crdgen`), `config/rbac/role.yaml` from the RBAC markers and
//! `config/webhook/manifests.yaml` from the webhook markers. With
//! `--check`, nothing is written: stale files are listed with a diff, and the exit code says
//! whether there were any.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context as _;

use crate::apply::{self, Options};
use crate::diff;
use crate::project;
use crate::rbac;
use crate::scaffold::{Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};
use crate::validations::{self, Finding};
use crate::webhook;

/// Where the CRDs go.
const CRD_DIR: &str = "config/crd/bases";
/// Lines of diff shown per stale file.
const DIFF_LINES: usize = 40;

/// Runs `generate` in the project around the current directory.
pub fn run(check: bool) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    generate(root, check)
}

/// Regenerates (or, with `check`, compares) the manifests of the project at `root`.
pub fn generate(root: &Path, check: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let Manifests {
        files,
        orphans,
        crd_time,
        samples,
    } = manifests(root)?;
    let broken = report_samples(&samples);
    if check {
        return check_files(root, &files, &orphans, broken);
    }
    apply::apply(
        root,
        Plan {
            files,
            insertions: Vec::new(),
            removals: Vec::new(),
            derived: Vec::new(),
        },
        Options::default(),
    )?;
    warn_orphans(&orphans);
    ui::note(&format!(
        "generated the manifests in {:.1}s (crdgen {:.1}s)",
        started.elapsed().as_secs_f64(),
        crd_time.as_secs_f64()
    ));
    Ok(())
}

/// Warns of each file of config/crd/bases that no kind produces any more.
pub fn warn_orphans(orphans: &[PathBuf]) {
    for orphan in orphans {
        ui::warn(
            &format!(
                "`{}` matches no kind of the api crate; delete it if the kind is gone",
                orphan.display()
            ),
            None,
        );
    }
}

/// The manifests of a project, planned.
pub struct Manifests {
    /// The CRDs, the RBAC role and the webhook configurations.
    pub files: Vec<PlannedFile>,
    /// Files in config/crd/bases that no kind produces any more.
    pub orphans: Vec<PathBuf>,
    /// How long crdgen took.
    pub crd_time: std::time::Duration,
    /// What the CRDs' CEL rules make of the samples.
    pub samples: Vec<Finding>,
}

/// Prints what the rules make of the samples; returns how many samples (objects) break one.
fn report_samples(findings: &[Finding]) -> usize {
    let mut broken = std::collections::BTreeSet::new();
    for finding in findings {
        match finding {
            Finding::Broken {
                sample,
                name,
                rule,
                path,
                value,
                message,
            } => {
                broken.insert((sample, name));
                ui::warn(
                    &format!(
                        "`{}`: {name} breaks the rule `{rule}` at `{path}` ({value}): {message}",
                        sample.display()
                    ),
                    Some("the API server would refuse this sample: fix the sample, or the rule"),
                );
            }
            Finding::Skipped {
                sample,
                rule,
                path,
                reason,
            } => ui::note(&format!(
                "`{}`: the rule `{rule}` at `{path}` is not evaluated: {reason}",
                sample.display()
            )),
        }
    }
    broken.len()
}

/// The manifests of the project at `root`, written nowhere.
pub fn manifests(root: &Path) -> anyhow::Result<Manifests> {
    let project = project::load(root)?;
    // The markers first: a malformed one fails before anything is built.
    let sources = rbac::read_sources(&OnDisk(root), &project)?;
    let role = rbac::role_from_sources(
        sources
            .iter()
            .map(|(path, text)| (path.as_path(), text.as_str())),
        project.namespaced,
    )?;
    let markers = webhook::markers_from_sources(
        sources
            .iter()
            .map(|(path, text)| (path.as_path(), text.as_str())),
    )?;
    // A project that never had webhooks gets no configuration file; one that had keeps it.
    let webhooks = (!markers.is_empty() || root.join(webhook::MANIFESTS_FILE).exists())
        .then(|| webhook::manifests(&markers))
        .transpose()?;
    let crd_started = Instant::now();
    let crds = crds(root)?;
    let crd_time = crd_started.elapsed();
    check_sizes(&crds)?;
    validations::check_crds(&crds)?;
    let samples = validations::check_samples(&OnDisk(root), &crds)?;

    let mut files: Vec<PlannedFile> = crds
        .iter()
        .map(|(path, contents)| PlannedFile {
            path: path.clone(),
            contents: contents.clone(),
            policy: Policy::Regenerated,
        })
        .collect();
    files.push(PlannedFile {
        path: rbac::ROLE_FILE.into(),
        contents: role,
        policy: Policy::Regenerated,
    });
    // A project without webhook markers has no webhook configurations to write.
    if let Some(contents) = webhooks {
        files.push(PlannedFile {
            path: webhook::MANIFESTS_FILE.into(),
            contents,
            policy: Policy::Regenerated,
        });
    }
    let orphans = orphans(root, &crds)?;
    Ok(Manifests {
        files,
        orphans,
        crd_time,
        samples,
    })
}

/// Runs `crdgen` and splits its output into one file per CRD, keyed by path.
///
/// `crdgen` is run from the workspace root without `--package`, so that cargo resolves the
/// features of the whole workspace, as `cargo build` does: the dependencies it already built
/// are reused, and after an edit only the api crate is compiled again.
fn crds(root: &Path) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    const COMMAND: &str = "cargo run --bin crdgen";
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .args(["run", "--quiet", "--bin", "crdgen"])
        .current_dir(root)
        .output()
        .with_context(|| format!("failed to run `{COMMAND}`: is cargo installed?"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        ui::note(stderr.trim_end());
        return Err(UserError::new(format!(
            "`{COMMAND}` failed; nothing was written"
        ))
        .help("fix the errors above (usually in api/src/), then run `rsbuilder generate` again")
        .into());
    }
    let stdout =
        String::from_utf8(output.stdout).context("crdgen printed something that is not UTF-8")?;
    split_crds(&stdout)
}

/// `---`-separated CRDs → `config/crd/bases/<group>_<plural>.yaml` → `---\n<document>`.
fn split_crds(stream: &str) -> anyhow::Result<BTreeMap<PathBuf, String>> {
    let mut documents: Vec<String> = Vec::new();
    for line in stream.split_inclusive('\n') {
        if line.trim_end() == "---" {
            documents.push(String::new());
        } else if let Some(document) = documents.last_mut() {
            document.push_str(line);
        } else if !line.trim().is_empty() {
            anyhow::bail!("crdgen's output does not start with `---`");
        }
    }
    let mut files = BTreeMap::new();
    for document in documents.into_iter().filter(|d| !d.trim().is_empty()) {
        let value: serde_yaml::Value =
            serde_yaml::from_str(&document).context("crdgen printed YAML that does not parse")?;
        let group = value["spec"]["group"]
            .as_str()
            .context("a CRD without spec.group")?;
        let plural = value["spec"]["names"]["plural"]
            .as_str()
            .context("a CRD without spec.names.plural")?;
        let path = Path::new(CRD_DIR).join(crate::names::crd_file(group, plural));
        files.insert(path, format!("---\n{document}"));
    }
    Ok(files)
}

/// A CRD larger than this, as the JSON the API server is sent, cannot be applied client-side:
/// `kubectl apply` keeps the whole object in its last-applied annotation, and a resource's
/// annotations may hold 256 KiB.
const WARN_BYTES: usize = 256 * 1024;
/// A CRD larger than this cannot be stored: etcd refuses requests over 1.5 MiB.
const MAX_BYTES: usize = 1536 * 1024;
/// How many of the largest fields a warning names.
const LARGEST: usize = 5;

/// What to do about a CRD that grew too large.
const SIZE_HELP: &str = "trim the schemas' descriptions with `DESCRIPTIONS` in api/src/lib.rs: `Descriptions::KubernetesAtMost(0)` drops those of Kubernetes' own types and keeps yours, `AtMost(n)` is controller-gen's `crd:maxDescLen=n`; install with `kubectl apply --server-side` (`make install` does)";

/// Warns about every CRD over `WARN_BYTES` and refuses one over `MAX_BYTES`, naming the
/// fields whose schemas are largest.
fn check_sizes(crds: &BTreeMap<PathBuf, String>) -> anyhow::Result<()> {
    for (path, yaml) in crds {
        let value: serde_json::Value = serde_yaml::from_str(yaml.trim_start_matches("---\n"))
            .with_context(|| {
                format!(
                    "crdgen printed a CRD that does not parse: {}",
                    path.display()
                )
            })?;
        let bytes = serde_json::to_vec(&value)?.len();
        if bytes <= WARN_BYTES {
            continue;
        }
        let largest = largest_fields(&value)
            .iter()
            .map(|(field, size)| format!("{field} ({})", kib(*size)))
            .collect::<Vec<_>>()
            .join(", ");
        let what = format!(
            "`{}` is {} as JSON; its largest fields: {largest}",
            path.display(),
            kib(bytes)
        );
        if bytes > MAX_BYTES {
            return Err(UserError::new(format!(
                "{what}; the API server cannot store a CRD over {} (etcd's request limit); nothing was written",
                kib(MAX_BYTES)
            ))
            .help(SIZE_HELP)
            .into());
        }
        ui::warn(
            &format!(
                "{what}; a client-side `kubectl apply` fails on a CRD over {}",
                kib(WARN_BYTES)
            ),
            Some(SIZE_HELP),
        );
    }
    Ok(())
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// The fields of every version's spec and status whose schemas are largest, as
/// `<version>:spec.<field>` with their size in bytes of JSON, largest first.
fn largest_fields(crd: &serde_json::Value) -> Vec<(String, usize)> {
    let mut fields = Vec::new();
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let name = version["name"].as_str().unwrap_or("?");
        let schema = &version["schema"]["openAPIV3Schema"]["properties"];
        for part in ["spec", "status"] {
            for (field, schema) in schema[part]["properties"].as_object().into_iter().flatten() {
                let size = serde_json::to_vec(schema).map_or(0, |bytes| bytes.len());
                fields.push((format!("{name}:{part}.{field}"), size));
            }
        }
    }
    fields.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    fields.truncate(LARGEST);
    fields
}

fn orphans(root: &Path, crds: &BTreeMap<PathBuf, String>) -> anyhow::Result<Vec<PathBuf>> {
    let dir = Path::new(CRD_DIR);
    let mut orphans = OnDisk(root).files_below(dir, &|folder| folder != dir)?;
    orphans.retain(|path| path.extension().is_some_and(|e| e == "yaml"));
    orphans.retain(|path| path.parent() == Some(dir) && !crds.contains_key(path));
    Ok(orphans)
}

/// Lists the stale files with their diffs; fails when any is stale or a sample breaks a rule
/// (`broken` of them).
fn check_files(
    root: &Path,
    files: &[PlannedFile],
    orphans: &[PathBuf],
    broken: usize,
) -> anyhow::Result<()> {
    let mut stale = 0;
    for file in files {
        // What cannot be read as text is stale, not an error: `generate` rewrites it.
        let current = OnDisk(root)
            .read_bytes(&file.path)
            .ok()
            .flatten()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        if current != file.contents {
            stale += 1;
            ui::file("stale", &file.path);
            let path = file.path.to_string_lossy();
            ui::note(diff::unified(&path, &current, &file.contents, DIFF_LINES).trim_end());
        }
    }
    for orphan in orphans {
        stale += 1;
        ui::file("stale", orphan);
        ui::note("  (no kind of the api crate produces this CRD any more)");
    }
    if broken > 0 && stale == 0 {
        return Err(UserError::new(format!(
            "{broken} sample{} a CEL rule of its CRD",
            if broken == 1 { " breaks" } else { "s break" }
        ))
        .help("fix the samples named above, or the rules")
        .into());
    }
    if broken > 0 {
        ui::note(&format!(
            "and {broken} sample{} a CEL rule of its CRD (named above)",
            if broken == 1 { " breaks" } else { "s break" }
        ));
    }
    if stale > 0 {
        return Err(UserError::new(format!(
            "{stale} manifest{} out of date",
            if stale == 1 { " is" } else { "s are" }
        ))
        .help("run `rsbuilder generate` (or `make manifests`) and commit the result")
        .into());
    }
    ui::note("the manifests are up to date");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CRD whose v1 spec has a field `big` with a description of `bytes` bytes.
    fn crd_of(bytes: usize) -> BTreeMap<PathBuf, String> {
        let yaml = format!(
            "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: a.io\n  names:\n    plural: bs\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        properties:\n          spec:\n            properties:\n              big:\n                description: {}\n              small:\n                type: string\n",
            "x".repeat(bytes)
        );
        BTreeMap::from([(PathBuf::from("config/crd/bases/a.io_bs.yaml"), yaml)])
    }

    #[test]
    fn a_crd_too_large_to_store_is_refused_naming_its_largest_fields() {
        assert!(check_sizes(&crd_of(WARN_BYTES - 1024)).is_ok());
        // Over the annotation limit: a warning only.
        assert!(check_sizes(&crd_of(WARN_BYTES + 1)).is_ok());
        assert!(check_sizes(&crd_of(MAX_BYTES - 1024)).is_ok());
        let error = check_sizes(&crd_of(MAX_BYTES)).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("`config/crd/bases/a.io_bs.yaml` is 1536.") && message.contains(" KiB as JSON; its largest fields: v1:spec.big (1536.0 KiB), v1:spec.small (0.0 KiB); the API server cannot store a CRD over 1536.0 KiB"),
            "{message}"
        );
        let help = error
            .downcast_ref::<UserError>()
            .and_then(UserError::help_text)
            .unwrap();
        assert!(help.contains("KubernetesAtMost(0)"), "{help}");
    }

    #[test]
    fn crdgen_output_is_split_per_crd() {
        let stream = "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  group: a.io\n  names:\n    plural: bs\n---\napiVersion: apiextensions.k8s.io/v1\nspec:\n  group: c.io\n  names:\n    plural: ds\n";
        let files = split_crds(stream).unwrap();
        let paths: Vec<_> = files
            .keys()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            paths,
            [
                "config/crd/bases/a.io_bs.yaml",
                "config/crd/bases/c.io_ds.yaml"
            ]
        );
        assert!(files[Path::new("config/crd/bases/a.io_bs.yaml")].starts_with("---\napiVersion"));
        assert!(split_crds("").unwrap().is_empty());
        assert!(split_crds("oops\n").is_err());
    }
}
