//! The `manager` binary of memcached-operator: its flags, and the controllers it runs.
//!
//! What runs around the controllers (probes, metrics, leader election, graceful shutdown) is
//! the `rsbuilder-runtime` crate; this file and `controllers/` are yours.

use clap::Parser;
use rsbuilder_runtime::{Manager, ManagerArgs, Registration, telemetry};

use memcached_operator::controllers;

use memcached_operator::webhooks;
// +rsbuilder:scaffold:imports

/// The name of the Lease that replicas compete for when `--leader-elect` is on.
const LEADER_ELECTION_ID: &str = "87a7d51f.learn.com";

/// Runs the controllers of memcached-operator.
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
        controllers::appotp::app_otp::registration(),
        controllers::web::site::registration(),
        controllers::web::proxy::registration(),
        controllers::k8s_apps::deployment::registration(),
        controllers::k8s_core::pod::registration(),
        controllers::k8s_rbac::cluster_role::registration(),
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
