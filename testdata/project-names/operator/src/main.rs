//! The `manager` binary: parses the flags, sets up logging and runs the controllers.

use clap::Parser;
use names_operator::cli::Args;
use names_operator::manager::{Manager, Registration};
use names_operator::telemetry;

use names_operator::controllers;
// +rsbuilder:scaffold:imports

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format, &args.log_level)?;

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
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args).await?.run(controllers).await
}
