//! The `manager` binary: parses the flags, sets up logging and runs the controllers.

use clap::Parser;
use ns_operator::cli::Args;
use ns_operator::manager::{Manager, Registration};
use ns_operator::telemetry;

use ns_operator::controllers;
// +rsbuilder:scaffold:imports

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format, &args.log_level)?;

    let controllers: Vec<Registration> = vec![
        controllers::ship::captain::registration(),
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args).await?.run(controllers).await
}
