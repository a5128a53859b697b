//! `rsbuilder create api`: what it adds to a project, and how it refuses bad input without
//! changing anything.

use crate::support::{Workspace, assert_refused, stderr};

fn project() -> Workspace {
    let ws = Workspace::new("otp-operator");
    ws.run(&["init", "--domain", "learn.com"]).success();
    ws
}

fn create(ws: &Workspace, extra: &[&str]) -> assert_cmd::assert::Assert {
    let mut args = vec!["create", "api"];
    args.extend_from_slice(extra);
    ws.run(&args)
}

/// Runs a failing `create api` and checks its message, exit code 1 and the untouched tree.
#[track_caller]
fn refuses(ws: &Workspace, args: &[&str], error: &str, help: &str) {
    let mut command = vec!["create", "api"];
    command.extend_from_slice(args);
    assert_refused(ws, &command, error, help);
}

const APPOTP: &[&str] = &["--group", "appotp", "--version", "v1", "--kind", "AppOTP"];

#[test]
fn a_kind_gets_types_a_controller_and_manifests() {
    let ws = project();
    let assert = create(&ws, APPOTP).success();
    let err = stderr(&assert);
    for line in [
        "created api/src/appotp/v1/app_otp.rs",
        "created config/crd/bases/appotp.learn.com_appotps.yaml",
        "created config/samples/appotp_v1_app_otp.yaml",
        "created config/rbac/appotp_app_otp_editor_role.yaml",
        "created operator/src/controllers/appotp/app_otp.rs",
        "created operator/tests/controllers/appotp/app_otp.rs",
        "created operator/tests/controllers/main.rs",
        "updated operator/src/main.rs",
        "updated config/rbac/role.yaml",
        "updated PROJECT",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    assert!(
        ws.read("operator/src/main.rs")
            .contains("        controllers::appotp::app_otp::registration(),\n")
    );
    assert!(
        ws.read("api/src/lib.rs")
            .contains("<appotp::v1::AppOTP as ::kube::CustomResourceExt>::crd(),")
    );
    assert!(
        ws.read("config/default/kustomization.yaml")
            .contains("\n- ../crd\n")
    );
    assert!(
        ws.read("config/rbac/role.yaml")
            .contains("  - appotps/finalizers\n")
    );
    let types = ws.read("api/src/appotp/v1/app_otp.rs");
    assert!(types.contains("plural = \"appotps\","), "{types}");
    assert!(types.contains("    namespaced,\n"), "{types}");
    let project = ws.read("PROJECT");
    assert!(
        project.contains("resources:\n- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n  domain: learn.com\n  group: appotp\n  kind: AppOTP\n  version: v1\n"),
        "{project}"
    );
}

#[test]
fn without_a_terminal_nothing_is_asked_and_both_are_scaffolded() {
    let ws = project();
    // `support` runs rsbuilder with an empty, non-terminal stdin: a prompt would fail or hang.
    create(
        &ws,
        &["--group", "ship", "--version", "v1", "--kind", "Captain"],
    )
    .success();
    assert!(ws.read("PROJECT").contains("  controller: true\n"));
    assert!(ws.root().join("api/src/ship/v1/captain.rs").exists());
}

#[test]
fn scaffolding_again_with_force_duplicates_nothing() {
    let ws = project();
    create(&ws, APPOTP).success();
    let first = ws.snapshot();
    let mut forced = APPOTP.to_vec();
    forced.push("--force");
    create(&ws, &forced).success();
    assert_eq!(ws.snapshot(), first);

    ws.write("api/src/appotp/v1/app_otp.rs", "// edited\n");
    let err = stderr(&create(&ws, &forced).success());
    assert!(
        err.contains("overwrote api/src/appotp/v1/app_otp.rs\n"),
        "{err}"
    );
    assert_eq!(ws.snapshot(), first);
}

/// `--force` scaffolds a kind again as PROJECT recorded it: with server-side apply, and with
/// its image and the image's options, unless a flag says otherwise (`--ssa=false`).
#[test]
fn force_scaffolds_a_kind_again_as_project_recorded_it() {
    let ws = project();
    let mut ssa = APPOTP.to_vec();
    ssa.push("--ssa");
    create(&ws, &ssa).success();
    let first = ws.snapshot();
    assert!(ws.read("PROJECT").contains("    ssa: true\n"));
    let mut forced = APPOTP.to_vec();
    forced.push("--force");
    create(&ws, &forced).success();
    assert_eq!(ws.snapshot(), first, "--force without --ssa keeps it");
    forced.push("--ssa=false");
    create(&ws, &forced).success();
    assert!(
        !ws.read("PROJECT").contains("ssa: true"),
        "--ssa=false drops it"
    );

    let ws = project();
    create(&ws, MEMCACHED).success();
    let first = ws.snapshot();
    let memcached = &MEMCACHED[..6];
    let mut forced = memcached.to_vec();
    forced.push("--force");
    create(&ws, &forced).success();
    assert_eq!(
        ws.snapshot(),
        first,
        "--force without --image keeps the image"
    );
    forced.push("--image-container-port=8080");
    create(&ws, &forced).success();
    assert!(
        ws.read("PROJECT").contains("containerPort: \"8080\""),
        "a flag given changes what it names: {}",
        ws.read("PROJECT")
    );
    assert!(ws.read("PROJECT").contains("memcached:1.6.26-alpine3.19"));
}

#[test]
fn a_second_version_joins_the_kinds_crd() {
    let ws = project();
    create(&ws, APPOTP).success();
    create(
        &ws,
        &[
            "--group",
            "appotp",
            "--version",
            "v2",
            "--kind",
            "AppOTP",
            "--controller=false",
        ],
    )
    .success();
    let crd = ws.read("config/crd/bases/appotp.learn.com_appotps.yaml");
    assert_eq!(crd.matches("\n    storage: true\n").count(), 1, "{crd}");
    assert_eq!(crd.matches("\n    storage: false\n").count(), 1, "{crd}");
    // Both versions, v1 first: `Option`'s order would take a missing v1 for a first one.
    let (v1, v2) = (crd.find("    name: v1\n"), crd.find("    name: v2\n"));
    assert!(matches!((v1, v2), (Some(v1), Some(v2)) if v1 < v2), "{crd}");
    assert!(
        ws.read("api/src/appotp/v2/app_otp.rs")
            .contains("    storage = false,\n")
    );
    assert_eq!(
        ws.read("config/crd/kustomization.yaml")
            .matches("appotps.yaml")
            .count(),
        1
    );

    // Its controller exists already, so it is not scaffolded unless asked.
    create(
        &ws,
        &["--group", "appotp", "--version", "v3", "--kind", "AppOTP"],
    )
    .success();
    assert!(!ws.read("PROJECT").contains(
        "  controller: true\n  domain: learn.com\n  group: appotp\n  kind: AppOTP\n  version: v3\n"
    ));
    refuses(
        &ws,
        &[
            "--group",
            "appotp",
            "--version",
            "v4",
            "--kind",
            "AppOTP",
            "--namespaced=false",
        ],
        "appotp.learn.com/v4, Kind=AppOTP would be cluster-scoped, but version v1 of it is namespaced",
        "pass `--namespaced=true`",
    );
}

#[test]
fn a_controller_can_come_after_its_types() {
    let ws = project();
    create(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v1",
            "--kind",
            "Loop",
            "--controller=false",
        ],
    )
    .success();
    assert!(!ws.root().join("operator/src/controllers/fleet").exists());
    create(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v1",
            "--kind",
            "Loop",
            "--resource=false",
            "--controller",
        ],
    )
    .success();
    let module = ws.read("operator/src/controllers/fleet/mod.rs");
    assert!(module.contains("pub mod r#loop;"), "{module}");
    assert!(
        ws.read("operator/src/main.rs")
            .contains("controllers::fleet::r#loop::registration(),")
    );
}

