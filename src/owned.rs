//! The files besides the runtime that rsbuilder writes into a project and keeps up to date: the
//! harness under `hack/` (the emulated API server and the local end-to-end checks) and the api
//! crate's schema plumbing. `hack/CHECKSUMS` (`sha256sum` format, paths from the project's
//! root, so `sha256sum -c hack/CHECKSUMS` checks them) lists each as `init` or the last
//! `upgrade` wrote it; `upgrade` replaces a file that still matches, and refuses, naming it,
//! one the user changed, unless `--force`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the checksums of the owned files are kept.
pub const CHECKSUMS: &str = "hack/CHECKSUMS";

/// The files rsbuilder owns outside `runtime/`, as `init` writes them.
pub const FILES: &[&str] = &[
    "api/src/schema.rs",
    "hack/certificates.py",
    "hack/e2e_local.py",
    "hack/e2e_webhooks.py",
    "hack/kube_emulator.py",
    "hack/run_webhooks.py",
];

/// Whether rsbuilder owns the file at `path` (relative to the project's root).
pub fn is_owned(path: &Path) -> bool {
    FILES.iter().any(|owned| Path::new(owned) == path)
}

/// The text of `hack/CHECKSUMS` for the owned files among `files` (path → text).
pub fn checksums<'a>(files: impl IntoIterator<Item = (&'a Path, &'a str)>) -> String {
    let mut lines: Vec<(String, String)> = files
        .into_iter()
        .filter(|(path, _)| is_owned(path))
        .map(|(path, text)| {
            let shown = path.to_string_lossy().replace('\\', "/");
            (shown, crate::runtime::sha256(text.as_bytes()))
        })
        .collect();
    lines.sort();
    let mut out = String::new();
    for (path, hash) in lines {
        let _ = writeln!(out, "{hash}  {path}");
    }
    out
}

/// What `upgrade` does with the owned files.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refresh {
    /// The files to write, and `hack/CHECKSUMS` when it changes.
    pub files: BTreeMap<PathBuf, String>,
    /// Files the user changed since rsbuilder wrote them (they do not match `hack/CHECKSUMS`):
    /// replaced only with `force`.
    pub edited: Vec<String>,
    /// Files `hack/CHECKSUMS` does not list (an rsbuilder older than it wrote them), whose
    /// edits cannot be told from its older text: replaced only with `force`.
    pub unlisted: Vec<String>,
    /// Files left as they are: missing ones, and without `force` the unlisted ones.
    pub kept: Vec<String>,
}

