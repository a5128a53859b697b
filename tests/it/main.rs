//! Integration tests: the real `rsbuilder` binary, run in temporary directories.

mod cli;
mod golden;
mod init;
mod support;
