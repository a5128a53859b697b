//! `rsbuilder alpha update`: a three-way merge that brings a project made by an older rsbuilder
//! up to this one, as kubebuilder's `alpha update` does. The ancestor is the project as the
//! rsbuilder recorded in PROJECT scaffolds it (`cliVersion`, installed as the Makefile installs
//! it), "theirs" is the project as this rsbuilder scaffolds it, from the same commands
//! (`alpha::commands`), and "ours" is the project as it is. Each file of either scaffold is
//! merged with `git merge-file`; the result goes on a branch of its own, or, with `--force`,
//! into the work tree with conflict markers. A conflict without `--force` writes nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;

use super::alpha;
use crate::apply::{self, Options};
use crate::project::{self, Project};
use crate::scaffold::{Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree as _};
use crate::ui::{self, UserError};
use crate::versions;

/// What the merge of one file gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The project's file stays as it is.
    Kept,
    /// The file becomes this text (made, or changed by the new scaffold).
    Write(String),
    /// The new scaffold no longer has the file, and the project's is the old scaffold's.
    Remove,
    /// Both sides changed the file. `text` has the conflict markers, when there is a text to
    /// mark; `why` says what clashed.
    Conflict { text: Option<String>, why: String },
}

/// The three versions of one file: the old scaffold's, the project's and the new scaffold's.
pub struct Sides<'a> {
    pub base: Option<&'a str>,
    pub ours: Option<&'a str>,
    pub theirs: Option<&'a str>,
}

/// Merges one file three ways. Only a file both sides changed, differently, needs
/// `git merge-file`; `labels` name the sides in conflict markers (ours, base, theirs).
pub fn merge(sides: &Sides<'_>, labels: [&str; 3]) -> anyhow::Result<Merged> {
    let Sides { base, ours, theirs } = *sides;
    if ours == theirs || base == theirs {
        return Ok(Merged::Kept);
    }
    if base == ours {
        return Ok(theirs.map_or(Merged::Remove, |text| Merged::Write(text.to_owned())));
    }
    let (Some(ours), Some(theirs)) = (ours, theirs) else {
        let why = if ours.is_none() {
            "you removed the file, and the new scaffold changed it"
        } else {
            "you changed the file, and the new scaffold no longer has it"
        };
        return Ok(Merged::Conflict {
            text: None,
            why: why.to_owned(),
        });
    };
    let (text, conflicts) = merge_file(ours, base.unwrap_or(""), theirs, labels)?;
    Ok(if conflicts == 0 && text == ours {
        // The new scaffold's changes are in the project already.
        Merged::Kept
    } else if conflicts == 0 {
        Merged::Write(text)
    } else {
        Merged::Conflict {
            text: Some(text),
            why: format!(
                "{conflicts} place{} changed on both sides",
                if conflicts == 1 { "" } else { "s" }
            ),
        }
    })
}

