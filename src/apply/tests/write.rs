use super::*;

/// The handlers that give Ctrl-C its default action back after a write are installed once
/// for the process, around one flag: installed again at each write, an earlier write's
/// handler would end the process during a later one. (`tests/it/crash.rs` sends the
/// signals.)
#[test]
fn one_flag_gives_the_signals_their_default_action_back() {
    assert!(std::ptr::eq(signal_defaults(), signal_defaults()));
}

#[test]
fn undo_leaves_a_file_that_was_never_changed_as_it_is() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join(UNDO_DIR)).unwrap();
    fs::write(root.join(UNDO_DIR).join("same.txt"), "old").unwrap();
    fs::write(root.join("same.txt"), "old").unwrap();
    let inode = fs::metadata(root.join("same.txt")).unwrap().ino();
    let failures = undo(root, &[Entry::Replace("same.txt".into())]);
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(
        fs::metadata(root.join("same.txt")).unwrap().ino(),
        inode,
        "not written again"
    );
}

/// `apply_then`: the second part sees the tree the first leaves; both are written, or,
/// when the second fails, neither: a file both parts write gets its first bytes back, a
/// file the first made is gone, and the journal is removed.
#[test]
fn a_write_in_two_parts_is_one_write() {
    let dir = with_files(&[("merged.txt", "old"), ("role.yaml", "old role")]);
    let root = dir.path();
    let before = snapshot(root);
    let first = || {
        regenerated(&[
            ("merged.txt", "merged"),
            ("role.yaml", "merged role"),
            ("new/made.txt", "made"),
        ])
    };
    let error = apply_then(root, first(), &[], |root| {
        assert_eq!(read(root.join("merged.txt")), "merged");
        // A file the first part wrote, written again: the undo's copy keeps the first bytes.
        fs::write(root.join("role.yaml"), "half").unwrap();
        anyhow::bail!("generate failed")
    })
    .unwrap_err();
    assert_eq!(format!("{error:#}"), "generate failed");
    assert_eq!(snapshot(root), before);

    // The first part, then a second that writes `files`.
    let both = |files: &[(&str, &str)]| {
        let second = regenerated(files);
        apply_then(root, first(), &[], |_| Ok(second))
    };
    let error = both(&[
        ("role.yaml", "generated role"),
        ("new", "a file where a folder is"),
    ])
    .unwrap_err();
    assert!(
        format!("{error:#}").starts_with("`new` is a directory, where rsbuilder expects a file"),
        "{error:#}"
    );
    assert_eq!(snapshot(root), before);

    let statuses = both(&[("role.yaml", "generated role"), ("merged.txt", "merged")]).unwrap();
    let statuses: Vec<(&str, &str)> = statuses
        .iter()
        .map(|(verb, path)| (*verb, path.to_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("updated", "merged.txt"),
            ("created", "new/made.txt"),
            ("updated", "role.yaml"),
        ]
    );
    assert_eq!(read(root.join("merged.txt")), "merged");
    assert_eq!(read(root.join("role.yaml")), "generated role");
    assert_eq!(read(root.join("new/made.txt")), "made");
    assert!(!root.join(JOURNAL).exists() && !root.join(UNDO_DIR).exists());
}