#[test]
fn bad_names_are_refused() {
    let ws = project();
    for (args, error, help) in [
        (
            &["--group", "appotp", "--version", "v1", "--kind", "appOTP"][..],
            "invalid kind `appOTP`: must be PascalCase",
            "pass `--kind AppOtp`",
        ),
        (
            &["--group", "appotp", "--version", "v1", "--kind", "app_otp"],
            "invalid kind `app_otp`: must be PascalCase",
            "pass `--kind AppOtp`",
        ),
        (
            &["--group", "appotp", "--version", "v1", "--kind", "Vec"],
            "invalid kind `Vec`: would shadow `Vec`",
            "the kind names the generated Rust type: choose another name for it",
        ),
        (
            &["--group", "appotp", "--version", "1", "--kind", "AppOTP"],
            "invalid version `1`: must look like `v1`, `v1beta1` or `v2alpha1`",
            "pass `--version v1`",
        ),
        (
            &["--group", "appotp", "--version", "V1", "--kind", "AppOTP"],
            "invalid version `V1`",
            "pass `--version v1`",
        ),
        (
            &["--group", "app_otp", "--version", "v1", "--kind", "AppOTP"],
            "invalid group `app_otp`",
            "pass `--group app-otp`",
        ),
        (
            &["--group", "AppOTP", "--version", "v1", "--kind", "AppOTP"],
            "invalid group `AppOTP`",
            "pass `--group appotp`",
        ),
        (
            &[
                "--group",
                "appotp",
                "--version",
                "v1",
                "--kind",
                "AppOTP",
                "--plural",
                "App_OTPs",
            ],
            "invalid plural `App_OTPs`",
            "pass `--plural app-otps`",
        ),
        (
            &[
                "--group",
                "appotp",
                "--version",
                "v1",
                "--kind",
                "AppOTP",
                "--resource=false",
                "--controller=false",
            ],
            "nothing to scaffold",
            "pass --resource, --controller or both",
        ),
        (
            &[
                "--group",
                "appotp",
                "--version",
                "v1",
                "--kind",
                "AppOTP",
                "--resource=false",
            ],
            "no API appotp.learn.com/v1, Kind=AppOTP in PROJECT",
            "run `rsbuilder create api` with --resource first",
        ),
    ] {
        refuses(&ws, args, error, help);
    }
}

#[test]
fn an_existing_kind_is_refused_without_force() {
    let ws = project();
    create(&ws, APPOTP).success();
    refuses(
        &ws,
        APPOTP,
        "API appotp.learn.com/v1, Kind=AppOTP already exists",
        "pass --force to scaffold it again",
    );
    refuses(
        &ws,
        &[
            "--group",
            "appotp",
            "--version",
            "v1",
            "--kind",
            "AppOTP",
            "--resource=false",
            "--controller",
        ],
        "a controller for appotp.learn.com Kind=AppOTP already exists",
        "pass --controller-name <name> to add another controller, --controller=false, or --force",
    );
    refuses(
        &ws,
        &["--group", "appotp", "--version", "v1", "--kind", "AppOtp"],
        "appotp.learn.com/v1, Kind=AppOtp clashes with kind AppOTP of the same group",
        "pick another kind",
    );
}

