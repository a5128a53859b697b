//! The `manager` binary: parses the flags, sets up logging and runs the controllers.

use clap::Parser;
use otp_operator::cli::Args;
use otp_operator::manager::{Manager, Registration};
use otp_operator::telemetry;
// +rsbuilder:scaffold:imports

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format, &args.log_level)?;

    let controllers: Vec<Registration> = vec![
        // +rsbuilder:scaffold:controllers
    ];
    Manager::new(args).await?.run(controllers).await
}