/// `git merge-file -p`: the merged text and the number of conflicts.
fn merge_file(
    ours: &str,
    base: &str,
    theirs: &str,
    labels: [&str; 3],
) -> anyhow::Result<(String, usize)> {
    let scratch = apply::Scratch::new("merge")?;
    let paths = [("ours", ours), ("base", base), ("theirs", theirs)]
        .map(|(name, text)| scratch.write(name, text));
    let [ours, base, theirs] = match paths {
        [Ok(a), Ok(b), Ok(c)] => [a, b, c],
        _ => anyhow::bail!("failed to write the files to merge"),
    };
    let output = Command::new("git")
        .args([
            "-c",
            "merge.conflictStyle=merge",
            "merge-file",
            "-p",
            "-L",
            labels[0],
            "-L",
            labels[1],
            "-L",
            labels[2],
        ])
        .args([&ours, &base, &theirs])
        .stdin(Stdio::null())
        .output()
        .context("failed to run `git merge-file`: alpha update needs git")?;
    let conflicts = match output.status.code() {
        Some(code @ 0..=127) => code as usize,
        _ => anyhow::bail!(
            "`git merge-file` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    };
    let text = String::from_utf8(output.stdout).context("`git merge-file` wrote no UTF-8")?;
    Ok((text, conflicts))
}

/// Runs `alpha update` in the project around the current directory.
pub fn update(options: crate::cli::AlphaUpdateArgs) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    let project = project::load(root)?;
    refuse_unless_clean(root)?;
    let old = match &options.from_binary {
        Some(path) if !path.is_file() => {
            return Err(
                UserError::new(format!("--from-binary {}: no such file", path.display()))
                    .help(format!(
                        "pass the path of rsbuilder {}, or leave --from-binary out to install it",
                        project.cli_version
                    ))
                    .into(),
            );
        }
        Some(path) => {
            check_version(path, &project.cli_version)?;
            path.clone()
        }
        None => install(root, &project.cli_version)?,
    };
    let manifest = OnDisk(root)
        .read(Path::new("Cargo.toml"))
        .context("failed to read the workspace Cargo.toml")?
        .context("the workspace Cargo.toml is missing")?;
    let commands = alpha::commands(&project, &manifest, &alpha::registration_order(root)?)?;
    // The Helm chart is made from the install file, a build output; it stays as the user has
    // it, and `make build-installer` with the Helm edit remakes it after the update.
    let commands = alpha::split_helm(&commands).0.to_vec();
    let scratch = apply::Scratch::new("update")?;
    let (base, theirs) = (scratch.path().join("old"), scratch.path().join("new"));
    ui::note(&format!(
        "scaffolding the project as rsbuilder {} made it ({})",
        project.cli_version,
        old.display()
    ));
    let help = format!(
        "check that {} is rsbuilder {}, the version PROJECT records",
        old.display(),
        project.cli_version
    );
    // The old scaffold in the default form, which every rsbuilder writes: the project and the
    // new scaffold agree on the form they take the runtime in, so the merge carries it.
    let base_commands: Vec<Vec<String>> = commands
        .iter()
        .map(|command| {
            command
                .iter()
                .filter(|arg| !arg.starts_with("--runtime="))
                .cloned()
                .collect()
        })
        .collect();
    apply::fill_new_dir(&base, |dir| {
        alpha::run_all_or(root, &old, &base_commands, dir, &help)
    })?;
    ui::note(&format!(
        "scaffolding the project as rsbuilder {} makes it",
        versions::RSBUILDER
    ));
    let current = std::env::current_exe().context("failed to find the rsbuilder binary")?;
    apply::fill_new_dir(&theirs, |dir| {
        alpha::run_all(root, &current, &commands, dir)
    })?;

    let base_label = format!("rsbuilder {} scaffold", project.cli_version);
    let theirs_label = format!("rsbuilder {} scaffold", versions::RSBUILDER);
    let labels = ["your project", base_label.as_str(), theirs_label.as_str()];
    let merged = merge_trees(root, &base, &theirs, labels)?;
    report(&merged, &options, &project)?;
    if options.dry_run || merged.is_empty() {
        return Ok(());
    }
    write(root, &merged, &options, &project)
}

/// Refuses a `binary` that is not rsbuilder `version`: its scaffold would be merged as that
/// version's, and the update would find nothing to do or the wrong changes.
fn check_version(binary: &Path, version: &str) -> anyhow::Result<()> {
    // Away from the project: whatever the binary is, it is not run where it could write.
    let said = Command::new(binary)
        .arg("--version")
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    if said.as_deref() == Some(format!("rsbuilder {version}").as_str()) {
        return Ok(());
    }
    let what = match &said {
        Some(said) => format!("`--version` says `{}`", ui::shown(said)),
        None => "`--version` does not answer as rsbuilder does".to_owned(),
    };
    Err(UserError::new(format!(
        "--from-binary {}: {what}, not rsbuilder {version}, the version PROJECT records (cliVersion)",
        binary.display()
    ))
    .help(format!(
        "pass the path of rsbuilder {version}, or leave --from-binary out to install it"
    ))
    .into())
}

/// The merge of every file either scaffold has, by path; files only the project has are not
/// the scaffold's and stay out of it.
fn merge_trees(
    root: &Path,
    base: &Path,
    theirs: &Path,
    labels: [&str; 3],
) -> anyhow::Result<Vec<(PathBuf, Merged)>> {
    let mut paths = BTreeSet::new();
    for dir in [base, theirs] {
        paths.extend(OnDisk(dir).files_below(Path::new(""), &|_| false)?);
    }
    let read = |dir: &Path, path: &Path| apply::read_existing(dir, path);
    let mut merged = Vec::new();
    for path in paths {
        let (b, o, t) = (read(base, &path)?, read(root, &path)?, read(theirs, &path)?);
        let sides = Sides {
            base: b.as_deref(),
            ours: o.as_deref(),
            theirs: t.as_deref(),
        };
        let outcome = merge(&sides, labels)?;
        if outcome != Merged::Kept {
            merged.push((path, outcome));
        }
    }
    Ok(merged)
}

/// Lists the changes; refuses, showing every conflict, when there are conflicts and no
/// `--force`.
fn report(
    merged: &[(PathBuf, Merged)],
    options: &crate::cli::AlphaUpdateArgs,
    project: &Project,
) -> anyhow::Result<()> {
    let verb = |m: &Merged| match m {
        Merged::Kept => "keep",
        Merged::Write(_) => "update",
        Merged::Remove => "remove",
        Merged::Conflict { .. } => "conflict",
    };
    for (path, outcome) in merged {
        ui::note(&format!("{} {}", verb(outcome), path.display()));
    }
    let conflicts: Vec<_> = merged
        .iter()
        .filter_map(|(path, m)| match m {
            Merged::Conflict { text, why } => Some((path, text, why)),
            _ => None,
        })
        .collect();
    if conflicts.is_empty() || options.force {
        if merged.is_empty() {
            ui::note(&format!(
                "the project is what rsbuilder {} scaffolds, with your changes",
                versions::RSBUILDER
            ));
        }
        return Ok(());
    }
    let mut shown = String::new();
    for (path, text, why) in &conflicts {
        shown.push_str(&format!("\n{}: {why}\n", path.display()));
        if let Some(text) = text {
            shown.push_str(&conflict_regions(text));
        }
    }
    Err(UserError::new(format!(
        "the update from rsbuilder {} to {} conflicts with your changes in {} file{}, and wrote nothing:{shown}",
        project.cli_version,
        versions::RSBUILDER,
        conflicts.len(),
        if conflicts.len() == 1 { "" } else { "s" }
    ))
    .help("change those places back to the old scaffold's text, or run `rsbuilder alpha update --force` to write the merge with conflict markers and resolve them by hand")
    .into())
}

/// The lines of `text` from each `<<<<<<<` to its `>>>>>>>`.
fn conflict_regions(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        inside |= line.starts_with("<<<<<<< ");
        if inside {
            out.push_str(line);
            out.push('\n');
        }
        inside &= !line.starts_with(">>>>>>> ");
    }
    out
}

