//! `rsbuilder create webhook`: defaulting, validation and conversion webhooks for a kind, as
//! one module of the operator per kind and version, and, with the project's first webhook,
//! the config/ that serves them: the webhook Service, cert-manager's Issuer and Certificate,
//! the manager patch and the CA injection.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

use crate::cli::CreateWebhookArgs;
use crate::names::builtin::Builtin;
use crate::names::{self, ResourceNames};
use crate::project::{self, Project, Resource, ResourceWebhooks};
use crate::rbac;
use crate::scaffold::{self, Plan, Policy};
use crate::tree::OnDisk;
use crate::ui::{self, UserError};
use crate::webhook;

mod plan;
mod resolve;

use plan::*;
use resolve::*;

/// The kinds of webhook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Kinds {
    defaulting: bool,
    validation: bool,
    conversion: bool,
}

impl Kinds {
    fn any(self) -> bool {
        self.defaulting || self.validation || self.conversion
    }

    fn union(self, other: Self) -> Self {
        Self {
            defaulting: self.defaulting || other.defaulting,
            validation: self.validation || other.validation,
            conversion: self.conversion || other.conversion,
        }
    }

    /// The template sets of these kinds, in the order their insertions go in.
    fn sets(self) -> Vec<&'static str> {
        [
            (self.defaulting, "webhook-defaulting"),
            (self.validation, "webhook-validation"),
            (self.conversion, "webhook-conversion"),
        ]
        .into_iter()
        .filter_map(|(on, set)| on.then_some(set))
        .collect()
    }
}

/// What to scaffold, once flags and PROJECT agree.
struct Request {
    names: ResourceNames,
    namespaced: bool,
    /// What this command adds.
    add: Kinds,
    /// What the kind's module holds afterwards.
    all: Kinds,
    /// The versions converted to and from this one, once the command is done.
    spokes: Vec<String>,
    /// The spokes whose code this command writes: every spoke when it writes the conversion,
    /// the new ones when it extends a conversion the kind has.
    new_spokes: Vec<String>,
    defaulting_path: String,
    validation_path: String,
    /// The paths PROJECT records: those that differ from the computed ones.
    custom_defaulting_path: Option<String>,
    custom_validation_path: Option<String>,
    /// What the kind's webhook module holds before the command (PROJECT records it): it
    /// exists when it holds any webhook.
    had: Kinds,
    /// Whether no resource of the project has a webhook yet.
    first_in_project: bool,
    /// The kind of Kubernetes itself the webhooks admit, when they admit one.
    builtin: Option<&'static crate::names::builtin::Builtin>,
    force: bool,
}

/// Runs `create webhook` in the project around the current directory.
pub fn run(args: CreateWebhookArgs) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    let mut project = project::load(root)?;
    let mut request = resolve(&args, &project)?;
    keep_earlier_builtin_module(root, &mut request);
    let sources = rbac::read_sources(&OnDisk(root), &project)?;
    let plan = plan(&project, &request, &sources)?;
    let plan = with_project(plan, &mut project, &request);
    if !super::apply_plan(root, plan, args.force, args.dry_run)? {
        return Ok(());
    }
    if request.builtin.is_some() {
        ui::warn(
            "a webhook on one of Kubernetes' own kinds also admits the operator's own objects of that kind; \
             while no replica serves it, `failurePolicy: Fail` can keep the manager itself from starting",
            Some(&format!(
                "narrow it in its `+rsbuilder:webhook` markers in {}, with a label selector such as \
                 `namespaceSelector=kubernetes.io/metadata.name!={}-system` or `objectSelector=...`, then `make manifests`",
                module_path(&request.names).display(),
                project.project_name
            )),
        );
    }
    if args.make {
        super::generate::generate(root, false).context(
            "the webhooks were scaffolded, but `--make` could not regenerate the manifests",
        )?;
    }
    ui::note(&format!(
        "\nNext:\n  implement the webhooks in {}, then `make manifests`\n  cargo test\n  \
         `make deploy` needs cert-manager in the cluster; `make run` serves no webhooks (ENABLE_WEBHOOKS=false)",
        module_path(&request.names).display()
    ));
    super::note_older_runtime(&project);
    Ok(())
}

/// A webhook of one of Kubernetes' own kinds that an earlier rsbuilder scaffolded lives in
/// `webhooks/<group>/` (`webhooks/apps/v1/deployment.rs`), before its module moved to
/// `webhooks/k8s_<group>/`: the webhook added to it goes where its others are.
fn keep_earlier_builtin_module(root: &Path, request: &mut Request) {
    let Some(kind) = request.builtin else {
        return;
    };
    let earlier = names::builtin_names_unprefixed(kind);
    if !root.join(module_path(&request.names)).exists()
        && root.join(module_path(&earlier)).is_file()
    {
        request.names.group_dir = earlier.group_dir;
        request.names.group_module = earlier.group_module;
    }
}

/// `operator/src/webhooks/<group>/<version>/<kind>.rs`.
fn module_path(names: &ResourceNames) -> PathBuf {
    PathBuf::from("operator/src/webhooks")
        .join(&names.group_dir)
        .join(&names.version)
        .join(format!("{}.rs", names.kind_file))
}
