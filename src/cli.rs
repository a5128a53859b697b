//! The command line: clap types only. No other module uses clap.
//!
//! Boolean flags read as kubebuilder's do: `--namespaced`, `--namespaced=true` and
//! `--namespaced=false` all work, so scripts written for kubebuilder run unchanged.

use clap::{ArgAction, Args, CommandFactory, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use crate::names;
use crate::ui::UserError;

/// Scaffold Kubernetes operators in Rust on kube-rs, the way kubebuilder does for Go.
#[derive(Debug, Parser)]
#[command(
    name = "rsbuilder",
    version,
    after_help = "Example:\n  mkdir otp-operator && cd otp-operator\n  rsbuilder init --domain learn.com"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Initialize a new operator project in the current directory
    Init(InitArgs),
    /// Scaffold a Kubernetes API (a kind's types and manifests), a controller, or webhooks
    #[command(subcommand)]
    Create(CreateCommand),
    /// Change what `init` decided (scope, license, owner), or add kubebuilder's optional plugins: autoupdate, grafana and helm
    Edit(EditArgs),
    /// Regenerate the CRDs (from the compiled types), the RBAC role and the webhook
    /// configurations (from the markers)
    Generate {
        /// Write nothing: list the stale manifests with a diff, and fail if there are any
        #[arg(long)]
        check: bool,
    },
    /// Replace the project's runtime crate (runtime/) with this rsbuilder's, and raise the
    /// dependency versions it needs
    Upgrade {
        /// Replace the runtime even if its files were changed, losing the changes
        #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
        force: bool,
        /// Show the diff of what would change, and write nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Commands that may still change: scaffold a project again from its PROJECT file
    #[command(subcommand)]
    Alpha(AlphaCommand),
    /// Print the rsbuilder version and the kube, k8s-openapi and Kubernetes versions it scaffolds
    Version,
    /// Print a shell completion script
    Completion {
        /// The shell to complete for
        shell: Shell,
    },
}

/// The subcommands of `rsbuilder alpha`.
#[derive(Debug, Subcommand)]
pub enum AlphaCommand {
    /// Scaffold the project again from its PROJECT file with this rsbuilder: `init`, every
    /// `create api` and `create webhook` it records, into a new tree
    Generate(AlphaGenerateArgs),
    /// Bring the project up to this rsbuilder: a three-way merge of the scaffold of the
    /// rsbuilder recorded in PROJECT, your project, and this rsbuilder's scaffold, on a branch
    Update(AlphaUpdateArgs),
}

/// Flags of `rsbuilder alpha generate`.
#[derive(Debug, Args)]
pub struct AlphaGenerateArgs {
    /// Where the new tree goes: a new or empty directory [default: in place of the
    /// project's files, with --force]
    #[arg(long)]
    pub output_dir: Option<std::path::PathBuf>,
    /// Without --output-dir: replace every file of the project but .git with the new tree
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,
    /// Print the commands it would run, and run none
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `rsbuilder alpha update`.
#[derive(Debug, Args)]
pub struct AlphaUpdateArgs {
    /// The rsbuilder that made the project [default: installs PROJECT's cliVersion into
    /// bin/ as `make rsbuilder` does, from RSBUILDER_INSTALL]
    #[arg(long)]
    pub from_binary: Option<std::path::PathBuf>,
    /// Write the merge into the work tree on the current branch, conflict markers and all
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,
    /// List what the merge would change, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `rsbuilder init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Domain of the API groups: a group `appotp` becomes `appotp.<domain>`
    #[arg(long, default_value = "my.domain")]
    pub domain: String,

    /// Project name [default: the directory name, lowercased]
    #[arg(long)]
    pub project_name: Option<String>,

    /// Repository URL, written to `repository =` in the workspace Cargo.toml
    #[arg(long)]
    pub repo: Option<String>,

    /// Copyright owner, written to `authors =` in the workspace Cargo.toml
    #[arg(long)]
    pub owner: Option<String>,

    /// License of the generated project
    #[arg(long, value_enum, default_value_t = License::Apache2)]
    pub license: License,

    /// Watch and manage resources in the manager's namespace only: a Role instead of a
    /// ClusterRole, and `WATCH_NAMESPACE` set from the pod's namespace
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub namespaced: bool,

    /// Scaffold even where a project already exists, overwriting its files
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,

    /// Accepted for kubebuilder's scripts: every rsbuilder project holds any number of groups
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub multigroup: bool,

    /// Plugins, as kubebuilder names them: `go/v4` and `kustomize/v2` are what rsbuilder does
    #[arg(long, value_delimiter = ',')]
    pub plugins: Vec<String>,

    /// Where the project takes the runtime crate from: `vendored` (a copy in runtime/),
    /// `registry` (crates.io, at this rsbuilder's version), `path:DIR` or `git:URL[#REV]`
    #[arg(long, value_name = "FORM", default_value = "vendored")]
    pub runtime: String,

    /// List what would be created or changed, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `rsbuilder edit`.
#[derive(Debug, Args)]
pub struct EditArgs {
    /// Switch the manager between watching its own namespace (a Role, `WATCH_NAMESPACE`) and
    /// the whole cluster (a ClusterRole) [default: as it is]
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub namespaced: Option<bool>,

    /// Accepted for kubebuilder's scripts: every rsbuilder project holds any number of groups
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub multigroup: Option<bool>,

    /// License of the project, in the workspace Cargo.toml and the README [default: as it is]
    #[arg(long, value_enum)]
    pub license: Option<License>,

    /// Copyright owner, in `authors =` of the workspace Cargo.toml [default: as it is]
    #[arg(long)]
    pub owner: Option<String>,

    /// Switch where the project takes the runtime crate from: `vendored`, `registry`,
    /// `path:DIR` or `git:URL[#REV]` [default: as it is]
    #[arg(long, value_name = "FORM")]
    pub runtime: Option<String>,

    /// Plugins, as kubebuilder names them: `go/v4` and `kustomize/v2` are what rsbuilder does;
    /// `autoupdate/v1-alpha`, `grafana/v1-alpha` and `helm/v2-alpha` add to the project
    #[arg(long, value_delimiter = ',')]
    pub plugins: Vec<String>,

    /// With helm/v2-alpha: the kustomize output the chart is made from [default: dist/install.yaml,
    /// or what PROJECT records]
    #[arg(long, value_name = "FILE")]
    pub manifests: Option<String>,

    /// With helm/v2-alpha: the directory the chart goes into, as `<DIR>/chart` [default: dist,
    /// or what PROJECT records]
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<String>,

    /// With helm/v2-alpha: replace the chart's values.yaml with the generated one, dropping
    /// your edits (without it, and with --force, your values are kept and missing keys added)
    #[arg(long)]
    pub reset_values: bool,

    /// With autoupdate/v1-alpha or helm/v2-alpha: replace the workflows they add
    /// (auto_update.yml, test-chart.yml) with the generated ones, dropping your edits (without
    /// it, and with --force, a workflow that exists is kept)
    #[arg(long)]
    pub reset_workflows: bool,

    /// With helm/v2-alpha: make the chart from the install file as it is, even when it lacks
    /// what config/ holds (alpha generate's tree, whose config/ is the scaffold's)
    #[arg(long, hide = true)]
    pub install_as_is: bool,

    /// With grafana/v1-alpha: replace the manager's two dashboards with the generated ones,
    /// dropping your edits (without it, and with --force, a dashboard that exists is kept)
    #[arg(long)]
    pub reset_dashboards: bool,

    /// Overwrite the scaffold's config files (manager.yaml, the role binding) where their lines
    /// were edited by hand; files the user owns, such as main.rs, the chart's values.yaml, the
    /// workflows and the dashboards, are never overwritten (the --reset-* flags replace those)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,

    /// List what would be changed, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// What `create` scaffolds.
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Scaffold a kind: its Rust types, CRD, samples and RBAC roles, and a controller for it
    Api(CreateApiArgs),
    /// Scaffold defaulting, validation or conversion webhooks for a kind, and the config/ that
    /// serves them with cert-manager certificates
    Webhook(CreateWebhookArgs),
}

/// Flags of `rsbuilder create webhook`.
#[derive(Debug, Args)]
pub struct CreateWebhookArgs {
    /// API group, without the domain; empty means the domain itself
    #[arg(long, default_value = "")]
    pub group: String,

    /// API version of the kind; the hub with --conversion
    #[arg(long)]
    pub version: String,

    /// Kind, as in PROJECT
    #[arg(long)]
    pub kind: String,

    /// Resource name [default: the kind's, as in PROJECT]
    #[arg(long)]
    pub plural: Option<String>,

    /// Scaffold a defaulting (mutating) webhook
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub defaulting: bool,

    /// Scaffold a validating webhook
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub programmatic_validation: bool,

    /// Scaffold a conversion webhook, with --version as the hub
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub conversion: bool,

    /// Versions converted to and from the hub, comma-separated (with --conversion)
    #[arg(long, value_delimiter = ',')]
    pub spoke: Vec<String>,

    /// Path of the defaulting webhook [default: /mutate-<group>-<version>-<kind>]
    #[arg(long)]
    pub defaulting_path: Option<String>,

    /// Path of the validating webhook [default: /validate-<group>-<version>-<kind>]
    #[arg(long)]
    pub validation_path: Option<String>,

    /// Scaffold the webhooks again even if they exist, overwriting the kind's webhook module
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,

    /// Plugins, as kubebuilder names them: `go/v4` and `kustomize/v2` are what rsbuilder does
    #[arg(long, value_delimiter = ',')]
    pub plugins: Vec<String>,

    /// Regenerate the manifests from the compiled types afterwards (rsbuilder generate)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub make: bool,

    /// List what would be created or changed, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Flags of `rsbuilder create api`.
#[derive(Debug, Clone, Args)]
pub struct CreateApiArgs {
    /// API group, without the domain; empty means the domain itself
    #[arg(long, default_value = "")]
    pub group: String,

    /// API version: v1, v1beta1, v2alpha1, ...
    #[arg(long)]
    pub version: String,

    /// Kind, in PascalCase: AppOTP
    #[arg(long)]
    pub kind: String,

    /// Resource name [default: the kind, lowercased and pluralized as kubebuilder does]
    #[arg(long)]
    pub plural: Option<String>,

    /// Whether the kind is namespaced; `--namespaced=false` makes it cluster-scoped
    /// [default: as the kind's other versions, else true]
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub namespaced: Option<bool>,

    /// Scaffold the kind's types and manifests [default: ask on a terminal, else true]
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub resource: Option<bool>,

    /// Scaffold a controller for the kind [default: ask on a terminal, else true unless the kind has one]
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub controller: Option<bool>,

    /// Name of the controller, a DNS-1035 label: a kind may have several controllers, each
    /// with its own module, field manager and finalizer [default: the kind's]
    #[arg(long)]
    pub controller_name: Option<String>,

    /// Server-side apply: every field of the kind's spec is optional and left out when unset,
    /// so that a partial object is its own apply configuration [default: false; with --force,
    /// as PROJECT records the kind]
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub ssa: Option<bool>,

    /// Run this image: the kind's spec describes a Deployment (size, image, resources, env,
    /// ports) that its controller creates and keeps in line (kubebuilder's deploy-image plugin)
    #[arg(long)]
    pub image: Option<String>,

    /// The port the image listens on, the default of the spec's `ports`: 1 to 65535 (with --image)
    #[arg(long, value_parser = checked(names::container_port))]
    pub image_container_port: Option<String>,

    /// The command of the image's container, comma-separated on one line: "memcached,-m,64" (with --image)
    #[arg(long, allow_hyphen_values = true, value_parser = checked(names::container_command))]
    pub image_container_command: Option<String>,

    /// The user ID the image's container runs as: 1 to 2147483647, not root (with --image)
    #[arg(long, allow_hyphen_values = true, value_parser = checked(names::run_as_user))]
    pub run_as_user: Option<String>,

    /// Plugins, as kubebuilder names them: `go/v4`, `kustomize/v2`, and
    /// `deploy-image/v1-alpha` with --image
    #[arg(long, value_delimiter = ',')]
    pub plugins: Vec<String>,

    /// Scaffold the kind again even if it exists, overwriting its own files
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub force: bool,

    /// Regenerate the manifests from the compiled types afterwards (rsbuilder generate)
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_value_t = false, default_missing_value = "true")]
    pub make: bool,

    /// List what would be created or changed, and write nothing
    #[arg(long)]
    pub dry_run: bool,
}

/// Licenses `init` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum License {
    /// Apache License 2.0
    Apache2,
    /// No license
    None,
}

/// Parses the process arguments. A value a flag's own rule refuses
/// (`--image-container-port 0`) is a [`UserError`], reported as every other; other usage
/// errors are clap's, and exit with status 2.
pub fn parse() -> Result<Cli, UserError> {
    Cli::try_parse().or_else(|error| {
        let own = std::error::Error::source(&error).and_then(|s| s.downcast_ref::<UserError>());
        match own {
            Some(refusal) => Err(refusal.clone()),
            None => error.exit(),
        }
    })
}

/// A value parser of the rule `check`: the value as given, once `check` accepts it.
fn checked<T: 'static>(
    check: fn(&str) -> Result<T, UserError>,
) -> impl Fn(&str) -> Result<String, UserError> + Clone + Send + Sync + 'static {
    move |text: &str| check(text).map(|_| text.to_owned())
}

/// The completion script for `shell`.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "rsbuilder", &mut script);
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn boolean_flags_read_as_kubebuilder_reads_them() {
        for (flag, want) in [
            ("--namespaced", true),
            ("--namespaced=true", true),
            ("--namespaced=false", false),
        ] {
            let cli = Cli::try_parse_from(["rsbuilder", "init", flag]).unwrap();
            let Command::Init(args) = cli.command else {
                panic!("not init")
            };
            assert_eq!(args.namespaced, want, "{flag}");
        }
    }
}
