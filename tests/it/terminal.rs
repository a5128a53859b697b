//! What a person sees on a terminal: `create api` asks what to scaffold, refuses what exists
//! before asking, and Ctrl-C at a question leaves the terminal as it was. The tests drive a
//! real terminal, a tmux pane (send-keys, capture-pane); without tmux they are ignored, and
//! `scripts/test.sh` runs them (CI installs tmux).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Workspace, assert_same_tree};

/// How long a test waits for the terminal to show something.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A tmux server of its own (`-L`), with one pane running `command` in `dir`.
struct Pane {
    socket: String,
}

impl Pane {
    fn start(dir: &Path, command: &str) -> Self {
        let socket = format!(
            "rsbuilder-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let pane = Self { socket };
        // The command, then its exit status, then a shell that keeps the pane open. The shell
        // survives Ctrl-C (a handler, unlike an ignored signal, is not inherited).
        let script = format!("trap : INT; {command}; echo EXIT=$?; exec sleep 60");
        pane.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "30",
            "-c",
            dir.to_str().unwrap(),
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            &script,
        ]);
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The text of the pane.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J"])
    }

    /// Waits until the pane shows `text`, and returns the screen.
    fn wait_for(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "`{text}` did not appear within {TIMEOUT:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Whether the terminal shows its cursor.
    fn cursor_visible(&self) -> bool {
        self.tmux(&["display-message", "-p", "#{cursor_flag}"])
            .trim()
            == "1"
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn rsbuilder() -> String {
    assert_cmd::cargo::cargo_bin("rsbuilder")
        .display()
        .to_string()
}

fn project() -> Workspace {
    let ws = Workspace::new("otp-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    ws
}

const CREATE: &str = "create api --group appotp --version v1 --kind AppOTP";

#[test]
#[ignore = "needs tmux; scripts/test.sh runs it"]
fn create_api_asks_what_to_scaffold_and_takes_the_answers() {
    let ws = project();
    let pane = Pane::start(ws.root(), &format!("{} {CREATE}", rsbuilder()));
    pane.wait_for("Create Resource [Y/n]: ");
    pane.keys(&["maybe", "Enter"]);
    pane.wait_for("answer y or n, not `maybe`");
    pane.keys(&["y", "Enter"]);
    pane.wait_for("Create Controller [Y/n]: ");
    pane.keys(&["n", "Enter"]);
    let screen = pane.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(ws.root().join("api/src/appotp/v1/app_otp.rs").exists());
    assert!(!ws.root().join("operator/src/controllers/appotp").exists());
    assert!(!ws.read("PROJECT").contains("controller: true"));
}

#[test]
#[ignore = "needs tmux; scripts/test.sh runs it"]
fn an_existing_api_is_refused_before_any_question() {
    let ws = project();
    let mut args: Vec<&str> = CREATE.split(' ').collect();
    args.push("--controller=false");
    ws.run(&args).success();
    let before = ws.snapshot();
    let pane = Pane::start(ws.root(), &format!("{} {CREATE}", rsbuilder()));
    let screen = pane.wait_for("EXIT=");
    assert!(
        screen.contains("error: API appotp.learn.com/v1, Kind=AppOTP already exists"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=1"), "{screen}");
    assert!(
        !screen.contains("Create Resource"),
        "asked before refusing:\n{screen}"
    );
    assert_same_tree(&before, &ws.snapshot(), "a refused create api");
}

#[test]
#[ignore = "needs tmux; scripts/test.sh runs it"]
fn ctrl_c_at_a_question_changes_nothing_and_leaves_the_cursor_visible() {
    let ws = project();
    let before = ws.snapshot();
    let pane = Pane::start(ws.root(), &format!("{} {CREATE}", rsbuilder()));
    pane.wait_for("Create Resource [Y/n]: ");
    assert!(
        pane.cursor_visible(),
        "the cursor is hidden at the question"
    );
    pane.keys(&["C-c"]);
    let screen = pane.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(pane.cursor_visible(), "the cursor is hidden after Ctrl-C");
    assert_same_tree(&before, &ws.snapshot(), "Ctrl-C at a question");
}
