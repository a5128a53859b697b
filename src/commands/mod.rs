//! One module per command. Each runs the same steps: resolve the flags into options, load
//! PROJECT, plan every file in memory, apply the plan, save PROJECT.

pub mod create_api;
pub mod create_webhook;
pub mod edit;
pub mod generate;
pub mod init;
pub mod upgrade;

use crate::cli::{Cli, Command, CreateCommand};
use crate::versions;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init(args) => init::run(args),
        Command::Create(CreateCommand::Api(args)) => create_api::run(args),
        Command::Create(CreateCommand::Webhook(args)) => create_webhook::run(args),
        Command::Edit(args) => edit::run(args),
        Command::Generate { check } => generate::run(check),
        Command::Upgrade { force, dry_run } => {
            upgrade::run(upgrade::UpgradeOptions { force, dry_run })
        }
        Command::Version => {
            let text = format!(
                "rsbuilder {}\nrsbuilder-runtime {}\nkube {}\nk8s-openapi {}\nkubernetes {} (k8s-openapi feature {})\n",
                versions::RSBUILDER,
                crate::runtime::version(),
                versions::KUBE,
                versions::K8S_OPENAPI,
                versions::KUBERNETES,
                versions::K8S_OPENAPI_FEATURE
            );
            crate::ui::data(text.as_bytes())
        }
        Command::Completion { shell } => crate::ui::data(&crate::cli::completions(shell)),
    }
}
