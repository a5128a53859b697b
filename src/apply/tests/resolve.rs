use super::*;

#[test]
fn files_that_hold_their_planned_bytes_are_unchanged_and_project_is_written_last() {
    // The listing of the two files as they are.
    let listed = "src/owned.rs=\"same\"\nsrc/regenerated.rs=\"same\"\n";
    let tree = memory(&[
        ("PROJECT", "same"),
        ("src/owned.rs", "same"),
        ("src/regenerated.rs", "same"),
        ("listing.txt", listed),
    ]);
    let plan = Plan {
        files: vec![
            file("PROJECT", "same", Policy::Regenerated),
            file("src/owned.rs", "same", Policy::Owned),
            file("src/regenerated.rs", "same", Policy::Regenerated),
            file("src/z.rs", "new", Policy::Owned),
        ],
        derived: vec![listing()],
        ..Plan::default()
    };
    assert_eq!(
        actions(&tree, plan, false).unwrap(),
        [
            ("listing.txt".to_owned(), Action::Update),
            ("src/owned.rs".to_owned(), Action::Unchanged),
            ("src/regenerated.rs".to_owned(), Action::Unchanged),
            ("src/z.rs".to_owned(), Action::Create),
            ("PROJECT".to_owned(), Action::Unchanged),
        ]
    );
    // The listing as it will be: unchanged.
    let tree = memory(&[("listing.txt", listed)]);
    let files = ["src/owned.rs", "src/regenerated.rs"]
        .map(|path| file(path, "same", Policy::Owned))
        .into();
    let plan = Plan {
        files,
        derived: vec![listing()],
        ..Plan::default()
    };
    let actions = actions(&tree, plan, false).unwrap();
    assert_eq!(actions[0], ("listing.txt".to_owned(), Action::Unchanged));
}

#[test]
fn conflicts_are_named_in_one_refusal_with_its_help() {
    let tree = memory(&[("a.rs", "mine"), ("b.rs", "mine")]);
    let refusal = |paths: &[&str]| {
        let plan = Plan {
            files: paths
                .iter()
                .map(|path| file(path, "rsbuilder's", Policy::Owned))
                .collect(),
            ..Plan::default()
        };
        let error = actions(&tree, plan, false).unwrap_err();
        let error = error.downcast_ref::<UserError>().unwrap();
        format!("{error}\nhelp: {}", error.help_text().unwrap_or_default())
    };
    assert_eq!(
        refusal(&["a.rs"]),
        "`a.rs` already exists and would be overwritten\nhelp: pass --force to overwrite it"
    );
    assert_eq!(
        refusal(&["a.rs", "b.rs"]),
        "`a.rs`, `b.rs` already exist and would be overwritten\nhelp: pass --force to overwrite them"
    );
    let plan = Plan {
        files: vec![file("a.rs", "rsbuilder's", Policy::Owned)],
        ..Plan::default()
    };
    assert_eq!(
        actions(&tree, plan, true).unwrap(),
        [("a.rs".to_owned(), Action::Overwrite)]
    );
}

#[test]
fn the_view_lays_the_plans_changes_over_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    for name in ["kept", "gone", "locked"] {
        fs::write(dir.path().join(format!("src/{name}.rs")), name).unwrap();
    }
    let locked = dir.path().join("src/locked.rs");
    let mut permissions = fs::metadata(&locked).unwrap().permissions();
    permissions.set_readonly(true);
    fs::set_permissions(&locked, permissions).unwrap();
    let tree = OnDisk(dir.path());
    let change = |path: &str, action, contents: &str| {
        (
            PathBuf::from(path),
            Change {
                path: path.into(),
                action,
                contents: contents.into(),
                before: None,
            },
        )
    };
    let changes: BTreeMap<PathBuf, Change> = [
        change("src/new.rs", Action::Create, "new"),
        change("src/gone.rs", Action::Remove, ""),
    ]
    .into_iter()
    .collect();
    let view = View {
        tree: &tree,
        changes: &changes,
    };
    for (path, text) in [
        ("src/new.rs", Some("new")),
        ("src/gone.rs", None),
        ("src/kept.rs", Some("kept")),
        ("src/missing.rs", None),
    ] {
        let path = Path::new(path);
        assert_eq!(view.read(path).unwrap().as_deref(), text, "{path:?}");
        assert_eq!(view.is_file(path), text.is_some(), "{path:?}");
    }
    assert!(view.is_read_only(Path::new("src/locked.rs")));
    assert!(!view.is_read_only(Path::new("src/kept.rs")));
    assert_eq!(
        view.files_under(Path::new("src"), "rs").unwrap(),
        [
            PathBuf::from("src/kept.rs"),
            PathBuf::from("src/locked.rs"),
            PathBuf::from("src/new.rs")
        ]
    );
    assert_eq!(
        read_existing(dir.path(), Path::new("src/kept.rs"))
            .unwrap()
            .as_deref(),
        Some("kept")
    );
    assert_eq!(
        read_existing(dir.path(), Path::new("src/none.rs")).unwrap(),
        None
    );
}

