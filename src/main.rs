//! `rsbuilder`: scaffold Kubernetes operators in Rust on kube-rs, the way kubebuilder does for Go.
//!
//! `main` only turns the result of [`commands::run`] into an exit code; `ARCHITECTURE.md` maps
//! the modules.

mod apply;
mod cli;
mod commands;
mod diff;
mod lockfile;
mod manifest;
mod names;
mod owned;
mod plugins;
mod project;
mod rbac;
mod runtime;
mod scaffold;
mod tree;
mod ui;
mod validations;
mod versions;
mod webhook;
mod yaml;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(refusal) => {
            ui::error(&refusal.into());
            return ExitCode::FAILURE;
        }
    };
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            ui::error(&error);
            ExitCode::FAILURE
        }
    }
}
