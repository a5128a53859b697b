//! Where a project takes the runtime crate from (`init --runtime`, `edit --runtime`), and the
//! line of its workspace `Cargo.toml` that says so.
//!
//! - `vendored`: a copy in `runtime/`, with its `CHECKSUMS` (the default until the crate is on
//!   crates.io);
//! - `registry`: `rsbuilder-runtime = "=X.Y.Z"`, the version of this rsbuilder;
//! - `path:DIR`: a checkout of the crate, for developing the runtime and a project together;
//! - `git:URL[#REV]`: the crate from a git repository, at a commit, tag or branch.

use std::fmt;
use std::path::Path;

use crate::ui::UserError;

/// The variable that tells `init`, run by `alpha generate` or `alpha update` to scaffold a
/// project again elsewhere, where the project is: a relative `path:` is checked from there.
pub const ROOT_VARIABLE: &str = "RSBUILDER_RUNTIME_ROOT";

/// What `--runtime` accepts, for help lines.
pub const FORMS: &str = "`vendored`, `registry`, `path:DIR` or `git:URL[#REV]`";

/// Where a project takes the runtime crate from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Form {
    /// A copy of the crate in `runtime/`.
    #[default]
    Vendored,
    /// crates.io, at this rsbuilder's version exactly.
    Registry,
    /// A directory that holds the crate, relative to the project or absolute.
    Path(String),
    /// A git repository, at `rev` when given.
    Git {
        /// The repository's URL.
        url: String,
        /// A commit, tag or branch.
        rev: Option<String>,
    },
}

impl Form {
    /// The form `text` names, as `--runtime` and PROJECT spell it.
    pub fn parse(text: &str) -> Result<Self, UserError> {
        let help = || format!("pass --runtime={FORMS}");
        let form = match text.split_once(':') {
            _ if text == "vendored" => Self::Vendored,
            _ if text == "registry" => Self::Registry,
            Some(("path", dir)) => {
                let trimmed = dir.trim_end_matches('/');
                check_text("path:", trimmed, "path:../rsbuilder/runtime")?;
                Self::Path(trimmed.to_owned())
            }
            Some(("git", rest)) => {
                let (url, rev) = match rest.rsplit_once('#') {
                    Some((url, rev)) => (url, Some(rev)),
                    None => (rest, None),
                };
                check_text(
                    "git:",
                    url,
                    "git:https://github.com/rsbuilder/rsbuilder#v0.1.0",
                )?;
                let remote = ["https://", "http://", "ssh://", "git://", "file://", "git@"];
                if !remote.iter().any(|scheme| url.starts_with(scheme)) {
                    return Err(UserError::new(format!(
                        "`{}` is not a git URL: it must start with https://, ssh://, git://, file:// or git@",
                        crate::ui::shown(url)
                    ))
                    .help("pass --runtime=git:https://github.com/rsbuilder/rsbuilder#v0.1.0"));
                }
                if let Some(rev) = rev {
                    let allowed = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
                    if rev.is_empty() || !rev.chars().all(allowed) {
                        return Err(UserError::new(format!(
                            "`{}` is not a git revision: a commit, tag or branch is letters, digits and `._/-`",
                            crate::ui::shown(rev)
                        ))
                        .help("pass --runtime=git:URL#v0.1.0, or leave `#` out for the default branch"));
                    }
                }
                Self::Git {
                    url: url.to_owned(),
                    rev: rev.map(str::to_owned),
                }
            }
            _ => {
                return Err(UserError::new(format!(
                    "`{}` is not a form of the runtime crate: it is {FORMS}",
                    crate::ui::shown(text)
                ))
                .help(help()));
            }
        };
        Ok(form)
    }

    /// Whether the project holds a copy of the crate in `runtime/`.
    pub fn is_vendored(&self) -> bool {
        *self == Self::Vendored
    }

    /// The value of `rsbuilder-runtime` in the workspace's `[workspace.dependencies]`, for a
    /// runtime at `version`, as TOML text.
    pub fn dependency(&self, version: &str) -> String {
        let mut table = toml_edit::InlineTable::new();
        match self {
            Self::Vendored => {
                table.insert("path", super::DIR.into());
            }
            Self::Registry => return toml_edit::Value::from(format!("={version}")).to_string(),
            Self::Path(dir) => {
                table.insert("path", dir.as_str().into());
            }
            Self::Git { url, rev } => {
                table.insert("git", url.as_str().into());
                if let Some(rev) = rev {
                    table.insert("rev", rev.as_str().into());
                }
            }
        }
        table.fmt();
        toml_edit::Value::from(table).to_string()
    }

