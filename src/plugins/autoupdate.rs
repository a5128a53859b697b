//! kubebuilder's autoupdate plugin (`edit --plugins=autoupdate/v1-alpha`): a workflow,
//! `.github/workflows/auto_update.yml`, that runs `rsbuilder alpha update` on a schedule and
//! opens a pull request. Its file is the `autoupdate` template set.

use crate::project;
use crate::scaffold::{PlannedFile, Policy};

use super::{AddedBy, Plugin, Recorded};

/// The plugin's keys and options.
pub const PLUGIN: Plugin = Plugin {
    key: "autoupdate/v1-alpha",
    recorded: project::AUTOUPDATE,
    added_by: AddedBy::Edit,
    options: &["--reset-workflows"],
};

/// The plugin, as `edit` runs it: PROJECT records its key, and it writes the workflow.
pub const AUTOUPDATE: Recorded = Recorded {
    plugin: &PLUGIN,
    recorded: |project| project.autoupdate,
    record: |project| project.autoupdate = true,
    files: |_, args| workflow(args.reset_workflows),
};

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
