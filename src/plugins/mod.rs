//! kubebuilder's plugins: the layouts rsbuilder always scaffolds, and the optional ones, one
//! module each behind [`Plugin`] (and [`EditPlugin`] for those `edit` adds). `init --plugins`,
//! `create api --plugins`, `edit --plugins`, PROJECT's `plugins:` and `alpha generate` all go
//! through [`PLUGINS`] and [`EDIT`]: adding a plugin is adding its module, its templates and
//! its line here.
//!
//! The keys are taken as scripts written for kubebuilder pass them: the keys of what rsbuilder
//! does are accepted, the others refused by name, never ignored.

use crate::cli::EditArgs;
use crate::project::Project;
use crate::scaffold::Plan;
use crate::tree::Tree;
use crate::ui::UserError;

pub mod autoupdate;
pub mod deploy_image;
pub mod grafana;
pub mod helm;

/// The Go and kustomize layouts: what rsbuilder always scaffolds, in Rust.
const LAYOUT: &[&str] = &[
    "go/v4",
    "go.kubebuilder.io/v4",
    "kustomize/v2",
    "kustomize.common.kubebuilder.io/v2",
];

/// The command that adds a plugin to a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddedBy {
    /// `create api --plugins=<key> --image ...`.
    CreateApi,
    /// `edit --plugins=<key>`.
    Edit,
}

/// One of kubebuilder's optional plugins, as rsbuilder runs it.
#[derive(Debug)]
pub struct Plugin {
    /// The key `--plugins` takes, as kubebuilder's documentation writes it: `helm/v2-alpha`.
    pub key: &'static str,
    /// The key PROJECT records it under: `helm.kubebuilder.io/v2-alpha` (also taken by
    /// `--plugins`).
    pub recorded: &'static str,
    /// The command that adds it.
    pub added_by: AddedBy,
    /// The options of that command that only this plugin reads (`--reset-values`).
    pub options: &'static [&'static str],
}

impl Plugin {
    /// Whether `plugins` (already checked) asks for this plugin.
    pub fn asked(&self, plugins: &[String]) -> bool {
        plugins.iter().any(|p| self.is(p.trim()))
    }

    fn is(&self, key: &str) -> bool {
        key == self.key || key == self.recorded
    }
}

/// A plugin `edit` adds: what it records in PROJECT, the files it plans, and the command that
/// adds it again.
pub trait EditPlugin: Sync {
    /// Its keys and options.
    fn plugin(&self) -> &'static Plugin;
    /// Records in PROJECT what `args` asks of it (checking the options it reads).
    fn record(&self, args: &EditArgs, project: &mut Project) -> anyhow::Result<()>;
    /// Adds its files to `plan`, which holds what `edit` writes already; the project of `edit`
    /// holds the record [`EditPlugin::record`] made.
    fn plan(&self, edit: &Edit<'_>, plan: &mut Plan) -> anyhow::Result<()>;
    /// The arguments of the `edit` that adds it again as PROJECT records it (for
    /// `alpha generate`), or `None` when PROJECT does not record it.
    fn replay(&self, project: &Project) -> Option<Vec<String>>;
}

/// What a plugin plans from: the project (its files, and PROJECT as `edit` leaves it) and
/// `edit`'s flags.
pub struct Edit<'a> {
    /// The project's files.
    pub tree: &'a dyn Tree,
    /// PROJECT, with the plugins' records.
    pub project: &'a Project,
    /// The flags of `edit`.
    pub args: &'a EditArgs,
}

/// A plugin `edit` adds that PROJECT records by its key alone, and whose files come from the
/// project's tree and `edit`'s flags: the autoupdate and Grafana plugins.
pub struct Recorded {
    /// Its keys and options.
    pub plugin: &'static Plugin,
    /// Whether PROJECT records it.
    pub recorded: fn(&Project) -> bool,
    /// Records it in PROJECT.
    pub record: fn(&mut Project),
    /// Its files.
    pub files: fn(&dyn Tree, &EditArgs) -> anyhow::Result<Vec<crate::scaffold::PlannedFile>>,
}

impl EditPlugin for Recorded {
    fn plugin(&self) -> &'static Plugin {
        self.plugin
    }

    fn record(&self, _args: &EditArgs, project: &mut Project) -> anyhow::Result<()> {
        (self.record)(project);
        Ok(())
    }

    fn plan(&self, edit: &Edit<'_>, plan: &mut Plan) -> anyhow::Result<()> {
        plan.files.extend((self.files)(edit.tree, edit.args)?);
        Ok(())
    }

    fn replay(&self, project: &Project) -> Option<Vec<String>> {
        (self.recorded)(project).then(|| edit_words(self.plugin.key, &[]))
    }
}

/// Every optional plugin, in the order `alpha generate` adds them again.
pub const PLUGINS: &[&Plugin] = &[
    &deploy_image::PLUGIN,
    &grafana::PLUGIN,
    &autoupdate::PLUGIN,
    &helm::PLUGIN,
];

/// The plugins `edit` adds, in the order it plans them: the Helm plugin last, as its Makefile
/// targets and workflow build on the files planned before it.
pub const EDIT: &[&dyn EditPlugin] = &[&grafana::GRAFANA, &autoupdate::AUTOUPDATE, &helm::Helm];

