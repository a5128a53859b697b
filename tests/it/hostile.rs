//! Random strings, with quotes, backslashes, newlines, control characters, template syntax and
//! unicode, fed to every flag whose value reaches a file. Each run is either refused (exit 1,
//! an `error:` and a `help:` line with no raw control character, the tree byte for byte as it
//! was) or accepted with a project that still reads: every Rust file it changed parses, every
//! YAML file parses, every Cargo manifest is one cargo reads, and the next command reads its
//! PROJECT. That accepted values also build is proved by the golden projects, which take such
//! values (`project-deploy-image`, `project-namespaced`) and are built and tested in CI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{APP, INIT, Workspace, snapshot};

/// Pieces the random values are made of: what breaks string literals, YAML scalars, TOML
/// strings, Tera templates, shells and terminals, between ordinary characters.
const PIECES: &[&str] = &[
    "\"",
    "\\",
    "'",
    "\n",
    "\r\n",
    "\t",
    "\u{1b}[31m",
    "\u{7f}",
    "$",
    "${x}",
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "#",
    ": ",
    "- ",
    "&a",
    "*a",
    "!!str",
    "|",
    ">",
    ",",
    ";",
    "=",
    "/",
    "..",
    "@",
    "%",
    " ",
    "é",
    "日本",
    "🦀",
    "\u{200b}",
    "a",
    "z",
    "Q",
    "0",
    "9",
    "-",
    "_",
    ".",
    "v1",
    "on",
];

/// Plain pieces that valid values are made of, so that some runs are accepted.
const PLAIN: &[&str] = &["a", "b", "x", "0", "7", "-", ".", "/", "v1", "app"];

/// A small deterministic generator (xorshift64*), so a failure names a case that reruns.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A value that starts like `valid` and then goes astray, or is made of pieces only.
    fn value(&mut self, valid: &str) -> String {
        let mut out = String::new();
        match self.below(3) {
            0 => out.push_str(valid),
            1 => out.push_str(&valid[..valid.len() / 2]),
            _ => {}
        }
        for _ in 0..=self.below(5) {
            let pieces = if self.below(3) == 0 { PLAIN } else { PIECES };
            let at = self.below(pieces.len());
            if self.below(2) == 0 {
                out.push_str(pieces[at]);
            } else {
                out.insert_str(0, pieces[at]);
            }
        }
        out
    }
}

/// What each flag's valid value is also tried with, at its end.
const BREAKERS: &[&str] = &[
    "\"",
    "\\",
    "\n",
    "\u{1b}[0m",
    "{{ x }}",
    "{% if %}",
    " 🦀",
    "'",
    "$(id)",
];

/// How many values each flag gets, `RSBUILDER_HOSTILE_CASES` or 16: the valid one, the breakers,
/// then random ones.
fn cases() -> usize {
    std::env::var("RSBUILDER_HOSTILE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
        .max(BREAKERS.len() + 1)
}

/// Copies the tree at `from` into `to`, which exists.
fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from).min_depth(1) {
        let entry = entry.unwrap();
        let target = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// One flag under test: the project it runs in, the command around the value, and a valid
/// value to start from.
struct Flag {
    /// The commands that make the project the flag's command runs in.
    setup: &'static [&'static [&'static str]],
    /// The command, with `{}` where the value goes (as one argument, `--flag=value`).
    command: &'static [&'static str],
    valid: &'static str,
}

const V2: &[&str] = &[
    "create",
    "api",
    "--group",
    "apps",
    "--version",
    "v2",
    "--kind",
    "Cache",
    "--controller=false",
];

const FLAGS: &[Flag] = &[
    Flag {
        setup: &[],
        command: &["init", "--domain={}"],
        valid: "example.com",
    },
    Flag {
        setup: &[],
        command: &["init", "--domain", "example.com", "--project-name={}"],
        valid: "my-operator",
    },
    Flag {
        setup: &[],
        command: &["init", "--domain", "example.com", "--repo={}"],
        valid: "https://github.com/example/op",
    },
    Flag {
        setup: &[],
        command: &["init", "--domain", "example.com", "--owner={}"],
        valid: "The Authors",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group={}",
            "--version",
            "v1",
            "--kind",
            "Cache",
        ],
        valid: "apps",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version={}",
            "--kind",
            "Cache",
        ],
        valid: "v1beta1",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind={}",
        ],
        valid: "Cache",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--plural={}",
        ],
        valid: "caches",
    },
    Flag {
        setup: &[INIT, APP],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--resource=false",
            "--controller-name={}",
        ],
        valid: "cache-backup",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--image={}",
        ],
        valid: "registry.example.com:5000/team/cache:v1.2",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--image",
            "nginx",
            "--image-container-command={}",
        ],
        valid: "nginx,-g,daemon off;",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--image",
            "nginx",
            "--image-container-port={}",
        ],
        valid: "8080",
    },
    Flag {
        setup: &[INIT],
        command: &[
            "create",
            "api",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--image",
            "nginx",
            "--run-as-user={}",
        ],
        valid: "1001",
    },
    Flag {
        setup: &[INIT, APP],
        command: &[
            "create",
            "webhook",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--defaulting",
            "--defaulting-path={}",
        ],
        valid: "/default-cache",
    },
    Flag {
        setup: &[INIT, APP],
        command: &[
            "create",
            "webhook",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--programmatic-validation",
            "--validation-path={}",
        ],
        valid: "/validate-cache",
    },
    Flag {
        setup: &[INIT, APP, V2],
        command: &[
            "create",
            "webhook",
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Cache",
            "--conversion",
            "--spoke={}",
        ],
        valid: "v2",
    },
    Flag {
        setup: &[INIT, APP],
        command: &["edit", "--owner={}"],
        valid: "The Authors",
    },
];

