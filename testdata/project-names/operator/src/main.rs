//! The `manager` binary of names-operator: its flags, and the controllers it runs.
//!
//! What runs around the controllers (probes, metrics, leader election, graceful shutdown) is
//! the `rsbuilder-runtime` crate; this file and `controllers/` are yours.

use clap::Parser;
use rsbuilder_runtime::{Manager, ManagerArgs, Registration, telemetry};

use names_operator::controllers;

use names_operator::webhooks;
// +rsbuilder:scaffold:imports

/// The name of the Lease that replicas compete for when `--leader-elect` is on.
const LEADER_ELECTION_ID: &str = "46b0b156.example.com";

/// Runs the controllers of names-operator.
#[derive(Debug, Parser)]
#[command(name = "manager", version)]
struct Args {
    #[command(flatten)]
    manager: ManagerArgs,
    // TODO(user): Add the operator's own flags here.
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.manager.log_format, &args.manager.log_level)?;

    let controllers: Vec<Registration> = vec![
        controllers::kube::context::registration(),
        controllers::super_::status::registration(),
        controllers::r#type::r#match::registration(),
        controllers::core::core::registration(),
        controllers::std::object::registration(),
        controllers::apps::error::registration(),
        controllers::ops::registration::registration(),
        controllers::ops::spec::registration(),
        controllers::ops::api_server::registration(),
        controllers::ops::webhooks::registration(),
        controllers::ops::defaulter::registration(),
        controllers::lib_::mod_::registration(),
        controllers::main_::on::registration(),
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args.manager)
        .await?
        .leader_election_id(LEADER_ELECTION_ID)
        .webhooks(webhooks::all())
        // +rsbuilder:scaffold:manager
        .run(controllers)
        .await
}
