//! Everything rsbuilder prints to people: status lines and errors on stderr.
//!
//! Data (such as `version` and `completion` output) goes to stdout from the command itself;
//! this module owns every human-facing line.

use std::fmt;
use std::path::Path;

/// An error caused by the user's input: it names the bad value and the rule, and may carry a fix
/// printed on its own `help:` line.
#[derive(Debug)]
pub struct UserError {
    message: String,
    help: Option<String>,
}

impl UserError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            help: None,
        }
    }

    /// Adds the suggested fix.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The suggested fix, if any.
    pub fn help_text(&self) -> Option<&str> {
        self.help.as_deref()
    }
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UserError {}

/// Prints `error: ...` with the whole cause chain, then the `help:` line if there is one.
pub fn error(error: &anyhow::Error) {
    eprintln!("error: {error:#}");
    if let Some(help) = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<UserError>())
        .and_then(UserError::help_text)
    {
        eprintln!("help: {help}");
    }
}

/// One line per file: `created config/rbac/role.yaml`.
pub fn file(verb: &str, path: &Path) {
    eprintln!("{verb} {}", path.display());
}

/// A free-form line for people.
pub fn note(message: &str) {
    eprintln!("{message}");
}