#[test]
fn outside_a_project_it_says_how_to_start_one() {
    let ws = Workspace::new("empty");
    let before = ws.snapshot();
    let err = stderr(&create(&ws, APPOTP).code(1));
    assert!(
        err.starts_with("error: no PROJECT file found in `"),
        "{err}"
    );
    assert!(
        err.contains("help: run `rsbuilder init --domain <domain>` first"),
        "{err}"
    );
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn it_works_from_a_subdirectory_of_the_project() {
    let ws = project();
    let sub = ws.root().join("operator/src");
    crate::support::rsbuilder(
        &sub,
        &[
            "create",
            "api",
            "--group",
            "appotp",
            "--version",
            "v1",
            "--kind",
            "AppOTP",
        ],
    )
    .success();
    assert!(ws.root().join("api/src/appotp/v1/app_otp.rs").exists());
    assert!(!sub.join("api").exists());
}

#[test]
fn a_deleted_marker_is_named_and_nothing_changes() {
    let ws = project();
    let main = ws
        .read("operator/src/main.rs")
        .replace("        // +rsbuilder:scaffold:controllers\n", "");
    ws.write("operator/src/main.rs", &main);
    refuses(
        &ws,
        APPOTP,
        "marker `// +rsbuilder:scaffold:controllers` not found in `operator/src/main.rs`",
        "put the line `// +rsbuilder:scaffold:controllers` back",
    );
}

#[test]
fn a_malformed_rbac_marker_is_named_with_its_line() {
    let ws = project();
    let main = ws.read("operator/src/main.rs").replace(
        "// +rsbuilder:scaffold:imports",
        "// +rsbuilder:scaffold:imports\n// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;fly",
    );
    ws.write("operator/src/main.rs", &main);
    let line = main
        .lines()
        .position(|l| l.contains("verbs=get;fly"))
        .unwrap()
        + 1;
    refuses(
        &ws,
        APPOTP,
        &format!("invalid RBAC marker at operator/src/main.rs:{line}: unknown verb `fly`"),
        "write it as",
    );
}

#[test]
fn a_dry_run_lists_the_changes_and_writes_nothing() {
    let ws = project();
    let before = ws.snapshot();
    let mut args = APPOTP.to_vec();
    args.push("--dry-run");
    let assert = create(&ws, &args).success();
    // The listing is data, on stdout; stderr has none of it.
    let (out, err) = (crate::support::stdout(&assert), stderr(&assert));
    assert!(
        out.contains("would create api/src/appotp/v1/app_otp.rs\n"),
        "{out}"
    );
    assert!(out.contains("would update operator/src/main.rs\n"), "{out}");
    assert!(out.contains("would update PROJECT\n"), "{out}");
    assert!(!err.contains("would "), "{err}");
    crate::support::assert_same_tree(&before, &ws.snapshot(), "the command");
}

#[test]
fn names_shared_across_the_cluster_or_the_tree_are_not_reused() {
    let ws = project();
    create(&ws, APPOTP).success();
    // AuthOTP's initials are AppOTP's short name: it takes its singular instead.
    create(
        &ws,
        &["--group", "appotp", "--version", "v1", "--kind", "AuthOTP"],
    )
    .success();
    assert!(
        ws.read("api/src/appotp/v1/auth_otp.rs")
            .contains("shortname = \"authotp\"")
    );
    // `ds` is DaemonSet's: DataStore takes its singular.
    create(
        &ws,
        &["--group", "store", "--version", "v1", "--kind", "DataStore"],
    )
    .success();
    assert!(
        ws.read("config/crd/bases/store.learn.com_datastores.yaml")
            .contains("    shortNames:\n    - datastore\n")
    );
    // Groups `app-otp` and `app.otp` would both live in the module `app_otp`.
    create(
        &ws,
        &["--group", "app-otp", "--version", "v1", "--kind", "Widget"],
    )
    .success();
    refuses(
        &ws,
        &["--group", "app.otp", "--version", "v1", "--kind", "Gadget"],
        "group `app.otp.learn.com` would share the module `app_otp` with group `app-otp.learn.com`",
        "pick a group that differs by more than `.` or `-`",
    );
    // Group `a-b` with kind Cd and group `a` with kind BCd both name their files `a_b_cd_*`:
    // refused before --force can overwrite the first kind's roles and tests.
    create(&ws, &["--group", "a-b", "--version", "v1", "--kind", "Cd"]).success();
    for force in [false, true] {
        let mut args = vec!["--group", "a", "--version", "v1", "--kind", "BCd"];
        if force {
            args.push("--force");
        }
        refuses(
            &ws,
            &args,
            "a.learn.com/v1, Kind=BCd would write the files of kind Cd of group `a-b.learn.com`: both are named `a_b_cd_*`",
            "pick another kind or group name; --force would overwrite the other kind's files",
        );
    }
}

#[test]
fn a_plural_that_is_another_kinds_singular_is_refused() {
    let ws = project();
    create(
        &ws,
        &["--group", "shop", "--version", "v1", "--kind", "Foo"],
    )
    .success();
    refuses(
        &ws,
        &[
            "--group",
            "shop",
            "--version",
            "v1",
            "--kind",
            "Bar",
            "--plural",
            "foo",
        ],
        "shop.learn.com/v1, Kind=Bar would be called `foo`, a name kind Foo of the same group has: the API server would not serve it",
        "pass a different --plural, or pick another kind",
    );
    // In another group the name is free.
    create(
        &ws,
        &[
            "--group",
            "store",
            "--version",
            "v1",
            "--kind",
            "Bar",
            "--plural",
            "foo",
        ],
    )
    .success();
}

/// A `--controller-name` whose module is the kind's own controller's is refused, `--force`
/// or not: `--force` overwrote that controller (the user's reconcile) and PROJECT gained a
/// duplicate that `alpha generate` could never replay.
#[test]
fn a_controller_name_on_the_kinds_own_module_is_refused_even_with_force() {
    let ws = project();
    create(
        &ws,
        &["--group", "ship", "--version", "v1", "--kind", "Foo"],
    )
    .success();
    for force in [&[][..], &["--force"]] {
        let mut args = vec![
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Foo",
            "--resource=false",
            "--controller-name",
            "foo",
        ];
        args.extend_from_slice(force);
        refuses(
            &ws,
            &args,
            "controller name `foo` would share the module `foo` with the controller of ship.learn.com Kind=Foo: the controllers of a kind need modules of their own",
            "pick another --controller-name, or pass `--controller --force` without --controller-name to scaffold the controller of ship.learn.com Kind=Foo again",
        );
    }
}

/// `--group core --kind Pod` with its types makes a CRD of that name in the project's domain,
/// not a controller for Kubernetes' Pod: it is said, with the flag that does the other.
#[test]
fn a_kind_of_kubernetes_with_its_types_is_said_to_be_a_new_crd() {
    let ws = project();
    let err = stderr(
        &create(
            &ws,
            &["--group", "core", "--version", "v1", "--kind", "Pod"],
        )
        .success(),
    );
    assert!(
        err.starts_with("warning: Pod is one of Kubernetes' own kinds (core/v1): this scaffolds a new CRD of that name in the group core.learn.com, not a controller for Kubernetes' Pod\nhelp: for a controller of Kubernetes' kind, run the command again with --resource=false\n"),
        "{err}"
    );
    let ws = project();
    let err = stderr(
        &create(
            &ws,
            &["--group", "apps", "--version", "v1", "--kind", "Cache"],
        )
        .success(),
    );
    assert!(!err.contains("warning:"), "{err}");
}

#[test]
fn a_controller_name_over_63_characters_is_refused() {
    let ws = project();
    let group = "observability-platform-engineering";
    refuses(
        &ws,
        &[
            "--group",
            group,
            "--version",
            "v1",
            "--kind",
            "ServiceLevelObjectiveSchedule",
        ],
        "the controller name `observability-platform-engineering-servicelevelobjectiveschedule` of kind ServiceLevelObjectiveSchedule is longer than 63 characters",
        "pick a shorter group or kind",
    );
}

#[test]
fn the_scope_follows_the_kinds_other_versions() {
    let ws = project();
    create(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v1",
            "--kind",
            "Ship",
            "--namespaced=false",
        ],
    )
    .success();
    create(
        &ws,
        &["--group", "fleet", "--version", "v2", "--kind", "Ship"],
    )
    .success();
    assert!(
        !ws.read("api/src/fleet/v2/ship.rs")
            .contains("    namespaced,\n")
    );
    assert!(
        ws.read("config/crd/bases/fleet.learn.com_ships.yaml")
            .contains("  scope: Cluster\n")
    );
}

