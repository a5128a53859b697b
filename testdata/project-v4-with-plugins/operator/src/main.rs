//! The `manager` binary of project-v4-with-plugins: its flags, and the controllers it runs.
//!
//! What runs around the controllers (probes, metrics, leader election, graceful shutdown) is
//! the `rsbuilder-runtime` crate; this file and `controllers/` are yours.

use clap::Parser;
use rsbuilder_runtime::{Manager, ManagerArgs, Registration, telemetry};

use project_v4_with_plugins::controllers;

use project_v4_with_plugins::webhooks;
// +rsbuilder:scaffold:imports

/// The name of the Lease that replicas compete for when `--leader-elect` is on.
const LEADER_ELECTION_ID: &str = "30a7cdc7.testproject.org";

/// Runs the controllers of project-v4-with-plugins.
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
        controllers::example_com::memcached::registration(),
        controllers::example_com::busybox::registration(),
        controllers::example_com::wordpress::registration(),
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args.manager)
        .await?
        .leader_election_id(LEADER_ELECTION_ID)
        .webhooks(webhooks::all())
        // +rsbuilder:scaffold:manager
        .require_watch_namespace()
        .run(controllers)
        .await
}
