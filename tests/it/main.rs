//! Integration tests: the real `rsbuilder` binary, run in temporary directories.

mod alpha;
mod architecture;
mod cli;
mod crash;
mod create_api;
mod create_webhook;
mod edit;
mod generate;
mod golden;
mod hostile;
mod init;
mod make;
mod markers;
mod runtime;
mod support;
mod terminal;
mod transcripts;
mod upgrade;