#[test]
fn a_namespaced_project_refuses_cluster_scoped_kinds() {
    let ws = Workspace::new("ns-operator");
    ws.run(&["init", "--domain", "learn.com", "--namespaced"])
        .success();
    refuses(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v1",
            "--kind",
            "Ship",
            "--namespaced=false",
        ],
        "fleet.learn.com/v1, Kind=Ship would be cluster-scoped, but the project is namespaced",
        "pass `--namespaced=true`",
    );
    create(
        &ws,
        &["--group", "fleet", "--version", "v1", "--kind", "Ship"],
    )
    .success();
    let role = ws.read("config/rbac/role.yaml");
    assert!(
        role.contains("kind: Role\nmetadata:\n  name: manager-role\n  namespace: system\n"),
        "{role}"
    );
    assert!(role.contains("  - ships/finalizers\n"), "{role}");
}

#[test]
fn groups_and_kinds_named_like_crate_files_get_their_own_modules() {
    let ws = project();
    for (group, kind, types) in [
        ("bin", "Widget", "api/src/bin_/v1/widget.rs"),
        ("lib", "Mod", "api/src/lib_/v1/mod_.rs"),
        ("mod", "Main", "api/src/mod_/v1/main_.rs"),
        ("support", "Lib", "api/src/support_/v1/lib_.rs"),
    ] {
        create(&ws, &["--group", group, "--version", "v1", "--kind", kind]).success();
        assert!(ws.root().join(types).is_file(), "{types}");
    }
    let lib = ws.read("api/src/lib.rs");
    assert!(
        lib.contains("pub mod lib_;") && lib.contains("pub mod mod_;"),
        "{lib}"
    );
    assert!(
        ws.root()
            .join("operator/tests/controllers/support_/lib_.rs")
            .is_file()
    );
    assert!(ws.read("api/src/lib_/v1/mod.rs").contains("pub mod mod_;"));
    // The group keeps its name in the cluster.
    assert!(
        ws.root()
            .join("config/crd/bases/lib.learn.com_mods.yaml")
            .is_file()
    );
}

#[test]
fn plurals_must_agree_and_fit() {
    let ws = project();
    create(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v1",
            "--kind",
            "Person",
            "--plural",
            "persons",
        ],
    )
    .success();
    refuses(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v2",
            "--kind",
            "Person",
            "--plural",
            "people",
        ],
        "invalid plural `people`: the other versions of Person call it `persons`",
        "drop --plural",
    );
    // Without --plural, the new version takes the kind's.
    create(
        &ws,
        &[
            "--group",
            "fleet",
            "--version",
            "v2",
            "--kind",
            "Person",
            "--controller=false",
        ],
    )
    .success();
    assert!(
        ws.read("api/src/fleet/v2/person.rs")
            .contains("plural = \"persons\",")
    );

    let long_kind = format!("A{}", "b".repeat(62));
    refuses(
        &ws,
        &["--group", "fleet", "--version", "v1", "--kind", &long_kind],
        &format!(
            "the resource name `a{}s` of kind {long_kind} is too long",
            "b".repeat(62)
        ),
        "pass a shorter --plural",
    );
}

