//! Whole outputs, as a person sees them: each scenario runs commands in one fresh project and
//! records every command with its exit code, its whole stdout and its whole stderr, and for a
//! failing command whether the tree stayed as it was. The transcript must equal
//! `tests/it/transcripts/<scenario>.txt` byte for byte, apart from the temporary directory
//! (`[ROOT]`); a difference fails with a diff. `SNAPSHOTS=overwrite cargo test` rewrites them.

use std::fmt::Write as _;
use std::path::Path;

use crate::support::{Workspace, snapshot, stderr, stdout};

/// One step of a scenario.
enum Step {
    /// `rsbuilder <command line>`, split at spaces (no argument here holds one).
    Run(&'static str),
    /// A change made by hand: `path` gets `text` (its folders are made).
    Write(&'static str, &'static str),
    /// A change made by hand: the first `from` in `path` becomes `to`.
    Replace(&'static str, &'static str, &'static str),
    /// `rsbuilder <command line>`, which must succeed, with its output left out of the
    /// transcript.
    Quietly(&'static str),
}

use Step::{Quietly, Replace, Run, Write};

/// Runs `steps` in a new, empty project directory called `otp-operator` and compares the
/// transcript with its file.
#[track_caller]
fn transcript(scenario: &str, steps: &[Step]) {
    let ws = Workspace::new("otp-operator");
    let mut out = String::new();
    for step in steps {
        match step {
            Run(line) => run(&ws, line, &mut out),
            Write(path, text) => {
                ws.write(path, text);
                let _ = writeln!(out, "# wrote {path}\n");
            }
            Replace(path, from, to) => {
                let text = ws.read(path);
                assert!(text.contains(from), "`{from}` is not in {path}");
                ws.write(path, &text.replacen(from, to, 1));
                let _ = writeln!(out, "# replaced {from:?} with {to:?} in {path}\n");
            }
            Quietly(line) => {
                ws.run(&args(line)).success();
                let _ = writeln!(out, "$ rsbuilder {line} > /dev/null 2>&1\n");
            }
        }
    }
    let mut redactions = snapbox::Redactions::new();
    redactions
        .insert("[ROOT]", ws.root().to_path_buf())
        .expect("a valid redaction");
    let expected = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/transcripts")
        .join(format!("{scenario}.txt"));
    snapbox::Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .redact_with(redactions)
        .eq(out, snapbox::Data::read_from(&expected, None).raw());
}

/// The arguments of a command line.
fn args(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Runs one command and appends it to the transcript.
fn run(ws: &Workspace, line: &str, out: &mut String) {
    let before = snapshot(ws.root());
    let assert = ws.run(&args(line));
    let code = assert.get_output().status.code();
    let _ = writeln!(out, "$ rsbuilder {line}");
    let _ = writeln!(
        out,
        "exit: {}",
        code.map_or("signal".to_owned(), |c| c.to_string())
    );
    for (name, text) in [("stdout", stdout(&assert)), ("stderr", stderr(&assert))] {
        if !text.is_empty() {
            let _ = write!(out, "--- {name}\n{text}");
            if !text.ends_with('\n') {
                out.push_str("[no newline at the end]\n");
            }
        }
    }
    if code != Some(0) {
        let unchanged = snapshot(ws.root()) == before;
        let _ = writeln!(
            out,
            "--- the tree {}",
            if unchanged { "is as it was" } else { "CHANGED" }
        );
    }
    out.push('\n');
}

const INIT: &str = "init --domain learn.com --repo github.com/example/otp-operator";
const APPOTP: &str = "create api --group appotp --version v1 --kind AppOTP";

#[test]
fn a_new_project_with_an_api_and_webhooks() {
    transcript(
        "new_project",
        &[
            Run(INIT),
            Run(APPOTP),
            Run(
                "create webhook --group appotp --version v1 --kind AppOTP --defaulting --programmatic-validation",
            ),
            Run("create api --group core --version v1 --kind Pod --controller --resource=false"),
        ],
    );
}

#[test]
fn bad_flag_values_are_refused_with_their_rule_and_fix() {
    transcript(
        "bad_values",
        &[
            Quietly(INIT),
            Run("create api --group appotp --version v1.0 --kind AppOTP"),
            Run("create api --group appotp --version v1 --kind app-otp"),
            Run("create api --group App_OTP --version v1 --kind AppOTP"),
            Run("create api --group appotp --version v1 --kind AppOTP --plural AppOTPs"),
            Run("create webhook --group appotp --version v1 --kind Missing --defaulting"),
            Run("create webhook --group appotp --version v1 --kind AppOTP"),
            Run("init --domain learn.com"),
            Run("edit --plugins=helm.kubebuilder.io/v2-alpha"),
            Run("create api --group"),
        ],
    );
}

const MAIN: &str = "operator/src/main.rs";

#[test]
fn files_of_the_user_are_never_overwritten_without_force() {
    transcript(
        "conflicts",
        &[
            Quietly(INIT),
            Write("api/src/appotp/v1/app_otp.rs", "// the user's own file\n"),
            Run(APPOTP),
            Run("create api --group appotp --version v1 --kind AppOTP --dry-run"),
            Replace(MAIN, "        // +rsbuilder:scaffold:controllers\n", ""),
            Run("create api --group appotp --version v1 --kind AppOTP --force"),
            Replace(
                MAIN,
                "vec![\n    ];",
                "vec![\n        // +rsbuilder:scaffold:controllers\n    ];",
            ),
            Run("create api --group appotp --version v1 --kind AppOTP --force --dry-run"),
            Run("create api --group appotp --version v1 --kind AppOTP --force"),
            Run("create api --group appotp --version v1 --kind AppOTP --force"),
        ],
    );
}

#[test]
fn upgrade_and_edit_say_what_they_change() {
    transcript(
        "upgrade_and_edit",
        &[
            Quietly(INIT),
            Run("upgrade"),
            Run("upgrade --dry-run"),
            Run("edit --namespaced"),
            Run("edit --namespaced"),
            Run("edit --namespaced=false --dry-run"),
        ],
    );
}