/// Writes the merge: on a branch of its own, committed, unless `--force` asks for the work
/// tree. The merge and the manifests `generate` makes of the merged code are one journaled
/// write (`apply::apply_then`): a `generate` that fails leaves nothing written, and a write
/// interrupted half way is undone by the next command's lock.
fn write(
    root: &Path,
    merged: &[(PathBuf, Merged)],
    options: &crate::cli::AlphaUpdateArgs,
    project: &Project,
) -> anyhow::Result<()> {
    let branch = format!(
        "rsbuilder-update-from-{}-to-{}",
        project.cli_version,
        versions::RSBUILDER
    );
    let (plan, conflicted) = plan_merge(merged);
    back_from_interrupted_update(root, &branch)?;
    if options.force {
        if conflicted {
            apply::apply(
                root,
                plan,
                Options {
                    force: true,
                    dry_run: false,
                },
            )?;
            ui::warn(
                "the merge has conflicts: the files listed as `conflict` hold conflict markers, or are as you left them",
                Some("resolve them, then run `rsbuilder generate`, `cargo test`, and commit"),
            );
            return Ok(());
        }
        return write_with_manifests(root, plan);
    }
    // Everything that can be checked is, before the switch: the branch is new, and git can
    // commit.
    if git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok()
    {
        return Err(UserError::new(format!(
            "the branch `{branch}` exists: an earlier `alpha update` made it"
        ))
        .help(format!(
            "merge it, or delete it with `git branch -D {branch}`, then run `rsbuilder alpha update` again"
        ))
        .into());
    }
    if git(root, &["var", "GIT_COMMITTER_IDENT"]).is_err() {
        return Err(UserError::new(
            "git has no identity to commit the update with (user.name and user.email)",
        )
        .help("set them with `git config user.name ...` and `git config user.email ...`, then run `rsbuilder alpha update` again")
        .into());
    }
    let start = git(root, &["rev-parse", "--abbrev-ref", "HEAD"])?
        .trim()
        .to_owned();
    git(root, &["switch", "--quiet", "-c", &branch])?;
    commit_update(root, plan, project, &branch).map_err(|error| {
        let fix = ui::help(&error).unwrap_or_else(|| "fix the cause above".to_owned());
        let help = format!(
            "{fix}; then finish the update on `{branch}` and commit it, or go back with \
             `git add --all && git stash && git switch {start} && git branch -D {branch}` \
             (what the update wrote stays in the stash)"
        );
        UserError::new(format!(
            "the update stopped on the branch `{branch}`, which you are on now: {error:#}"
        ))
        .help(help)
        .into()
    })
}