#[test]
fn the_controller_tests_of_every_kind_share_one_test_binary() {
    let ws = project();
    create(&ws, APPOTP).success();
    create(
        &ws,
        &["--group", "fleet", "--version", "v1", "--kind", "Ship"],
    )
    .success();
    create(
        &ws,
        &["--group", "fleet", "--version", "v1", "--kind", "Loop"],
    )
    .success();
    let binaries: Vec<String> = std::fs::read_dir(ws.root().join("operator/tests"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(binaries, ["controllers", "e2e.rs"]);
    assert_eq!(
        ws.read("operator/tests/controllers/main.rs"),
        "//! Reconcile tests of the controllers, against a mocked API server: one module per API group\n\
         //! and kind, as in `src/controllers/`, all in this one test binary.\n\nmod support;\n\n\
         mod appotp;\n\nmod fleet;\n// +rsbuilder:scaffold:groups\n"
    );
    assert!(
        ws.read("operator/tests/controllers/fleet/mod.rs")
            .contains("\nmod ship;\n\nmod r#loop;\n"),
        "{}",
        ws.read("operator/tests/controllers/fleet/mod.rs")
    );
}

#[test]
fn a_group_without_a_dot_is_refused_and_an_ip_is_not_a_domain() {
    let ws = crate::support::Workspace::new("local-operator");
    ws.run(&["init", "--domain", "localhost"]).success();
    refuses(
        &ws,
        &["--version", "v1", "--kind", "Widget"],
        "invalid group: without `--group` the API group is the domain `localhost`, and the API server requires a CRD's group to contain a dot",
        "pass a group, such as `--group apps` for `apps.localhost`",
    );
    create(
        &ws,
        &["--group", "g", "--version", "v1", "--kind", "Widget"],
    )
    .success();
    assert!(
        ws.root()
            .join("config/crd/bases/g.localhost_widgets.yaml")
            .is_file()
    );

    let ip = crate::support::Workspace::new("ip-operator");
    let assert = ip.run(&["init", "--domain", "10.0.0.1"]).failure().code(1);
    assert!(
        stderr(&assert)
            .starts_with("error: invalid domain `10.0.0.1`: an IP address is not a domain"),
        "{}",
        stderr(&assert)
    );
    assert!(ip.snapshot().is_empty());
}

const MEMCACHED: &[&str] = &[
    "--group",
    "example.com",
    "--version",
    "v1alpha1",
    "--kind",
    "Memcached",
    "--image=memcached:1.6.26-alpine3.19",
    "--image-container-command=memcached,--memory-limit=64,-o,modern,-v",
    "--image-container-port=11211",
    "--run-as-user=1001",
    "--plugins=deploy-image/v1-alpha",
];

#[test]
fn an_image_gets_a_kind_that_describes_its_deployment_and_a_controller_that_runs_it() {
    let ws = project();
    let assert = create(&ws, MEMCACHED).success();
    let err = stderr(&assert);
    for line in [
        "created api/src/example_com/v1alpha1/memcached.rs",
        "created operator/src/controllers/example_com/memcached.rs",
        "created operator/tests/controllers/example_com/memcached.rs",
        "created config/samples/example_com_v1alpha1_memcached.yaml",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    let types = ws.read("api/src/example_com/v1alpha1/memcached.rs");
    for field in [
        "pub size: Option<i32>,",
        "pub image: Option<String>,",
        "pub resources: Option<corev1::ResourceRequirements>,",
        "pub env: Vec<corev1::EnvVar>,",
        "pub ports: Vec<corev1::ContainerPort>,",
    ] {
        assert!(types.contains(field), "missing {field} in:\n{types}");
    }
    let controller = ws.read("operator/src/controllers/example_com/memcached.rs");
    assert!(controller.contains(
        "pub const COMMAND: &[&str] = &[\"memcached\", \"--memory-limit=64\", \"-o\", \"modern\", \"-v\"];"
    ));
    assert!(controller.contains("pub const RUN_AS_USER: Option<i64> = Some(1001);"));
    assert!(
        controller.contains("pub const DEFAULT_IMAGE: &str = \"memcached:1.6.26-alpine3.19\";")
    );
    let crd = ws.read("config/crd/bases/example.com.learn.com_memcacheds.yaml");
    assert!(crd.contains("                default: memcached:1.6.26-alpine3.19\n"));
    assert!(crd.contains("                default:\n                - containerPort: 11211\n"));
    let role = ws.read("config/rbac/role.yaml");
    assert!(
        role.contains("  - apps\n  resources:\n  - deployments\n"),
        "{role}"
    );
    assert!(
        role.contains("  - \"\"\n  resources:\n  - pods\n"),
        "{role}"
    );
    let sample = ws.read("config/samples/example_com_v1alpha1_memcached.yaml");
    assert!(
        sample.contains("  image: memcached:1.6.26-alpine3.19\n"),
        "{sample}"
    );
    let project = ws.read("PROJECT");
    assert!(
        project.contains(
            "  deploy-image.go.kubebuilder.io/v1-alpha:\n    resources:\n    - domain: learn.com\n      group: example.com\n      kind: Memcached\n      options:\n        containerCommand: \"memcached,--memory-limit=64,-o,modern,-v\"\n        containerPort: \"11211\"\n        image: \"memcached:1.6.26-alpine3.19\"\n        runAsUser: \"1001\"\n      version: v1alpha1\n"
        ),
        "{project}"
    );
    // Scaffolding it again with --force records it once.
    let mut again = MEMCACHED.to_vec();
    again.push("--force");
    create(&ws, &again).success();
    assert_eq!(ws.read("PROJECT").matches("kind: Memcached").count(), 2);
}

#[test]
fn image_flags_are_checked_before_anything_is_written() {
    let ws = project();
    let base = ["--group", "web", "--version", "v1", "--kind", "Site"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args
    };
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--image-container-port=80"],
            "--image-container-port can only be used with --image",
            "add --image <image>, or drop --image-container-port",
        ),
        (
            &["--image="],
            "invalid image ``: the repository is empty: an image is `[registry[:port]/]repository[:tag][@sha256:digest]`",
            "pass a reference such as `--image memcached:1.6.26-alpine3.19` or `--image registry.example.com:5000/team/app:v1`",
        ),
        (
            &["--image=nginx latest"],
            "invalid image `nginx latest`: the repository component `nginx latest` must be lowercase letters and digits, joined by `.`, `_`, `__` or dashes, with components separated by `/`",
            "pass a reference such as",
        ),
        (
            &["--image=NGINX:1.0"],
            "invalid image `NGINX:1.0`: the repository component `NGINX` must be lowercase letters and digits, joined by `.`, `_`, `__` or dashes, with components separated by `/`",
            "pass a reference such as `--image memcached:1.6.26-alpine3.19`",
        ),
        (
            &["--image=nginx:"],
            "invalid image `nginx:`: the tag `` after `:` must be 1 to 128 letters, digits, `_`, `.` and `-`, not starting with `.` or `-`",
            "pass a reference such as",
        ),
        (
            &["--image=:tag"],
            "invalid image `:tag`: the repository is empty",
            "pass a reference such as",
        ),
        (
            &["--image=a$b"],
            "invalid image `a$b`: the repository component `a$b` must be lowercase letters and digits",
            "pass a reference such as",
        ),
        (
            &["--image=reg.io/ng\"inx:1"],
            "invalid image `reg.io/ng\"inx:1`: the repository component `ng\"inx` must be lowercase letters and digits",
            "pass a reference such as",
        ),
        (
            &["--image=nginx@sha256:abc"],
            "invalid image `nginx@sha256:abc`: the digest `sha256:abc` after `@` must be `sha256:` and 64 lowercase hexadecimal digits",
            "pass a reference such as",
        ),
        (
            &["--image=nginx", "--image-container-command=nginx\n-g"],
            "invalid --image-container-command `nginx\\n-g`: a command is one line of arguments separated by commas, without newlines, tabs or other control characters",
            "pass the command on one line, such as `--image-container-command memcached,-m,64`; for a script, edit `COMMAND` in the controller",
        ),
        (
            &["--image=nginx", "--image-container-command=sh,-c,a\tb"],
            "invalid --image-container-command `sh,-c,a\\tb`: a command is one line",
            "pass the command on one line",
        ),
        (
            &["--image=nginx", "--image-container-port=0"],
            "invalid --image-container-port `0`: a port is a number from 1 to 65535",
            "pass the port the image listens on, such as `--image-container-port 11211`",
        ),
        (
            &["--image=nginx", "--image-container-port=70000"],
            "invalid --image-container-port `70000`: a port is a number from 1 to 65535",
            "pass the port the image listens on",
        ),
        (
            &["--image=nginx", "--run-as-user=-1"],
            "invalid --run-as-user `-1`: a user ID is a number from 1 to 2147483647 (the pod runs as non-root)",
            "pass the image's non-root user, such as `--run-as-user 1001`",
        ),
        (
            &["--image=nginx", "--run-as-user", "0"],
            "invalid --run-as-user `0`",
            "pass the image's non-root user",
        ),
        (
            &["--image=nginx", "--image-container-command=nginx,,-g"],
            "invalid --image-container-command `nginx,,-g`: it has an empty argument",
            "separate the command and its arguments with single commas: `memcached,-m,64`",
        ),
        (
            &["--image=nginx", "--resource=false"],
            "--image scaffolds a namespaced kind and its controller: it cannot go with --resource=false",
            "drop --resource=false, or drop --image",
        ),
        (
            &["--image=nginx", "--controller=false"],
            "--image scaffolds a namespaced kind and its controller: it cannot go with --controller=false",
            "drop --controller=false, or drop --image",
        ),
        (
            &["--image=nginx", "--namespaced=false"],
            "--image scaffolds a namespaced kind and its controller: it cannot go with --namespaced=false",
            "drop --namespaced=false, or drop --image",
        ),
        (
            &["--image=nginx", "--plugins=helm/v2-alpha"],
            "plugin `helm/v2-alpha` is added to a project by `rsbuilder edit`, not by create api",
            "drop it here, then run `rsbuilder edit --plugins=helm/v2-alpha`",
        ),
    ];
    for (extra, error, help) in cases {
        refuses(&ws, &with(extra), error, help);
    }
}

#[test]
fn a_kind_of_kubernetes_gets_a_controller_without_types() {
    let ws = project();
    let assert = create(
        &ws,
        &[
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "Deployment",
            "--resource=false",
            "--controller",
        ],
    )
    .success();
    let err = stderr(&assert);
    assert!(
        err.lines()
            .any(|l| l == "created operator/src/controllers/k8s_apps/deployment.rs"),
        "{err}"
    );
    assert!(
        !err.contains("config/crd"),
        "no CRD for a kind of Kubernetes:\n{err}"
    );
    let controller = ws.read("operator/src/controllers/k8s_apps/deployment.rs");
    assert!(controller.contains("type Object = k8s_openapi::api::apps::v1::Deployment;"));
    assert!(
        controller.contains(
            "// +rsbuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch\n"
        )
    );
    create(
        &ws,
        &[
            "--group",
            "core",
            "--version",
            "v1",
            "--kind",
            "Pod",
            "--resource=false",
            "--controller",
        ],
    )
    .success();
    create(
        &ws,
        &[
            "--group",
            "networking",
            "--version",
            "v1",
            "--kind",
            "Ingress",
            "--resource=false",
            "--controller",
        ],
    )
    .success();
    let project = ws.read("PROJECT");
    assert!(
        project.contains(
            "resources:\n- controller: true\n  core: true\n  group: apps\n  kind: Deployment\n  version: v1\n- controller: true\n  core: true\n  group: core\n  kind: Pod\n  version: v1\n- controller: true\n  core: true\n  domain: k8s.io\n  group: networking\n  kind: Ingress\n  version: v1\n"
        ),
        "{project}"
    );
    let role = ws.read("config/rbac/role.yaml");
    assert!(
        role.contains("- apiGroups:\n  - \"\"\n  resources:\n  - pods\n"),
        "{role}"
    );
    assert!(
        role.contains("- apiGroups:\n  - networking.k8s.io\n  resources:\n  - ingresses\n"),
        "{role}"
    );

    let deployment = [
        "--group",
        "apps",
        "--version",
        "v1",
        "--resource=false",
        "--controller",
    ];
    let with_kind = |kind: &'static str| {
        let mut args = deployment.to_vec();
        args.extend(["--kind", kind]);
        args
    };
    refuses(
        &ws,
        &with_kind("Deployment"),
        "a controller for apps/v1, Kind=Deployment already exists",
        "pass --controller-name <name> to add another controller, --controller=false, or --force to scaffold it again",
    );
    refuses(
        &ws,
        &with_kind("Deploymentz"),
        "Kubernetes has no kind `Deploymentz` in apps/v1",
        "its kinds there are ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet",
    );
    refuses(
        &ws,
        &[
            "--group",
            "apps",
            "--version",
            "v9",
            "--kind",
            "Deployment",
            "--resource=false",
            "--controller",
        ],
        "Kubernetes has no version `v9` of the `apps` group",
        "its versions are v1",
    );
    refuses(
        &ws,
        &[
            "--group",
            "apps",
            "--version",
            "v1",
            "--kind",
            "StatefulSet",
            "--resource=false",
            "--controller",
            "--plural",
            "sets",
        ],
        "invalid plural `sets`: Kubernetes calls apps/v1, Kind=StatefulSet `statefulsets`",
        "drop --plural",
    );
}