/// Ctrl-C while the second part is planned stops the write, even when that part changes
/// nothing: the first part is undone.
#[test]
fn an_interruption_while_the_second_part_is_planned_undoes_the_first() {
    let dir = with_files(&[("a.txt", "old")]);
    let root = dir.path();
    let before = snapshot(root);
    let changes = resolve(
        &OnDisk(root),
        regenerated(&[("a.txt", "new")]),
        Options {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    let interrupted = AtomicBool::new(false);
    let mut next = |_: &Path| -> anyhow::Result<Vec<Change>> {
        interrupted.store(true, Ordering::SeqCst);
        Ok(Vec::new())
    };
    let Err(error) = write_phases(root, &changes, Some((&[], &mut next)), &interrupted) else {
        panic!("the write went on after Ctrl-C");
    };
    assert_eq!(error.to_string(), "interrupted");
    assert_eq!(snapshot(root), before);
}

/// A file the second part writes by itself (cargo's lock) is put back with the rest.
#[test]
fn a_file_the_second_part_writes_itself_is_undone_too() {
    let dir = with_files(&[("Cargo.lock", "locked")]);
    let root = dir.path();
    let before = snapshot(root);
    let plan = regenerated(&[("Cargo.toml", "bumped")]);
    let error = apply_then(
        root,
        plan,
        &[Path::new("Cargo.lock"), Path::new("new.lock")],
        |root| {
            fs::write(root.join("Cargo.lock"), "resolved again")?;
            fs::write(root.join("new.lock"), "made")?;
            anyhow::bail!("crdgen failed")
        },
    )
    .unwrap_err();
    assert_eq!(error.to_string(), "crdgen failed");
    assert_eq!(snapshot(root), before);
}

/// A file a write changes twice is journaled once: the undo of both gives its first bytes.
#[test]
fn a_file_changed_twice_is_journaled_once() {
    let dir = with_files(&[("a.txt", "first")]);
    let root = dir.path();
    let mut journal = Journal::begin(root).unwrap();
    journal.record(Entry::Replace("a.txt".into())).unwrap();
    fs::write(root.join("a.txt"), "second").unwrap();
    journal.record(Entry::Replace("a.txt".into())).unwrap();
    journal.record(Entry::Create("b.txt".into())).unwrap();
    journal.record(Entry::Remove("b.txt".into())).unwrap();
    assert_eq!(
        journal.entries,
        [
            Entry::Replace("a.txt".into()),
            Entry::Create("b.txt".into())
        ]
    );
    assert_eq!(read(root.join(UNDO_DIR).join("a.txt")), "first");
    assert_eq!(read(root.join(JOURNAL)), "replace\ta.txt\ncreate\tb.txt\n");
}

#[test]
fn undo_restores_what_it_can_and_names_every_failure_but_what_was_never_made() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("full")).unwrap();
    fs::write(root.join("full/kept.txt"), "kept").unwrap();
    fs::create_dir_all(root.join("a-folder.txt")).unwrap();
    fs::write(root.join("replaced.txt"), "new").unwrap();
    // A file where a folder of the entry would be: that folder was never made.
    fs::write(root.join("file.txt"), "").unwrap();
    fs::create_dir_all(root.join(UNDO_DIR).join("unreadable.txt")).unwrap();
    fs::write(root.join(UNDO_DIR).join("replaced.txt"), "old").unwrap();
    let entries = [
        Entry::Dir("full".into()),
        Entry::Dir("never".into()),
        Entry::Dir("file.txt/below".into()),
        Entry::Create("a-folder.txt".into()),
        Entry::Create("never.txt".into()),
        Entry::Replace("replaced.txt".into()),
        Entry::Replace("untouched.txt".into()),
        Entry::Remove("unreadable.txt".into()),
    ];
    let failures = undo(root, &entries);
    let named: Vec<&str> = failures
        .iter()
        .map(|failure| failure.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        named,
        [
            "failed to restore `unreadable.txt`",
            "failed to remove `a-folder.txt`",
            "failed to remove `full`",
        ],
        "{failures:#?}"
    );
    assert_eq!(read(root.join("replaced.txt")), "old");
    assert!(!root.join("untouched.txt").exists());
}

#[test]
fn writes_make_only_the_missing_folders_and_journal_what_they_replace() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::write(root.join("src/lib.rs"), "old").unwrap();
    let change = |path: &str, action| Change {
        path: path.into(),
        action,
        contents: format!("{path} new"),
        before: None,
    };
    let mut journal = Journal::begin(root).unwrap();
    let mut dirs = std::collections::HashSet::new();
    for change in [
        change("src/new/deep.rs", Action::Create),
        change("src/lib.rs", Action::Update),
        // Planned as a replacement, but gone by the time it is written: it is new.
        change("src/vanished.rs", Action::Overwrite),
    ] {
        write_one(root, &change, &mut journal, &mut dirs).unwrap();
    }
    let lines: Vec<String> = journal.entries.iter().map(Entry::line).collect();
    assert_eq!(
        lines.concat(),
        "dir\tsrc/new\ncreate\tsrc/new/deep.rs\nreplace\tsrc/lib.rs\ncreate\tsrc/vanished.rs\n"
    );
    assert_eq!(read(root.join("src/lib.rs")), "src/lib.rs new");
    assert_eq!(read(root.join(UNDO_DIR).join("src/lib.rs")), "old");
    assert_eq!(read(root.join("src/vanished.rs")), "src/vanished.rs new");
}

