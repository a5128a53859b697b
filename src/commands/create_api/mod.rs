//! `rsbuilder create api`: a kind's Rust types, CRD, sample and RBAC roles, and a controller
//! for it, wired into the files `init` made.
//!
//! The command reads as its steps: [`resolve`] (flags, prompts and PROJECT agree on a
//! [`Request`]; `--image` in `image`, Kubernetes' own kinds in `builtin`), [`plan`] (the files
//! rendered in memory, PROJECT's record in `record`), then `apply` writes.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use crate::cli::CreateApiArgs;
use crate::names::builtin::Builtin;
use crate::names::{self, ResourceNames};
use crate::project::{self, DeployImage, NamedController, Project, Resource, ResourceApi};
use crate::rbac;
use crate::scaffold::{self, Plan, PlannedFile, Policy};
use crate::tree::{OnDisk, Tree};
use crate::ui::{self, UserError};

mod builtin;
mod plan;
#[cfg(test)]
mod properties;
mod record;
mod resolve;

use crate::plugins::deploy_image::{self, ImageOptions};
pub(crate) use builtin::builtin_group;
use builtin::*;
use plan::*;
use record::*;
use resolve::*;

/// One version of a kind, as the CRD template lists it.
#[derive(Debug, Serialize)]
struct CrdVersion {
    name: String,
    storage: bool,
}

/// What the templates of `create api` receive.
#[derive(Debug, Serialize)]
struct Context {
    #[serde(flatten)]
    names: ResourceNames,
    #[serde(flatten)]
    project: names::ProjectNames,
    namespaced: bool,
    /// Whether the project is namespaced: its helper roles are Roles, not ClusterRoles.
    project_namespaced: bool,
    /// `--ssa`: every field of the spec is an `Option` left out when unset.
    ssa: bool,
    storage: bool,
    versions: Vec<CrdVersion>,
    crd_file: String,
    sample_file: String,
    kind_yaml: String,
    plural_yaml: String,
    singular_yaml: String,
    short_name_yaml: Option<String>,
    /// `--image`, for a kind that runs it.
    image: Option<String>,
    image_yaml: Option<String>,
    /// Descriptions of the CRD of a kind that runs an image, as crdgen quotes them.
    spec_description_yaml: Option<String>,
    image_description_yaml: Option<String>,
    ports_description_yaml: Option<String>,
    container_port: Option<u16>,
    /// `--image` and the arguments of `--image-container-command`, as Rust string literals.
    image_rust: Option<String>,
    container_command_rust: Vec<String>,
    run_as_user: Option<i64>,
    /// For a controller of one of Kubernetes' own kinds: its module under
    /// `k8s_openapi::api` and its group as RBAC markers write it.
    builtin_module: Option<String>,
    builtin_group: Option<String>,
}

/// What kind of API `create api` scaffolds.
#[derive(Debug, Clone)]
enum Mode {
    /// Types, and a controller stub to fill in.
    Standard,
    /// Types that describe a Deployment of an image, and the controller that runs it.
    Image(ImageOptions),
    /// A controller for a kind of Kubernetes itself, which has no types to scaffold.
    Builtin(&'static Builtin),
}

/// What to scaffold, once flags, prompts and PROJECT agree.
struct Request {
    names: ResourceNames,
    resource: bool,
    controller: bool,
    namespaced: bool,
    /// Every version of the kind with types, in the order they were created, this one included;
    /// the first is the storage version.
    versions: Vec<String>,
    /// Whether this version is new to a kind that has others.
    joins_kind: bool,
    mode: Mode,
    /// `--controller-name`, recorded in PROJECT.
    controller_name: Option<String>,
    /// `--ssa`: the spec's fields are all optional.
    ssa: bool,
}

impl Request {
    /// Whether this version is the kind's storage version (its first one).
    fn storage(&self) -> bool {
        self.versions.first() == Some(&self.names.version)
    }
}

/// Runs `create api` in the project around the current directory.
pub fn run(args: CreateApiArgs) -> anyhow::Result<()> {
    let open = super::open()?;
    let root = open.root.as_path();
    let mut project = project::load(root)?;
    let request = resolve(&args, &project)?;
    let crd = crd_to_join(&OnDisk(root), &request)?;
    let plan = plan(&project, &request, crd.as_deref())?;
    let plan = with_project(plan, &mut project, &request);
    if !super::apply_plan(root, plan, args.force, args.dry_run)? {
        return Ok(());
    }
    if args.make {
        super::generate::generate(root, false)
            .context("the API was scaffolded, but `--make` could not regenerate the manifests")?;
    }
    let names = &request.names;
    let mut next = String::from("\nNext:\n");
    if request.resource {
        next.push_str(&format!(
            "  edit api/src/{}/{}/{}.rs, then `make manifests`\n",
            names.group_dir, names.version, names.kind_file
        ));
    }
    if request.controller {
        next.push_str(&format!(
            "  implement reconcile in operator/src/controllers/{}/{}.rs\n",
            names.group_dir, names.controller_file
        ));
    }
    // A new version of a kind that converts through a webhook: the API server sends its
    // objects to the webhook, which cannot convert them until it has the spoke.
    if request.resource
        && let Some(hub) = project.conversion_hub(&names.group, &names.kind, &names.version)
    {
        ui::warn(
            &format!(
                "{} converts through its {} webhook, which cannot convert {} objects yet",
                names.kind, hub.version, names.version
            ),
            None,
        );
        next.push_str(&format!(
            "  rsbuilder create webhook --group {} --version {} --kind {} --conversion --spoke {}\n",
            names::group_flag(&names.group),
            hub.version,
            names.kind,
            names.version
        ));
    }
    next.push_str("  cargo test && make install run");
    ui::note(&next);
    super::note_older_runtime(&project);
    Ok(())
}
