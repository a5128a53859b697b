//! The `manager` binary: parses the flags, sets up logging and runs the controllers.

use clap::Parser;
use otp_operator::cli::Args;
use otp_operator::manager::{Manager, Registration};
use otp_operator::telemetry;

use otp_operator::controllers;
// +rsbuilder:scaffold:imports

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format, &args.log_level)?;

    let controllers: Vec<Registration> = vec![
        controllers::appotp::app_otp::registration(),
        controllers::appotp::policy::registration(),
        controllers::fleet::client::registration(),
        controllers::fleet::r#loop::registration(),
        controllers::security_platform::certificate_request_policy::registration(),
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args).await?.run(controllers).await
}