/// A file of the project is carried into a new tree whole, its folders made; what is not a
/// file there (missing, a folder) is not carried, and says so.
#[test]
fn carry_copies_a_file_of_the_tree_and_nothing_else() {
    let project = tempfile::tempdir().unwrap();
    fs::create_dir_all(project.path().join("dist/chart")).unwrap();
    fs::write(
        project.path().join("dist/install.yaml"),
        b"kind: List\n\xff",
    )
    .unwrap();
    let tree = crate::tree::OnDisk(project.path());
    let fresh = tempfile::tempdir().unwrap();
    assert!(carry(&tree, Path::new("dist/install.yaml"), fresh.path()).unwrap());
    assert_eq!(
        fs::read(fresh.path().join("dist/install.yaml")).unwrap(),
        b"kind: List\n\xff"
    );
    assert!(!carry(&tree, Path::new("dist/chart"), fresh.path()).unwrap());
    assert!(!carry(&tree, Path::new("dist/values.yaml"), fresh.path()).unwrap());
    assert!(!fresh.path().join("dist/chart").exists());
    assert!(!fresh.path().join("dist/values.yaml").exists());
}

#[test]
fn a_scratch_folder_is_new_and_gone_once_dropped() {
    let scratch = Scratch::new("test").unwrap();
    let other = Scratch::new("test").unwrap();
    assert_ne!(scratch.path(), other.path());
    let name = scratch.path().file_name().unwrap().to_string_lossy();
    assert!(name.starts_with("rsbuilder-test-"), "{name}");
    let file = scratch.write("a.txt", "text").unwrap();
    assert_eq!(read(&file), "text");
    let path = scratch.path().to_path_buf();
    drop(scratch);
    assert!(!path.exists());
    assert!(other.path().is_dir());
}

#[test]
fn a_journal_that_cannot_be_read_is_an_error_not_an_absence() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(JOURNAL)).unwrap();
    let error = recover(dir.path()).unwrap_err();
    assert_eq!(error.to_string(), format!("failed to read `{JOURNAL}`"));
    fs::remove_dir(dir.path().join(JOURNAL)).unwrap();
    recover(dir.path()).unwrap();
    // Copies that cannot be removed are an error too; copies never made are not.
    fs::write(dir.path().join(UNDO_DIR), "a file").unwrap();
    let error = recover(dir.path()).unwrap_err();
    assert_eq!(error.to_string(), format!("failed to remove `{UNDO_DIR}`"));
}

#[test]
fn writes_files_and_insertions() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan {
        files: vec![file(
            "a/b.yaml",
            "x: 1\n# +rsbuilder:scaffold:list\n",
            Policy::Owned,
        )],
        insertions: vec![Insertion {
            path: "a/b.yaml".into(),
            marker: "list".into(),
            fragment: "y: 2\n".into(),
            block: false,
        }],
        removals: Vec::new(),
        derived: Vec::new(),
    };
    apply(dir.path(), plan, Options::default()).unwrap();
    assert_eq!(
        read(dir.path().join("a/b.yaml")),
        "x: 1\ny: 2\n# +rsbuilder:scaffold:list\n"
    );
}

#[test]
fn conflicts_stop_everything_before_any_write() {
    let dir = with_files(&[("b.txt", "mine")]);
    let plan = Plan {
        files: vec![
            file("a.txt", "new", Policy::Owned),
            file("b.txt", "theirs", Policy::Owned),
        ],
        ..Plan::default()
    };
    let error = refused(dir.path(), plan);
    assert!(
        error.to_string().contains("`b.txt` already exists"),
        "{error}"
    );
}

