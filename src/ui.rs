//! Everything rsbuilder prints: status lines and errors for people on stderr, data (`version`,
//! `completion`) on stdout.
//!
//! A closed pipe is not an error: `rsbuilder version | true` or `rsbuilder init 2>&1 | head -1`
//! end quietly, as cargo does, instead of panicking. Lines for people that cannot be written are
//! dropped (the command's work goes on); data that cannot be written ends the output.

use std::fmt;
use std::io::{self, Write as _};
use std::path::Path;

/// Asks `question` on the terminal, as kubebuilder does: `question [Y/n]: `, answered with a
/// line; an empty line takes `default`. `None` when the input ends (Ctrl-D). The terminal stays
/// as it is (a line is read in its normal mode), so Ctrl-C ends the command with the cursor
/// where it belongs.
pub fn confirm(question: &str, default: bool) -> io::Result<Option<bool>> {
    let hint = if default { "[Y/n]" } else { "[y/N]" };
    let stdin = io::stdin();
    loop {
        let mut err = io::stderr().lock();
        let _ = write!(err, "{question} {hint}: ");
        let _ = err.flush();
        drop(err);
        let mut line = String::new();
        if stdin.read_line(&mut line)? == 0 {
            note("");
            return Ok(None);
        }
        match line.trim().to_lowercase().as_str() {
            "" => return Ok(Some(default)),
            "y" | "yes" => return Ok(Some(true)),
            "n" | "no" => return Ok(Some(false)),
            other => note(&format!("answer y or n, not `{other}`")),
        }
    }
}

/// An error caused by the user's input: it names the bad value and the rule, and may carry a fix
/// printed on its own `help:` line.
#[derive(Debug, Clone)]
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

/// `value` as a message shows it between backticks: control characters escaped (`\n`, `\t`,
/// `\u{1b}`), so that the message stays on its line and shows what was given; the rest as it is.
pub fn shown(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Prints `error: ...` with the whole cause chain, then the `help:` line: the refusal's own,
/// or, for a failure of the file system, what to check.
pub fn error(error: &anyhow::Error) {
    // Whatever a value held, the terminal gets no control character but the line ends that
    // messages are made of (an `edit` refusal shows a diff).
    line(format_args!(
        "error: {}",
        lines_shown(&format!("{error:#}"))
    ));
    if let Some(help) = help(error) {
        line(format_args!("help: {}", lines_shown(&help)));
    }
}

/// `text` with every control character but `\n` escaped, as `shown` escapes them.
fn lines_shown(text: &str) -> String {
    text.split('\n').map(shown).collect::<Vec<_>>().join("\n")
}

/// The `help:` line of `error`: its refusal's own, or, for a failure of the file system, what
/// to check.
pub fn help(error: &anyhow::Error) -> Option<String> {
    if let Some(help) = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<UserError>())
        .and_then(UserError::help_text)
    {
        return Some(help.to_owned());
    }
    let io = error
        .chain()
        .find_map(|cause| cause.downcast_ref::<io::Error>())?;
    Some(
        match io.kind() {
            io::ErrorKind::PermissionDenied => {
                "make the file or folder named above writable for you, then run the command again"
            }
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                "free some disk space, then run the command again"
            }
            io::ErrorKind::ReadOnlyFilesystem => {
                "run the command where the file system can be written"
            }
            _ => "check the file or folder named above, then run the command again",
        }
        .to_owned(),
    )
}

/// One line per file: `created config/rbac/role.yaml`.
pub fn file(verb: &str, path: &Path) {
    line(format_args!("{verb} {}", path.display()));
}

/// `warning: <message>`, and the fix on a `help:` line when there is one; control characters
/// that a value brought are escaped, as in errors.
pub fn warn(message: &str, help: Option<&str>) {
    line(format_args!("warning: {}", lines_shown(message)));
    if let Some(help) = help {
        line(format_args!("help: {}", lines_shown(help)));
    }
}

/// A free-form line for people.
pub fn note(message: &str) {
    line(format_args!("{message}"));
}

/// Writes one line for people to stderr; a closed or failing stderr drops it.
fn line(text: fmt::Arguments<'_>) {
    // One write per line: stderr is unbuffered, and a line written in pieces can interleave
    // with another process's output.
    let _ = io::stderr()
        .lock()
        .write_all(format!("{text}\n").as_bytes());
}

/// Writes `bytes` to stdout. A reader that went away (a closed pipe) ends the output quietly;
/// other failures are errors.
pub fn data(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(error).context("failed to write to stdout"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn every_error_gets_a_help_line() {
        let refusal: anyhow::Error = UserError::new("bad").help("do this").into();
        assert_eq!(help(&refusal).as_deref(), Some("do this"));
        let denied = Err::<(), _>(io::Error::from(io::ErrorKind::PermissionDenied))
            .context("failed to write `PROJECT`")
            .unwrap_err();
        assert_eq!(
            help(&denied).as_deref(),
            Some(
                "make the file or folder named above writable for you, then run the command again"
            )
        );
        let full = Err::<(), _>(io::Error::from(io::ErrorKind::StorageFull))
            .context("failed to write `PROJECT`")
            .unwrap_err();
        assert_eq!(
            help(&full).as_deref(),
            Some("free some disk space, then run the command again")
        );
        let other = Err::<(), _>(io::Error::other("odd"))
            .context("failed to read `x`")
            .unwrap_err();
        assert!(help(&other).is_some());
        assert_eq!(help(&anyhow::anyhow!("a bug")), None);
    }

    #[test]
    fn messages_keep_their_lines_and_escape_every_other_control_character() {
        assert_eq!(
            lines_shown("invalid `a\u{1b}[31m\r\t\u{7f}`:\n- b"),
            "invalid `a\\u{1b}[31m\\r\\t\\u{7f}`:\n- b"
        );
    }
}