/// A file whose write failed before it changed is left as it is by the undo: restoring it
/// would fail again where the write failed (an immutable file, a full disk), and report a
/// failure to undo although nothing changed.

#[test]
fn derived_files_see_the_tree_the_plan_leaves() {
    let mut tree = memory(&[
        ("src/a.rs", "a\n// +rsbuilder:scaffold:m\n"),
        ("src/kept.rs", "the user's"),
        ("src/gone.rs", "old"),
        ("listing.txt", "stale"),
    ]);
    let plan = Plan {
        files: vec![
            file("src/kept.rs", "the template's", Policy::IfMissing),
            file("src/new.rs", "new", Policy::Owned),
            file("src/other.txt", "not a source", Policy::Owned),
        ],
        insertions: vec![Insertion {
            path: "src/a.rs".into(),
            marker: "m".into(),
            fragment: "inserted\n".into(),
            block: false,
        }],
        removals: vec!["src/gone.rs".into()],
        derived: vec![listing()],
    };
    apply_in_memory(&mut tree, plan, Options::default()).unwrap();
    assert_eq!(
        tree.files[Path::new("listing.txt")],
        "src/a.rs=\"a\\ninserted\\n// +rsbuilder:scaffold:m\\n\"\n\
             src/kept.rs=\"the user's\"\n\
             src/new.rs=\"new\"\n"
    );
    assert!(!tree.files.contains_key(Path::new("src/gone.rs")));
}

/// A derived file that refuses the first line holding `bad`, by its number.
fn refusing() -> Derived {
    Derived::new("out.txt", |tree| {
        let text = tree.read(Path::new("src/a.rs"))?.unwrap_or_default();
        match text.lines().position(|line| line == "bad") {
            Some(at) => anyhow::bail!("bad at src/a.rs:{}", at + 1),
            None => Ok(text),
        }
    })
}

#[test]
fn a_derived_file_names_the_users_mistake_where_the_user_sees_it() {
    let insertion = |fragment: &str| Insertion {
        path: "src/a.rs".into(),
        marker: "m".into(),
        fragment: fragment.into(),
        block: false,
    };
    let plan = |fragment: &str| Plan {
        insertions: vec![insertion(fragment)],
        derived: vec![refusing()],
        ..Plan::default()
    };
    // The user's line 3 is line 4 once the plan inserts above it: the error names line 3.
    let mut tree = memory(&[("src/a.rs", "a\n// +rsbuilder:scaffold:m\nbad\n")]);
    let error = apply_in_memory(&mut tree, plan("first\n"), Options::default()).unwrap_err();
    assert_eq!(error.to_string(), "bad at src/a.rs:3");
    // A mistake only the plan brings can only be named in the file the plan leaves.
    let mut tree = memory(&[("src/a.rs", "a\n// +rsbuilder:scaffold:m\n")]);
    let error = apply_in_memory(&mut tree, plan("bad\n"), Options::default()).unwrap_err();
    assert_eq!(error.to_string(), "bad at src/a.rs:2");
    assert_eq!(tree.files.len(), 1, "nothing is written");
}