/// The characters a terminal would act on, other than the line end.
fn has_raw_control(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n')
}

/// Checks the files a run accepted: they read as what they are.
fn check_accepted(root: &Path, before: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let after = snapshot(root);
    for (path, bytes) in &after {
        if before.get(path) == Some(bytes) || bytes.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(bytes)
            .unwrap_or_else(|_| panic!("{what}: {} is not UTF-8", path.display()));
        let shown = path.display();
        match path.extension().and_then(|e| e.to_str()) {
            Some("rs") => {
                if let Err(error) = syn::parse_file(text) {
                    panic!("{what}: {shown} does not parse: {error}\n{text}");
                }
            }
            Some("yaml") | Some("yml") => {
                for document in serde_yaml::Deserializer::from_str(text) {
                    if let Err(error) =
                        <serde_yaml::Value as serde::Deserialize>::deserialize(document)
                    {
                        panic!("{what}: {shown} is not YAML: {error}\n{text}");
                    }
                }
            }
            _ => {}
        }
        if path.file_name().is_some_and(|name| name == "PROJECT") {
            for document in serde_yaml::Deserializer::from_str(text) {
                <serde_yaml::Value as serde::Deserialize>::deserialize(document)
                    .unwrap_or_else(|error| panic!("{what}: PROJECT is not YAML: {error}\n{text}"));
            }
        }
    }
    // Cargo reads the manifests it was given.
    if after
        .keys()
        .any(|path| path.ends_with("Cargo.toml") && before.get(path) != after.get(path))
    {
        let output = Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
            ])
            .current_dir(root)
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "{what}: cargo does not read the manifests: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The next command reads PROJECT (and the workspace manifest) back.
    let output = Command::new(env!("CARGO_BIN_EXE_rsbuilder"))
        .args(["edit", "--dry-run"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{what}: the next command does not read the project: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_flag_that_reaches_a_file_builds_or_is_refused_with_the_tree_unchanged() {
    let cases = cases();
    let mut random = Random(0x005e_ed0f_4a57_11e5);
    let (mut accepted, mut refused) = (0, 0);
    for flag in FLAGS {
        let base = Workspace::new("hostile-operator");
        for args in flag.setup {
            base.run(args).success();
        }
        let mut accepted_here = 0;
        for case in 0..cases {
            // The valid value first, so that every flag is seen accepted once; then the valid
            // value with each classic breaker; then random values.
            let value = match case {
                0 => flag.valid.to_owned(),
                _ if case <= BREAKERS.len() => format!("{}{}", flag.valid, BREAKERS[case - 1]),
                _ => random.value(flag.valid),
            };
            let args: Vec<String> = flag
                .command
                .iter()
                .map(|arg| arg.replace("{}", &value))
                .collect();
            let what = format!("`rsbuilder {}` (value {value:?})", args.join(" "));
            let ws = Workspace::new("hostile-operator");
            copy_tree(base.root(), ws.root());
            let before = ws.snapshot();
            let output = Command::new(env!("CARGO_BIN_EXE_rsbuilder"))
                .args(&args)
                .current_dir(ws.root())
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                !has_raw_control(&stderr),
                "{what}: raw control characters in {stderr:?}"
            );
            match output.status.code() {
                Some(0) => {
                    check_accepted(ws.root(), &before, &what);
                    accepted += 1;
                    accepted_here += 1;
                }
                Some(1) | Some(2) => {
                    if output.status.code() == Some(1) {
                        assert!(
                            stderr.contains("error: ") && stderr.contains("\nhelp: "),
                            "{what}: a refusal without an error and a help line:\n{stderr}"
                        );
                    }
                    assert!(
                        before == ws.snapshot(),
                        "{what}: refused, but the tree changed:\n{stderr}"
                    );
                    refused += 1;
                }
                other => panic!("{what}: exit {other:?}:\n{stderr}"),
            }
        }
        assert!(
            accepted_here > 0,
            "{:?}: no value was accepted, not even {:?}",
            flag.command,
            flag.valid
        );
    }
    println!("hostile values: {accepted} accepted, {refused} refused");
    assert!(refused > 0 && accepted > FLAGS.len());
}