    /// The workspace `manifest` with its `rsbuilder-runtime` entry in `[workspace.dependencies]`
    /// set to this form's at `version`, its layout and comments kept.
    pub fn set_in(&self, manifest: &str, version: &str) -> Result<String, UserError> {
        let dependency = self.dependency(version);
        let mut document: toml_edit::DocumentMut = manifest.parse().map_err(|error| {
            UserError::new(format!("the workspace Cargo.toml is not TOML: {error}"))
                .help("correct Cargo.toml, then run the command again")
        })?;
        let entry = document
            .get_mut("workspace")
            .and_then(|w| w.get_mut("dependencies"))
            .and_then(|d| d.get_mut("rsbuilder-runtime"));
        let Some(toml_edit::Item::Value(value)) = entry else {
            return Err(UserError::new(
                "the workspace Cargo.toml has no `rsbuilder-runtime` in [workspace.dependencies]",
            )
            .help(format!(
                "add `rsbuilder-runtime = {dependency}` there, then run the command again"
            )));
        };
        let decor = value.decor().clone();
        *value = dependency
            .parse()
            .expect("a dependency this form writes is a TOML value");
        *value.decor_mut() = decor;
        Ok(document.to_string())
    }

    /// Checks what the form names from the project at `root`: a `path:` directory must hold the
    /// runtime crate at `version`, the version this rsbuilder writes projects for.
    pub fn check(&self, root: &Path, version: &str) -> Result<(), UserError> {
        let Self::Path(dir) = self else {
            return Ok(());
        };
        use crate::tree::Tree as _;
        let help =
            "pass --runtime=path:DIR with DIR the `runtime/` folder of an rsbuilder checkout";
        let read = crate::tree::OnDisk(root).read(&Path::new(dir).join("Cargo.toml"));
        let Ok(Some(manifest)) = read else {
            return Err(UserError::new(format!(
                "`{}` holds no Cargo.toml: --runtime=path:{dir} must name the rsbuilder-runtime crate",
                crate::ui::shown(dir)
            ))
            .help(help));
        };
        let name = crate::manifest::string(&manifest, "package", "name");
        if name.as_deref() != Some("rsbuilder-runtime") {
            return Err(UserError::new(format!(
                "`{}` holds the crate `{}`, not rsbuilder-runtime",
                crate::ui::shown(dir),
                crate::ui::shown(name.as_deref().unwrap_or("(no name)"))
            ))
            .help(help));
        }
        let found = crate::manifest::version(&manifest, "package");
        if found.as_deref() != Some(version) {
            return Err(UserError::new(format!(
                "`{}` holds rsbuilder-runtime {}, and this rsbuilder writes projects for {version}",
                crate::ui::shown(dir),
                found.as_deref().unwrap_or("(no version)")
            ))
            .help(format!(
                "check out the runtime at {version}, or use the rsbuilder of that checkout"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vendored => f.write_str("vendored"),
            Self::Registry => f.write_str("registry"),
            Self::Path(dir) => write!(f, "path:{dir}"),
            Self::Git { url, rev: None } => write!(f, "git:{url}"),
            Self::Git {
                url,
                rev: Some(rev),
            } => write!(f, "git:{url}#{rev}"),
        }
    }
}

/// Refuses an empty value, or one with whitespace, quotes or control characters, which would
/// not survive PROJECT or Cargo.toml as written.
fn check_text(prefix: &str, value: &str, example: &str) -> Result<(), UserError> {
    let bad = value
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'));
    if value.is_empty() || bad.is_some() {
        let rule = match bad {
            Some(c) => format!("it holds {c:?}"),
            None => "it is empty".to_owned(),
        };
        return Err(UserError::new(format!(
            "`--runtime={prefix}{}` cannot be used: {rule}",
            crate::ui::shown(value)
        ))
        .help(format!("pass --runtime={example}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_reads_back_as_written_and_gives_its_dependency() {
        for (text, dependency) in [
            ("vendored", r#"{ path = "runtime" }"#),
            ("registry", r#""=0.1.0""#),
            (
                "path:../rsbuilder/runtime",
                r#"{ path = "../rsbuilder/runtime" }"#,
            ),
            (
                "git:https://github.com/rsbuilder/rsbuilder",
                r#"{ git = "https://github.com/rsbuilder/rsbuilder" }"#,
            ),
            (
                "git:git@github.com:rsbuilder/rsbuilder.git#v0.1.0",
                r#"{ git = "git@github.com:rsbuilder/rsbuilder.git", rev = "v0.1.0" }"#,
            ),
        ] {
            let form = Form::parse(text).unwrap();
            assert_eq!(form.to_string(), text);
            assert_eq!(form.dependency("0.1.0"), dependency, "{text}");
            assert_eq!(form.is_vendored(), text == "vendored");
        }
        assert_eq!(Form::parse("path:dir/").unwrap(), Form::Path("dir".into()));
    }

    #[test]
    fn the_entry_is_set_in_place_with_its_comment_and_nothing_else() {
        let manifest = "[workspace]\nmembers = [\"api\"]\n\n[workspace.dependencies]\n# rsbuilder's code.\nrsbuilder-runtime = { path = \"runtime\" } # the copy\nkube = \"5.0.0\"\n";
        assert_eq!(
            Form::Registry.set_in(manifest, "0.2.0").unwrap(),
            manifest.replace("{ path = \"runtime\" }", "\"=0.2.0\"")
        );
        assert_eq!(Form::Vendored.set_in(manifest, "0.2.0").unwrap(), manifest);
        let error = Form::Registry
            .set_in("[workspace.dependencies]\nkube = \"5\"\n", "0.1.0")
            .unwrap_err();
        assert!(
            error.to_string().contains("has no `rsbuilder-runtime`"),
            "{error}"
        );
        assert_eq!(
            error.help_text(),
            Some("add `rsbuilder-runtime = \"=0.1.0\"` there, then run the command again")
        );
        let error = Form::Registry.set_in("[workspace", "0.1.0").unwrap_err();
        assert!(error.to_string().contains("is not TOML"), "{error}");
        assert!(error.help_text().is_some());
    }

    #[test]
    fn bad_forms_are_named_with_the_rule() {
        for (text, message) in [
            ("vendor", "`vendor` is not a form of the runtime crate"),
            ("crates.io", "is not a form"),
            ("", "is not a form"),
            ("path:", "it is empty"),
            ("path:/", "it is empty"),
            ("path:my dir", "it holds ' '"),
            ("path:a\"b", "it holds '\"'"),
            ("git:", "it is empty"),
            ("git:github.com/x/y", "is not a git URL"),
            ("git:https://x/y#", "is not a git revision"),
            ("git:https://x/y#a;b", "is not a git revision"),
        ] {
            let error = Form::parse(text).unwrap_err();
            assert!(error.to_string().contains(message), "{text}: {error}");
            assert!(error.help_text().is_some(), "{text}");
        }
    }

    #[test]
    fn a_path_must_hold_the_runtime_at_this_version() {
        let dir = tempfile::tempdir().unwrap();
        let form = Form::Path("rt".into());
        let error = form.check(dir.path(), "0.1.0").unwrap_err();
        assert!(error.to_string().contains("holds no Cargo.toml"), "{error}");
        std::fs::create_dir(dir.path().join("rt")).unwrap();
        let manifest = |name: &str, version: &str| {
            std::fs::write(
                dir.path().join("rt/Cargo.toml"),
                format!("[package]\nname = \"{name}\"\nversion = \"{version}\"\n"),
            )
            .unwrap();
        };
        manifest("kube", "0.1.0");
        let error = form.check(dir.path(), "0.1.0").unwrap_err();
        assert!(error.to_string().contains("the crate `kube`"), "{error}");
        manifest("rsbuilder-runtime", "0.2.0");
        let error = form.check(dir.path(), "0.1.0").unwrap_err();
        assert!(
            error.to_string().contains(
                "holds rsbuilder-runtime 0.2.0, and this rsbuilder writes projects for 0.1.0"
            ),
            "{error}"
        );
        manifest("rsbuilder-runtime", "0.1.0");
        form.check(dir.path(), "0.1.0").unwrap();
        Form::Registry.check(dir.path(), "0.1.0").unwrap();
    }
}
