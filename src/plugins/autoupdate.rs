//! kubebuilder's autoupdate plugin (`edit --plugins=autoupdate/v1-alpha`): a workflow,
//! `.github/workflows/auto_update.yml`, that runs `rsbuilder alpha update` on a schedule and
//! opens a pull request. Its file is the `autoupdate` template set.

use std::path::Path;

use crate::cli::EditArgs;
use crate::project::{self, Project};
use crate::scaffold::{Plan, PlannedFile, Policy};

use super::{AddedBy, EditPlugin, Plugin, edit_words};

/// The plugin's keys and options.
pub const PLUGIN: Plugin = Plugin {
    key: "autoupdate/v1-alpha",
    recorded: project::AUTOUPDATE,
    added_by: AddedBy::Edit,
    options: &["--reset-workflows"],
};

/// The plugin, as `edit` runs it.
pub struct Autoupdate;

impl EditPlugin for Autoupdate {
    fn plugin(&self) -> &'static Plugin {
        &PLUGIN
    }

    fn record(&self, _args: &EditArgs, project: &mut Project) -> anyhow::Result<()> {
        project.autoupdate = true;
        Ok(())
    }

    fn plan(
        &self,
        _root: &Path,
        _project: &Project,
        args: &EditArgs,
        plan: &mut Plan,
    ) -> anyhow::Result<()> {
        plan.files.extend(workflow(args.reset_workflows)?);
        Ok(())
    }

    fn replay(&self, project: &Project) -> Option<Vec<String>> {
        project.autoupdate.then(|| edit_words(PLUGIN.key, &[]))
    }
}

/// The workflow. One that exists is the user's and is kept, unless `reset`
/// (`--reset-workflows`).
fn workflow(reset: bool) -> anyhow::Result<Vec<PlannedFile>> {
    let policy = if reset {
        Policy::Owned
    } else {
        Policy::KeepExisting
    };
    crate::scaffold::render_set("autoupdate", &tera::Context::new(), &[], |_| policy)
}