#[test]
fn a_namespaced_project_refuses_cluster_scoped_kinds_of_kubernetes() {
    let ws = Workspace::new("ns-operator");
    ws.run(&["init", "--domain", "learn.com", "--namespaced"])
        .success();
    refuses(
        &ws,
        &[
            "--group",
            "rbac.authorization",
            "--version",
            "v1",
            "--kind",
            "ClusterRole",
            "--resource=false",
            "--controller",
        ],
        "rbac.authorization.k8s.io/v1, Kind=ClusterRole is cluster-scoped, but the project is namespaced: its manager's Role cannot grant cluster-scoped resources",
        "pick a namespaced kind, or scaffold a cluster-wide project",
    );
}

const CAPTAIN: &[&str] = &["--group", "crew", "--version", "v1", "--kind", "Captain"];

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

#[test]
fn a_kind_gets_a_second_controller_under_its_own_name() {
    let ws = project();
    create(&ws, &with(CAPTAIN, &["--controller-name=captain"])).success();
    let err = stderr(
        &create(
            &ws,
            &with(
                CAPTAIN,
                &["--resource=false", "--controller-name=captain-backup"],
            ),
        )
        .success(),
    );
    for line in [
        "created operator/src/controllers/crew/captain_backup.rs",
        "created operator/tests/controllers/crew/captain_backup.rs",
        "updated operator/src/main.rs",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    assert!(
        ws.read("PROJECT").contains(
            "  controllers:\n  - name: captain\n  - name: captain-backup\n  domain: learn.com\n"
        ),
        "{}",
        ws.read("PROJECT")
    );
    let backup = ws.read("operator/src/controllers/crew/captain_backup.rs");
    // Its own field manager, finalizer and condition: the two never take each other's.
    assert!(backup.contains("pub const NAME: &str = \"crew-captain-backup\";"));
    assert!(backup.contains("pub const FINALIZER: &str = \"crew.learn.com/captain-backup\";"));
    assert!(backup.contains("const CONDITION: &str = \"CaptainBackupReady\";"));
    let own = ws.read("operator/src/controllers/crew/captain.rs");
    assert!(own.contains("pub const FINALIZER: &str = \"crew.learn.com/finalizer\";"));
    let main = ws.read("operator/src/main.rs");
    assert!(main.contains(
        "controllers::crew::captain::registration(),\n        controllers::crew::captain_backup::registration(),"
    ));
}

#[test]
fn a_second_controller_needs_a_name_of_its_own() {
    let ws = project();
    create(&ws, &with(CAPTAIN, &["--controller-name=captain"])).success();
    refuses(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller"]),
        "crew.learn.com Kind=Captain already has controllers (captain): another one needs a name of its own",
        "pass --controller-name <name>, or --controller=false",
    );
    refuses(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller-name=captain"]),
        "a controller named `captain` for crew.learn.com Kind=Captain already exists",
        "pick another --controller-name, or pass --force to scaffold it again",
    );
    refuses(
        &ws,
        &with(
            CAPTAIN,
            &["--resource=false", "--controller-name=Captain_Backup"],
        ),
        "invalid controller name `Captain_Backup`: must be a DNS-1035 label",
        "pass `--controller-name captain-backup`",
    );
    refuses(
        &ws,
        &with(
            CAPTAIN,
            &[
                "--resource=false",
                "--controller=false",
                "--controller-name=x",
            ],
        ),
        "--controller-name x names a controller, but --controller=false scaffolds none",
        "drop --controller=false, or drop --controller-name",
    );
    create(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller-name=backup"]),
    )
    .success();
    // Another kind of the group may not take the module of that controller, nor the other way.
    refuses(
        &ws,
        &["--group", "crew", "--version", "v1", "--kind", "Backup"],
        "crew.learn.com/v1, Kind=Backup would have the controller module `backup`, which kind Captain of the same group has",
        "pick another kind name",
    );
    create(
        &ws,
        &["--group", "crew", "--version", "v1", "--kind", "Sailor"],
    )
    .success();
    refuses(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller-name=sailor"]),
        "crew.learn.com/v1, Kind=Captain would have the controller module `sailor`, which kind Sailor of the same group has",
        "pick another --controller-name",
    );
}

/// `a-b` and `a--b` are one module, `a_b`: a second spelling is refused even with `--force`,
/// which would overwrite the first controller's code and change its finalizer.
#[test]
fn controller_names_with_one_module_clash_whatever_force_says() {
    let ws = project();
    create(&ws, CAPTAIN).success();
    create(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller-name=a-b"]),
    )
    .success();
    for force in [&[][..], &["--force"]] {
        refuses(
            &ws,
            &with(
                &with(CAPTAIN, &["--resource=false", "--controller-name=a--b"]),
                force,
            ),
            "controller name `a--b` would share the module `a_b` with controller `a-b` of crew.learn.com Kind=Captain: the controllers of a kind need modules of their own",
            "pick another --controller-name, or pass `--controller-name a-b --force` to scaffold `a-b` again",
        );
        refuses(
            &ws,
            &with(
                &with(CAPTAIN, &["--resource=false", "--controller-name=a_b"]),
                force,
            ),
            "invalid controller name `a_b`: must be a DNS-1035 label",
            "pass `--controller-name a-b`",
        );
    }
    // The same spelling with --force scaffolds that controller again.
    create(
        &ws,
        &with(
            CAPTAIN,
            &["--resource=false", "--controller-name=a-b", "--force"],
        ),
    )
    .success();
    assert!(
        ws.read("operator/src/controllers/crew/a_b.rs")
            .contains("pub const FINALIZER: &str = \"crew.learn.com/a-b\";")
    );

    // Controllers of Kubernetes' kinds too.
    let deployment = [
        "--group",
        "apps",
        "--version",
        "v1",
        "--kind",
        "Deployment",
        "--resource=false",
    ];
    create(&ws, &with(&deployment, &["--controller-name=roll-out"])).success();
    refuses(
        &ws,
        &with(&deployment, &["--controller-name=roll--out", "--force"]),
        "controller name `roll--out` would share the module `roll_out` with controller `roll-out` of apps/v1, Kind=Deployment",
        "pick another --controller-name, or pass `--controller-name roll-out --force`",
    );
}

/// `--resource=false` alone on a kind whose controllers exist: the controller is left out
/// because of them, and the refusal says so instead of blaming a `--controller=false` that was
/// never passed.
#[test]
fn nothing_to_scaffold_names_what_the_user_did() {
    let ws = project();
    create(&ws, &with(CAPTAIN, &["--controller=false"])).success();
    create(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller-name=cache-x"]),
    )
    .success();
    refuses(
        &ws,
        &with(CAPTAIN, &["--resource=false"]),
        "nothing to scaffold: --resource=false, and crew.learn.com Kind=Captain has its controllers (cache-x) already",
        "pass --controller-name <name> to add another controller",
    );
    refuses(
        &ws,
        &with(CAPTAIN, &["--resource=false", "--controller=false"]),
        "nothing to scaffold: both --resource and --controller are false",
        "pass --resource, --controller or both",
    );
}

#[test]
fn ssa_makes_the_types_their_own_apply_configurations() {
    let ws = project();
    create(
        &ws,
        &[
            "--group",
            "crew",
            "--version",
            "v1",
            "--kind",
            "Navigator",
            "--ssa",
        ],
    )
    .success();
    assert!(
        ws.read("PROJECT")
            .contains("    namespaced: true\n    ssa: true\n")
    );
    let types = ws.read("api/src/crew/v1/navigator.rs");
    assert!(types.contains("    pub size: Option<i32>,"), "{types}");
    assert!(types.contains("fn unset_fields_are_left_out_of_an_apply()"));
    let crd = ws.read("config/crd/bases/crew.learn.com_navigators.yaml");
    assert!(!crd.contains("required:\n            - size"), "{crd}");
    refuses(
        &ws,
        &[
            "--group",
            "crew",
            "--version",
            "v1",
            "--kind",
            "Site",
            "--ssa",
            "--image",
            "nginx",
        ],
        "--ssa shapes the types of a kind, and --image scaffolds none of its own",
        "drop --ssa",
    );
    refuses(
        &ws,
        &[
            "--group",
            "crew",
            "--version",
            "v1",
            "--kind",
            "Navigator",
            "--ssa",
            "--resource=false",
            "--controller-name=other",
        ],
        "--ssa shapes the types of a kind, and --resource=false scaffolds none of its own",
        "drop --resource=false, or drop --ssa",
    );
}

#[test]
fn controllers_of_kubernetes_kinds_take_names_too_but_not_each_others_modules() {
    let ws = project();
    fn apps<'a>(kind: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["--group", "apps", "--version", "v1", "--kind", kind];
        args.push("--resource=false");
        args.extend_from_slice(extra);
        args
    }
    create(&ws, &apps("StatefulSet", &["--controller"])).success();
    create(&ws, &apps("Deployment", &["--controller-name", "rollout"])).success();
    assert!(
        ws.read("operator/src/controllers/k8s_apps/rollout.rs")
            .contains("pub const NAME: &str = \"apps-rollout\";")
    );
    refuses(
        &ws,
        &apps("Deployment", &["--controller-name", "stateful-set"]),
        "the controller of apps/v1, Kind=Deployment would have the module `stateful_set`, which the controller of Kubernetes' StatefulSet has",
        "pick another --controller-name",
    );
    let long = "x".repeat(60);
    refuses(
        &ws,
        &apps("Deployment", &["--controller-name", &long]),
        "the controller name `apps-xxxxxxxx",
        "pick a shorter --controller-name",
    );
}