#[test]
fn user_files_are_kept_even_when_forced() {
    let dir = with_files(&[("README.md", "mine")]);
    let plan = || Plan {
        files: vec![file("README.md", "theirs", Policy::KeepExisting)],
        ..Plan::default()
    };
    apply(dir.path(), plan(), Options::default()).unwrap();
    assert_eq!(read(dir.path().join("README.md")), "mine");
    apply(
        dir.path(),
        plan(),
        Options {
            force: true,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(read(dir.path().join("README.md")), "mine");
}

#[test]
fn a_failed_write_undoes_the_earlier_ones() {
    let dir = with_files(&[("keep.txt", "old")]);
    // `z` is a file, so `z/late.txt` cannot be written after the others were.
    fs::write(dir.path().join("z"), "in the way").unwrap();
    let before = snapshot(dir.path());
    let plan = Plan {
        files: vec![
            file("a/deep/early.txt", "1", Policy::Owned),
            file("keep.txt", "new", Policy::Owned),
            file("z/late.txt", "2", Policy::Owned),
        ],
        ..Plan::default()
    };
    let error = apply(
        dir.path(),
        plan,
        Options {
            force: true,
            dry_run: false,
        },
    )
    .unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message.starts_with("failed to write `z/late.txt`; nothing was changed"),
        "{message}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_missing_marker_stops_everything() {
    let dir = with_files(&[("main.rs", "fn main() {}\n")]);
    let plan = Plan {
        files: vec![file("new.rs", "//! new\n", Policy::Owned)],
        insertions: vec![Insertion {
            path: "main.rs".into(),
            marker: "controllers".into(),
            fragment: "a();\n".into(),
            block: false,
        }],
        removals: Vec::new(),
        derived: Vec::new(),
    };
    let error = refused(dir.path(), plan);
    assert!(error.to_string().contains("`main.rs`"), "{error}");
}

#[test]
fn read_only_files_are_not_changed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("role.yaml");
    fs::write(&locked, "old").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o444)).unwrap();
    let plan = Plan {
        files: vec![
            file("a.yaml", "new", Policy::Owned),
            file("role.yaml", "new", Policy::Regenerated),
        ],
        ..Plan::default()
    };
    let error = refused(dir.path(), plan);
    assert_eq!(
        error.to_string(),
        "`role.yaml` is read-only, and rsbuilder would change it"
    );
}

#[test]
fn removals_delete_files_and_are_undone_with_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("old.rs"), [0xff, 0xfe, 0x00]).unwrap();
    fs::write(dir.path().join("z"), "in the way").unwrap();
    let before = snapshot(dir.path());
    let plan = || Plan {
        files: vec![file("z/late.txt", "2", Policy::Owned)],
        insertions: Vec::new(),
        removals: vec!["old.rs".into(), "never-there.rs".into()],
        derived: Vec::new(),
    };
    apply(dir.path(), plan(), Options::default()).unwrap_err();
    assert_eq!(snapshot(dir.path()), before, "the removal was undone");

    fs::remove_file(dir.path().join("z")).unwrap();
    apply(dir.path(), plan(), Options::default()).unwrap();
    assert!(!dir.path().join("old.rs").exists());
    assert!(dir.path().join("z/late.txt").exists());
}

/// The folders a removal empties go with it, deepest first; one that holds anything else,
/// and the project's root, stay.
#[test]
fn folders_the_removals_empty_are_removed_and_no_others() {
    let dir = with_files(&[
        ("runtime/src/webhook/certs.rs", "1"),
        ("runtime/src/lib.rs", "2"),
        ("runtime/CHECKSUMS", "3"),
        ("keep/a.rs", "4"),
        ("keep/b.rs", "5"),
        ("empty/before/.gitkeep", ""),
    ]);
    fs::remove_file(dir.path().join("empty/before/.gitkeep")).unwrap();
    let plan = Plan {
        files: Vec::new(),
        insertions: Vec::new(),
        removals: vec![
            "runtime/src/webhook/certs.rs".into(),
            "runtime/src/lib.rs".into(),
            "runtime/CHECKSUMS".into(),
            "keep/a.rs".into(),
        ],
        derived: Vec::new(),
    };
    apply(dir.path(), plan, Options::default()).unwrap();
    assert!(!dir.path().join("runtime").exists());
    assert!(dir.path().join("keep/b.rs").exists());
    // Not emptied by this command: left as it was.
    assert!(dir.path().join("empty/before").is_dir());
    assert!(dir.path().is_dir());
}