/// Plans the refresh of the owned files: `current` is each owned file as it is (`None` when
/// missing), `listed` the text of `hack/CHECKSUMS` (`None` when missing), and `new` each file
/// as this rsbuilder writes it. With `force`, edited and unlisted files are replaced too. A
/// checkout that turned line ends into CRLF changed nothing.
pub fn refresh(
    current: &BTreeMap<PathBuf, Option<Vec<u8>>>,
    listed: Option<&str>,
    new: &BTreeMap<PathBuf, String>,
    force: bool,
) -> Refresh {
    let listed = listed
        .and_then(crate::runtime::parse_checksums)
        .unwrap_or_default();
    let mut refresh = Refresh::default();
    let mut present = BTreeMap::new();
    for (path, text) in new {
        let shown = path.to_string_lossy().replace('\\', "/");
        let Some(Some(bytes)) = current.get(path) else {
            refresh.kept.push(shown);
            continue;
        };
        let bytes = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
        if bytes == *text {
            present.insert(path.clone(), text.clone());
            continue;
        }
        match listed.get(Path::new(&shown)) {
            Some(hash) if *hash == crate::runtime::sha256(bytes.as_bytes()) => {}
            Some(_) => refresh.edited.push(shown),
            None => {
                if !force {
                    refresh.kept.push(shown);
                    continue;
                }
                refresh.unlisted.push(shown);
            }
        }
        present.insert(path.clone(), text.clone());
        refresh.files.insert(path.clone(), text.clone());
    }
    if !refresh.edited.is_empty() && !force {
        refresh.files.clear();
        return refresh;
    }
    let sums = checksums(present.iter().map(|(p, t)| (p.as_path(), t.as_str())));
    let written = current
        .get(Path::new(CHECKSUMS))
        .and_then(Option::as_ref)
        .map(|bytes| bytes.as_slice());
    if written != Some(sums.as_bytes()) {
        refresh.files.insert(PathBuf::from(CHECKSUMS), sums);
    }
    refresh
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new() -> BTreeMap<PathBuf, String> {
        [
            ("hack/e2e_local.py", "new harness\n"),
            ("api/src/schema.rs", "new schema\n"),
        ]
        .into_iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_owned()))
        .collect()
    }

    fn current(files: &[(&str, Option<&str>)]) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
        files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.map(|t| t.as_bytes().to_vec())))
            .collect()
    }

    fn sums(files: &[(&str, &str)]) -> String {
        checksums(files.iter().map(|(p, t)| (Path::new(*p), *t)))
    }

    #[test]
    fn checksums_list_the_owned_files_sorted_as_sha256sum_writes_them() {
        let text = sums(&[
            ("hack/e2e_local.py", "b"),
            ("operator/src/main.rs", "x"),
            ("api/src/schema.rs", "a"),
        ]);
        assert_eq!(
            text,
            format!(
                "{}  api/src/schema.rs\n{}  hack/e2e_local.py\n",
                crate::runtime::sha256(b"a"),
                crate::runtime::sha256(b"b")
            )
        );
        assert!(is_owned(Path::new("hack/kube_emulator.py")));
        assert!(!is_owned(Path::new("hack/mine.py")));
    }

    #[test]
    fn untouched_files_are_refreshed_and_their_checksums_with_them() {
        let old = [
            ("hack/e2e_local.py", "old harness\n"),
            ("api/src/schema.rs", "new schema\n"),
        ];
        let listed = sums(&old);
        let mut on_disk = current(&[
            ("hack/e2e_local.py", Some("old harness\n")),
            ("api/src/schema.rs", Some("new schema\n")),
        ]);
        on_disk.insert(PathBuf::from(CHECKSUMS), Some(listed.clone().into_bytes()));
        let refresh = refresh(&on_disk, Some(&listed), &new(), false);
        assert_eq!(refresh.edited, Vec::<String>::new());
        assert_eq!(refresh.kept, Vec::<String>::new());
        let written: Vec<&str> = refresh.files.keys().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(written, ["hack/CHECKSUMS", "hack/e2e_local.py"]);
        assert_eq!(
            refresh.files[Path::new(CHECKSUMS)],
            sums(&[
                ("hack/e2e_local.py", "new harness\n"),
                ("api/src/schema.rs", "new schema\n")
            ])
        );
    }

    #[test]
    fn an_edited_file_stops_the_refresh_unless_forced() {
        let listed = sums(&[
            ("hack/e2e_local.py", "old harness\n"),
            ("api/src/schema.rs", "old schema\n"),
        ]);
        let on_disk = current(&[
            ("hack/e2e_local.py", Some("my harness\n")),
            ("api/src/schema.rs", Some("old schema\n")),
        ]);
        let refused = refresh(&on_disk, Some(&listed), &new(), false);
        assert_eq!(refused.edited, ["hack/e2e_local.py"]);
        assert!(refused.files.is_empty(), "{:?}", refused.files);
        let forced = refresh(&on_disk, Some(&listed), &new(), true);
        assert_eq!(forced.edited, ["hack/e2e_local.py"]);
        assert!(forced.unlisted.is_empty());
        assert_eq!(
            forced.files[Path::new("hack/e2e_local.py")],
            "new harness\n"
        );
        assert_eq!(forced.files[Path::new("api/src/schema.rs")], "new schema\n");
    }

    #[test]
    fn files_older_than_the_checksums_and_missing_ones_are_kept() {
        let on_disk = current(&[
            ("hack/e2e_local.py", Some("older harness\n")),
            ("api/src/schema.rs", None),
        ]);
        let refresh_ = refresh(&on_disk, None, &new(), false);
        assert_eq!(refresh_.kept, ["api/src/schema.rs", "hack/e2e_local.py"]);
        assert!(refresh_.edited.is_empty());
        // Only what can be vouched for is listed: nothing here.
        assert_eq!(refresh_.files[Path::new(CHECKSUMS)], "");
        // The same text as this rsbuilder's is listed, and --force replaces the older one.
        let on_disk = current(&[
            ("hack/e2e_local.py", Some("older harness\n")),
            ("api/src/schema.rs", Some("new schema\n")),
        ]);
        let refresh_ = refresh(&on_disk, None, &new(), false);
        assert_eq!(refresh_.kept, ["hack/e2e_local.py"]);
        assert_eq!(
            refresh_.files[Path::new(CHECKSUMS)],
            sums(&[("api/src/schema.rs", "new schema\n")])
        );
        let forced = refresh(&on_disk, None, &new(), true);
        assert!(forced.kept.is_empty());
        assert_eq!(forced.unlisted, ["hack/e2e_local.py"]);
        assert_eq!(
            forced.files[Path::new("hack/e2e_local.py")],
            "new harness\n"
        );
    }

    /// A file that the list does not name stays unlisted on the next run, never "edited".
    #[test]
    fn a_file_kept_once_is_kept_again() {
        let listed = sums(&[("api/src/schema.rs", "new schema\n")]);
        let mut on_disk = current(&[
            ("hack/e2e_local.py", Some("older harness\n")),
            ("api/src/schema.rs", Some("new schema\n")),
        ]);
        on_disk.insert(PathBuf::from(CHECKSUMS), Some(listed.clone().into_bytes()));
        let refresh_ = refresh(&on_disk, Some(&listed), &new(), false);
        assert_eq!(refresh_.kept, ["hack/e2e_local.py"]);
        assert!(refresh_.edited.is_empty());
        assert!(refresh_.files.is_empty(), "{:?}", refresh_.files);
    }

    #[test]
    fn crlf_line_ends_change_nothing() {
        let listed = sums(&[
            ("hack/e2e_local.py", "old harness\n"),
            ("api/src/schema.rs", "new schema\n"),
        ]);
        let on_disk = current(&[
            ("hack/e2e_local.py", Some("old harness\r\n")),
            ("api/src/schema.rs", Some("new schema\r\n")),
        ]);
        let refresh_ = refresh(&on_disk, Some(&listed), &new(), false);
        assert!(refresh_.edited.is_empty(), "{:?}", refresh_.edited);
        assert_eq!(
            refresh_.files[Path::new("hack/e2e_local.py")],
            "new harness\n"
        );
        assert!(!refresh_.files.contains_key(Path::new("api/src/schema.rs")));
    }

    #[test]
    fn an_up_to_date_project_has_nothing_to_write() {
        let listed = sums(&[
            ("hack/e2e_local.py", "new harness\n"),
            ("api/src/schema.rs", "new schema\n"),
        ]);
        let mut on_disk = current(&[
            ("hack/e2e_local.py", Some("new harness\n")),
            ("api/src/schema.rs", Some("new schema\n")),
        ]);
        on_disk.insert(PathBuf::from(CHECKSUMS), Some(listed.clone().into_bytes()));
        assert_eq!(
            refresh(&on_disk, Some(&listed), &new(), false),
            Refresh::default()
        );
    }
}