/// A group of the project's and Kubernetes' group of the same name keep modules of their own
/// (`controllers/apps/`, `controllers/k8s_apps/`) in either order, even for a kind of the same
/// name; only what would really be shared is refused: the controller's name, and a group whose
/// module is Kubernetes' (`k8s-apps`).
#[test]
fn a_group_of_the_project_and_the_kubernetes_group_of_its_name_live_side_by_side() {
    const OWN: &[&str] = &[
        "--group",
        "apps",
        "--version",
        "v1",
        "--resource",
        "--controller",
    ];
    const K8S: &[&str] = &[
        "--group",
        "apps",
        "--version",
        "v1",
        "--resource=false",
        "--controller",
    ];
    let kind = |base: &[&'static str], kind: &'static str| with(base, &["--kind", kind]);
    let files = |ws: &Workspace| -> Vec<String> {
        let mut files: Vec<String> = walkdir::WalkDir::new(ws.root().join("operator"))
            .into_iter()
            .map(|entry| entry.unwrap())
            .filter(|entry| entry.file_type().is_file())
            .map(|entry| {
                let path = entry.path().strip_prefix(ws.root()).unwrap();
                path.to_string_lossy().into_owned()
            })
            .filter(|path| path.contains("apps"))
            .collect();
        files.sort();
        files
    };

    // The project's group first, then Kubernetes'.
    let ws = project();
    create(&ws, &kind(OWN, "Store")).success();
    create(&ws, &kind(K8S, "Deployment")).success();
    assert_eq!(
        files(&ws),
        [
            "operator/src/controllers/apps/mod.rs",
            "operator/src/controllers/apps/store.rs",
            "operator/src/controllers/k8s_apps/deployment.rs",
            "operator/src/controllers/k8s_apps/mod.rs",
            "operator/tests/controllers/apps/mod.rs",
            "operator/tests/controllers/apps/store.rs",
            "operator/tests/controllers/k8s_apps/deployment.rs",
            "operator/tests/controllers/k8s_apps/mod.rs",
        ]
    );
    let main = ws.read("operator/src/main.rs");
    for registration in [
        "controllers::apps::store::registration(),",
        "controllers::k8s_apps::deployment::registration(),",
    ] {
        assert_eq!(main.matches(registration).count(), 1, "{main}");
    }

    // Kubernetes' first, then a kind of the project's with the same name.
    let ws = project();
    create(&ws, &kind(K8S, "Deployment")).success();
    refuses(
        &ws,
        &kind(OWN, "Deployment"),
        "the controller of apps.learn.com/v1, Kind=Deployment would be named `apps-deployment`, as the controller of Kubernetes' apps/v1, Kind=Deployment is\n",
        "pick another --controller-name",
    );
    create(
        &ws,
        &with(
            &kind(OWN, "Deployment"),
            &["--controller-name", "store-deployment"],
        ),
    )
    .success();
    let project = ws.read("PROJECT");
    assert!(
        project.contains("- controller: true\n  core: true\n  group: apps\n  kind: Deployment\n  version: v1\n- api:\n    crdVersion: v1\n    namespaced: true\n  controllers:\n  - name: store-deployment\n  domain: learn.com\n  group: apps\n  kind: Deployment\n  version: v1\n"),
        "two entries, Kubernetes' and the project's:\n{project}"
    );
    assert!(
        ws.read("api/src/apps/v1/deployment.rs")
            .contains("pub struct DeploymentSpec")
    );
    assert!(
        ws.read("operator/src/controllers/apps/store_deployment.rs")
            .contains("type Object = ::otp_operator_api::apps::v1::deployment::Deployment;")
    );
    refuses(
        &ws,
        &["--group", "k8s-apps", "--version", "v1", "--kind", "Thing"],
        "group `k8s-apps.learn.com` would share the module `k8s_apps` with the controller of Kubernetes' apps, Kind=Deployment\n",
        "pick another group name",
    );
}