/// An update killed after it switched to its branch and before its commit leaves the user on
/// that branch, with the files put back by the lock: the branch is then at the commit it was
/// made from (git's `@{-1}`), with none of its own. Back to where it started (a branch, or a
/// detached commit), and the branch made is deleted, so that this update starts where the last
/// one did.
fn back_from_interrupted_update(root: &Path, branch: &str) -> anyhow::Result<()> {
    let current = git(root, &["branch", "--show-current"])?;
    if current.trim() != branch {
        return Ok(());
    }
    let (Ok(head), Ok(previous)) = (
        git(root, &["rev-parse", "HEAD"]),
        git(root, &["rev-parse", "--verify", "--quiet", "@{-1}"]),
    ) else {
        return Ok(());
    };
    if head != previous {
        return Ok(());
    }
    let name = git(root, &["rev-parse", "--symbolic-full-name", "@{-1}"])?;
    let back = match name.trim().strip_prefix("refs/heads/") {
        Some(start) => {
            git(root, &["switch", "--quiet", start])?;
            format!("`{start}`")
        }
        None => {
            git(root, &["switch", "--quiet", "--detach", previous.trim()])?;
            format!("commit {}", previous.trim())
        }
    };
    git(root, &["branch", "--quiet", "-D", branch])?;
    ui::note(&format!(
        "an earlier `alpha update` stopped on the branch `{branch}` before its commit: back on {back}, and the branch is deleted"
    ));
    Ok(())
}

/// The files of the merge; whether it has conflicts.
fn plan_merge(merged: &[(PathBuf, Merged)]) -> (Plan, bool) {
    let mut plan = Plan::default();
    let mut conflicted = false;
    for (path, outcome) in merged {
        match outcome {
            Merged::Kept => {}
            Merged::Remove => plan.removals.push(path.clone()),
            Merged::Write(text)
            | Merged::Conflict {
                text: Some(text), ..
            } => {
                conflicted |= matches!(outcome, Merged::Conflict { .. });
                plan.files.push(PlannedFile {
                    path: path.clone(),
                    contents: text.clone(),
                    policy: Policy::Regenerated,
                });
            }
            Merged::Conflict { text: None, .. } => conflicted = true,
        }
    }
    (plan, conflicted)
}

/// Writes the merge, then the manifests `generate` makes of the merged project in place, as
/// one write.
fn write_with_manifests(root: &Path, plan: Plan) -> anyhow::Result<()> {
    let mut orphans = Vec::new();
    // cargo may resolve Cargo.lock again for the merged manifests.
    apply::apply_then(root, plan, &[Path::new("Cargo.lock")], |root| {
        let manifests = super::generate::manifests(root)
            .context("`rsbuilder generate` fails on the merged project; nothing was written")?;
        orphans = manifests.orphans;
        Ok(Plan {
            files: manifests.files,
            ..Plan::default()
        })
    })?;
    super::generate::warn_orphans(&orphans);
    Ok(())
}

/// Writes the update on the current branch, then commits it.
fn commit_update(root: &Path, plan: Plan, project: &Project, branch: &str) -> anyhow::Result<()> {
    write_with_manifests(root, plan)?;
    git(root, &["add", "--all"])?;
    let message = format!(
        "Update the scaffold from rsbuilder {} to {}",
        project.cli_version,
        versions::RSBUILDER
    );
    git(root, &["commit", "--quiet", "--no-verify", "-m", &message])?;
    ui::note(&format!(
        "\nThe update is committed on the branch `{branch}`: review it with `git show`, then merge it."
    ));
    Ok(())
}

/// Refuses a project that is not the top of a git work tree, or that has changes not
/// committed: the merge must never be mixed with work in progress.
fn refuse_unless_clean(root: &Path) -> anyhow::Result<()> {
    let top = git(root, &["rev-parse", "--show-toplevel"]).map_err(|_| {
        UserError::new(format!("{} is not in a git repository", root.display()))
            .help("run `git init && git add -A && git commit -m scaffold` first: the update merges on a branch")
    })?;
    let same = crate::tree::same_folder(Path::new(top.trim()), root);
    if !same {
        return Err(UserError::new(format!(
            "the project {} is not the top of its git repository ({})",
            root.display(),
            top.trim()
        ))
        .help("run alpha update in a repository whose top is the project")
        .into());
    }
    let status = git(root, &["status", "--porcelain"])?;
    if !status.is_empty() {
        return Err(UserError::new(format!(
            "the project has changes that are not committed:\n{}",
            status.trim_end()
        ))
        .help("commit or stash them first: the update must be told apart from your work")
        .into());
    }
    Ok(())
}