/// The plugins of [`EDIT`] that `plugins` (already checked) asks for.
pub fn asked_of_edit(plugins: &[String]) -> impl Iterator<Item = &'static dyn EditPlugin> + '_ {
    EDIT.iter()
        .copied()
        .filter(move |plugin| plugin.plugin().asked(plugins))
}

/// Refuses an option of `edit` given while no plugin that reads it runs: `given` holds each
/// option with whether it was given.
pub fn refuse_idle_options(plugins: &[String], given: &[(&str, bool)]) -> Result<(), UserError> {
    for (option, _) in given.iter().filter(|(_, given)| *given) {
        let readers: Vec<&Plugin> = PLUGINS
            .iter()
            .copied()
            .filter(|p| p.options.contains(option))
            .collect();
        if readers.is_empty() || readers.iter().any(|p| p.asked(plugins)) {
            continue;
        }
        let keys: Vec<String> = readers
            .iter()
            .map(|p| format!("--plugins={}", p.key))
            .collect();
        return Err(UserError::new(format!(
            "{option} is an option of the {} plugin{}, which this command does not run",
            and_or(
                &readers.iter().map(|p| p.key.to_owned()).collect::<Vec<_>>(),
                "and"
            ),
            if readers.len() > 1 { "s" } else { "" }
        ))
        .help(format!("add {}, or drop the option", and_or(&keys, "or"))));
    }
    Ok(())
}

/// `items` joined for a sentence: `a`, `a and b`, `a, b and c`.
fn and_or(items: &[String], word: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} {word} {last}", rest.join(", ")),
    }
}

/// Checks the `--plugins` of `command`; `deploy_image` says whether the command takes
/// kubebuilder's deploy-image plugin. Returns whether that plugin is among them.
pub fn check(command: &str, plugins: &[String], deploy_image: bool) -> Result<bool, UserError> {
    let mut has_deploy_image = false;
    for plugin in plugins {
        let key = plugin.trim();
        if LAYOUT.contains(&key) {
            continue;
        }
        let known = PLUGINS.iter().find(|p| p.is(key));
        match known.map(|p| p.added_by) {
            Some(AddedBy::CreateApi) if deploy_image => {
                has_deploy_image = true;
                continue;
            }
            Some(AddedBy::Edit) if command == "edit" => continue,
            Some(AddedBy::Edit) => {
                return Err(UserError::new(format!(
                    "plugin `{key}` is added to a project by `rsbuilder edit`, not by {command}"
                ))
                .help(format!(
                    "drop it here, then run `rsbuilder edit --plugins={key}`"
                )));
            }
            _ => {}
        }
        let error = UserError::new(format!("unknown plugin `{key}` for {command}"));
        let mut names = vec!["go/v4".to_owned(), "kustomize/v2".to_owned()];
        if deploy_image {
            names.push(format!("{} (with --image)", deploy_image::PLUGIN.key));
        } else if command == "edit" {
            names.extend(EDIT.iter().map(|p| p.plugin().key.to_owned()));
            names[2..].sort();
        }
        return Err(error.help(format!(
            "drop it from --plugins; rsbuilder knows {}",
            and_or(&names, "and")
        )));
    }
    Ok(has_deploy_image)
}

/// `edit --plugins=<key>` and the rest of `args`, as words.
pub(crate) fn edit_words(key: &str, args: &[&str]) -> Vec<String> {
    ["edit".to_owned(), format!("--plugins={key}")]
        .into_iter()
        .chain(args.iter().map(|a| (*a).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugins(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| (*p).to_owned()).collect()
    }

    #[test]
    fn kubebuilder_keys_are_accepted_or_refused_by_name() {
        assert!(!check("init", &plugins(&["go/v4"]), false).unwrap());
        assert!(
            check(
                "create api",
                &plugins(&["go.kubebuilder.io/v4", "deploy-image/v1-alpha"]),
                true
            )
            .unwrap()
        );
        let error = check("edit", &plugins(&["helm/v1-alpha"]), false).unwrap_err();
        assert_eq!(error.to_string(), "unknown plugin `helm/v1-alpha` for edit");
        assert_eq!(
            error.help_text(),
            Some(
                "drop it from --plugins; rsbuilder knows go/v4, kustomize/v2, autoupdate/v1-alpha, grafana/v1-alpha and helm/v2-alpha"
            )
        );
        assert!(!check("edit", &plugins(&["helm.kubebuilder.io/v2-alpha"]), false).unwrap());
        assert!(helm::PLUGIN.asked(&plugins(&["helm/v2-alpha"])));
        assert!(!helm::PLUGIN.asked(&plugins(&["grafana/v1-alpha"])));
        let error = check("init", &plugins(&["deploy-image/v1-alpha"]), false).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown plugin `deploy-image/v1-alpha` for init"
        );
        let error = check(
            "init",
            &plugins(&["grafana.kubebuilder.io/v1-alpha"]),
            false,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "plugin `grafana.kubebuilder.io/v1-alpha` is added to a project by `rsbuilder edit`, not by init"
        );
        assert!(!check("edit", &plugins(&["grafana/v1-alpha"]), false).unwrap());
        assert!(grafana::PLUGIN.asked(&plugins(&["grafana.kubebuilder.io/v1-alpha"])));
    }
}