/// A command killed half way leaves its journal; the next command's lock undoes it.
#[test]
fn an_interrupted_command_is_undone_by_the_next_one() {
    let dir = with_files(&[("main.rs", "old main"), ("gone.rs", "removed")]);
    let root = dir.path();
    let before = snapshot(root);
    {
        let mut journal = Journal::begin(root).unwrap();
        journal.record(Entry::Replace("main.rs".into())).unwrap();
        write_atomically(&root.join("main.rs"), b"new main").unwrap();
        journal.record(Entry::Dir("config".into())).unwrap();
        fs::create_dir(root.join("config")).unwrap();
        journal
            .record(Entry::Create("config/a.yaml".into()))
            .unwrap();
        // Killed between the temporary file and its rename.
        fs::write(temporary(&root.join("config/a.yaml")), "half").unwrap();
        journal.record(Entry::Remove("gone.rs".into())).unwrap();
        fs::remove_file(root.join("gone.rs")).unwrap();
        journal.record(Entry::Create("never.rs".into())).unwrap();
    }
    assert_ne!(snapshot(root), before);
    let lock = lock(root).unwrap();
    assert_eq!(snapshot(root), before, "the interrupted command was undone");
    drop(lock);
    // Nothing to undo the next time.
    drop(super::lock(root).unwrap());
    assert_eq!(snapshot(root), before);
}

/// Undoing goes on past a file it cannot restore, and names every one.
#[test]
fn undo_goes_on_past_a_failure_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir(root.join("sub")).unwrap();
    fs::write(root.join("sub/a.rs"), "old a").unwrap();
    fs::write(root.join("b.rs"), "old b").unwrap();
    let mut journal = Journal::begin(root).unwrap();
    journal.record(Entry::Replace("b.rs".into())).unwrap();
    fs::write(root.join("b.rs"), "new b").unwrap();
    journal.record(Entry::Replace("sub/a.rs".into())).unwrap();
    // `sub/a.rs` cannot be restored: its folder became a file.
    fs::remove_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub"), "in the way").unwrap();
    journal.record(Entry::Create("c.rs".into())).unwrap();
    fs::write(root.join("c.rs"), "new c").unwrap();
    let failures = undo(root, &journal.entries);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].starts_with("failed to restore `sub/a.rs`"),
        "{failures:?}"
    );
    assert_eq!(read(root.join("b.rs")), "old b");
    assert!(!root.join("c.rs").exists());
}

#[test]
fn writes_through_symbolic_links_are_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::os::unix::fs::symlink(outside.path(), root.join("config")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("missing"), root.join("dangling.rs")).unwrap();
    for planned in ["config/x.yaml", "dangling.rs"] {
        let plan = Plan {
            files: vec![
                file("a.rs", "a", Policy::Owned),
                file(planned, "x", Policy::Owned),
            ],
            ..Plan::default()
        };
        let error = refused(root, plan);
        let link = planned.split('/').next().unwrap();
        assert!(
            error
                .to_string()
                .starts_with(&format!("`{link}` is a symbolic link")),
            "{error}"
        );
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}

/// The holder of a lock is read from `/proc/locks`: the pid on the FLOCK line of the file,
/// not a waiter's line, nor another file's or another device's.

#[test]
fn a_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan {
        files: vec![file("a.txt", "new", Policy::Owned)],
        ..Plan::default()
    };
    apply(
        dir.path(),
        plan,
        Options {
            force: false,
            dry_run: true,
        },
    )
    .unwrap();
    assert!(!dir.path().join("a.txt").exists());
}