/// The rsbuilder `version` installed into `bin/rsbuilder-<version>`, as the Makefile's
/// `make rsbuilder` does: `cargo install --locked` of `RSBUILDER_INSTALL` (crates.io's
/// `rsbuilder --version <version>` unless set; a git URL or `--path` work too).
fn install(root: &Path, version: &str) -> anyhow::Result<PathBuf> {
    let prefix = root.join(format!("bin/rsbuilder-{version}"));
    let binary = prefix.join("bin/rsbuilder");
    if binary.is_file() {
        return Ok(binary);
    }
    let from = std::env::var("RSBUILDER_INSTALL")
        .unwrap_or_else(|_| format!("rsbuilder --version {version}"));
    ui::note(&format!(
        "installing rsbuilder {version}: cargo install --locked --root {} {from}",
        prefix.display()
    ));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["install", "--locked", "--root"])
        .arg(&prefix)
        .args(from.split_whitespace())
        .stdin(Stdio::null())
        .status()
        .context("failed to run cargo install")?;
    if !status.success() || !binary.is_file() {
        return Err(UserError::new(format!(
            "rsbuilder {version}, which made the project, could not be installed from `{from}`"
        ))
        .help("point RSBUILDER_INSTALL at it (`--git <url> --rev <commit> rsbuilder`, `--path <checkout>`), or pass --from-binary <path>")
        .into());
    }
    Ok(binary)
}

/// Runs `git args` in `root`; its stdout, or an error with its stderr.
fn git(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .context("failed to run git: alpha update needs it")?;
    if !output.status.success() {
        anyhow::bail!(
            "`git {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABELS: [&str; 3] = ["yours", "old", "new"];

    fn merged(base: Option<&str>, ours: Option<&str>, theirs: Option<&str>) -> Merged {
        merge(&Sides { base, ours, theirs }, LABELS).unwrap()
    }

    #[test]
    fn a_file_changed_on_one_side_takes_that_side() {
        let old = "a\nb\nc\n";
        assert_eq!(merged(Some(old), Some(old), Some(old)), Merged::Kept);
        assert_eq!(merged(Some(old), Some("mine\n"), Some(old)), Merged::Kept);
        assert_eq!(
            merged(Some(old), Some(old), Some("new\n")),
            Merged::Write("new\n".into())
        );
        assert_eq!(
            merged(None, None, Some("new\n")),
            Merged::Write("new\n".into())
        );
        assert_eq!(merged(Some(old), Some(old), None), Merged::Remove);
        assert_eq!(merged(Some(old), None, Some(old)), Merged::Kept);
        assert_eq!(
            merged(Some(old), Some("same\n"), Some("same\n")),
            Merged::Kept
        );
    }

    #[test]
    fn changes_on_both_sides_merge_or_conflict_and_a_removal_against_a_change_conflicts() {
        let base = "one\ntwo\nthree\nfour\nfive\n";
        let ours = "one\nTWO\nthree\nfour\nfive\n";
        let theirs = "one\ntwo\nthree\nfour\nFIVE\n";
        assert_eq!(
            merged(Some(base), Some(ours), Some(theirs)),
            Merged::Write("one\nTWO\nthree\nfour\nFIVE\n".into())
        );
        // Merged once already: nothing more to write.
        let done = "one\nTWO\nthree\nfour\nFIVE\n";
        assert_eq!(merged(Some(base), Some(done), Some(theirs)), Merged::Kept);
        let Merged::Conflict {
            text: Some(text),
            why,
        } = merged(Some(base), Some(ours), Some("one\n2\nthree\nfour\nfive\n"))
        else {
            panic!("a conflict")
        };
        assert_eq!(why, "1 place changed on both sides");
        assert_eq!(
            text,
            "one\n<<<<<<< yours\nTWO\n||||||| old\ntwo\n=======\n2\n>>>>>>> new\nthree\nfour\nfive\n"
                .replace("||||||| old\ntwo\n", "")
        );
        assert_eq!(
            conflict_regions(&text),
            "<<<<<<< yours\nTWO\n=======\n2\n>>>>>>> new\n"
        );
        assert_eq!(
            merged(Some(base), None, Some(theirs)),
            Merged::Conflict {
                text: None,
                why: "you removed the file, and the new scaffold changed it".into()
            }
        );
        assert_eq!(
            merged(Some(base), Some(ours), None),
            Merged::Conflict {
                text: None,
                why: "you changed the file, and the new scaffold no longer has it".into()
            }
        );
    }
}
