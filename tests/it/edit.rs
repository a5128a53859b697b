//! `rsbuilder edit`: what `init` decided, changed in a project that has grown since, and the
//! refusals that leave it as it was.

use crate::support::{Workspace, assert_refused, assert_same_tree, stderr};

const APPOTP: &[&str] = &[
    "create",
    "api",
    "--group",
    "appotp",
    "--version",
    "v1",
    "--kind",
    "AppOTP",
];

/// A project made by `init` with `init_flags`, with one kind and its defaulting webhook, which
/// add lines to `main.rs` next to the ones `edit` changes.
fn project(init_flags: &[&str]) -> Workspace {
    let ws = Workspace::new("otp-operator");
    let mut init = vec!["init", "--domain", "learn.com"];
    init.extend_from_slice(init_flags);
    ws.run(&init).success();
    ws.run(APPOTP).success();
    ws.run(&[
        "create",
        "webhook",
        "--group",
        "appotp",
        "--version",
        "v1",
        "--kind",
        "AppOTP",
        "--defaulting",
    ])
    .success();
    ws
}

/// Runs a failing `edit` and checks its message, exit code 1 and the untouched tree.
#[track_caller]
fn refuses(ws: &Workspace, args: &[&str], error: &str, help: &str) {
    let mut command = vec!["edit"];
    command.extend_from_slice(args);
    assert_refused(ws, &command, error, help);
}

#[test]
fn namespaced_gives_the_project_init_namespaced_would_have_made_and_back() {
    let ws = project(&[]);
    let cluster_wide = ws.snapshot();
    let err = stderr(&ws.run(&["edit", "--namespaced"]).success());
    for line in [
        "updated config/manager/manager.yaml",
        "updated config/rbac/role_binding.yaml",
        "updated config/rbac/role.yaml",
        "updated operator/src/main.rs",
        "updated PROJECT",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    // The same bytes as a project scaffolded namespaced from the start.
    let namespaced = project(&["--namespaced"]);
    assert_same_tree(
        &namespaced.snapshot(),
        &ws.snapshot(),
        "`edit --namespaced`",
    );
    assert!(
        ws.read("operator/src/main.rs")
            .contains(".require_watch_namespace()")
    );
    assert!(ws.read("config/rbac/role.yaml").contains("kind: Role\n"));

    ws.run(&["edit", "--namespaced=false"]).success();
    assert_same_tree(&cluster_wide, &ws.snapshot(), "`edit --namespaced=false`");
}

#[test]
fn license_and_owner_are_changed_where_init_wrote_them() {
    let ws = project(&[]);
    ws.run(&["edit", "--license", "none", "--owner", "The OTP Authors"])
        .success();
    let expected = project(&["--license", "none", "--owner", "The OTP Authors"]);
    assert_same_tree(
        &expected.snapshot(),
        &ws.snapshot(),
        "`edit --license --owner`",
    );
}

#[test]
fn hand_edited_lines_are_refused_and_force_changes_only_the_lines_that_differ() {
    let ws = project(&[]);
    let manager = ws.read("config/manager/manager.yaml");
    // The user's own variable where the change goes, and their own memory limit.
    let edited = manager
        .replace(
            "              fieldPath: metadata.namespace\n        ports:",
            "              fieldPath: metadata.namespace\n        - name: EXTRA\n          value: \"1\"\n        ports:",
        )
        .replace("memory: 128Mi", "memory: 300Mi");
    assert_ne!(manager, edited, "the manager's env was not found");
    assert!(
        edited.contains("memory: 300Mi"),
        "no memory limit in manager.yaml"
    );
    ws.write("config/manager/manager.yaml", &edited);
    refuses(
        &ws,
        &["--namespaced"],
        "the lines `edit` changes were edited by hand in config/manager/manager.yaml",
        "make the change by hand, then run `rsbuilder edit` again (it finds the change made), or pass --force to place it by fewer unchanged lines",
    );
    let err = stderr(&ws.run(&["edit", "--namespaced", "--force"]).success());
    assert!(err.contains("updated config/manager/manager.yaml"), "{err}");
    let forced = ws.read("config/manager/manager.yaml");
    // Exactly the scaffold's change, next to the user's lines.
    let watch = "        - name: WATCH_NAMESPACE\n          valueFrom:\n            fieldRef:\n              fieldPath: metadata.namespace\n";
    assert_eq!(
        forced,
        edited.replace(
            "        - name: EXTRA\n",
            &format!("{watch}        - name: EXTRA\n")
        )
    );
    // Run again, it changes nothing.
    let before = ws.snapshot();
    ws.run(&["edit", "--namespaced", "--force"]).success();
    assert_same_tree(
        &before,
        &ws.snapshot(),
        "a second `edit --namespaced --force`",
    );

    // A line the change removes, edited by hand: refused even with --force, and accepted once
    // the user made the change the message shows.
    let main = ws.read("operator/src/main.rs");
    let mine = main.replace(
        "        .require_watch_namespace()\n",
        "        .require_watch_namespace() // mine\n",
    );
    assert_ne!(main, mine);
    ws.write("operator/src/main.rs", &mine);
    refuses(
        &ws,
        &["--namespaced=false", "--force"],
        "the lines `edit` changes were edited by hand in operator/src/main.rs",
        "make the change by hand, then run `rsbuilder edit` again: it finds the change made",
    );
    let by_hand = mine.replace("        .require_watch_namespace() // mine\n", "");
    ws.write("operator/src/main.rs", &by_hand);
    // manager.yaml still needs --force: the user's variable is next to the lines removed.
    ws.run(&["edit", "--namespaced=false", "--force"]).success();
    assert_eq!(ws.read("operator/src/main.rs"), by_hand);
    assert_eq!(ws.read("config/manager/manager.yaml"), edited);
    assert!(!ws.read("PROJECT").contains("\nnamespaced: true\n"));
}

#[test]
fn what_cannot_work_is_refused() {
    let ws = project(&[]);
    ws.run(&[
        "create",
        "api",
        "--group",
        "fleet",
        "--version",
        "v1",
        "--kind",
        "Region",
        "--namespaced=false",
    ])
    .success();
    refuses(
        &ws,
        &["--namespaced"],
        "the project has cluster-scoped kinds (fleet.learn.com/v1 Region): a namespaced manager's Role cannot grant them",
        "keep the project cluster-wide, or remove those kinds first",
    );
    refuses(
        &ws,
        &["--multigroup=false"],
        "--multigroup=false: every rsbuilder project holds any number of groups",
        "drop --multigroup=false",
    );
    refuses(
        &ws,
        &["--plugins=helm.kubebuilder.io/v3-alpha"],
        "unknown plugin `helm.kubebuilder.io/v3-alpha` for edit",
        "drop it from --plugins; rsbuilder knows go/v4, kustomize/v2, autoupdate/v1-alpha, grafana/v1-alpha and helm/v2-alpha",
    );
    refuses(
        &ws,
        &["--owner", "bad \"quote\""],
        "invalid --owner `bad \"quote\"`",
        "pass `--owner",
    );
    // Accepted as kubebuilder's scripts pass them: `--multigroup` is recorded in PROJECT, and
    // nothing else changes.
    let mut before = ws.snapshot();
    ws.run(&["edit", "--multigroup", "--plugins=go/v4"])
        .success();
    let project = before.get_mut(std::path::Path::new("PROJECT")).unwrap();
    *project = String::from_utf8(project.clone())
        .unwrap()
        .replace("\nplugins:\n", "\nmultigroup: true\nplugins:\n")
        .into_bytes();
    assert_same_tree(&before, &ws.snapshot(), "`edit --multigroup`");
}

#[test]
fn dry_run_lists_the_changes_and_writes_nothing() {
    let ws = project(&[]);
    let before = ws.snapshot();
    let out = crate::support::stdout(&ws.run(&["edit", "--namespaced", "--dry-run"]).success());
    assert!(
        out.contains("would update config/manager/manager.yaml\n"),
        "{out}"
    );
    assert_same_tree(&before, &ws.snapshot(), "`edit --dry-run`");
}

#[test]
fn a_license_init_does_not_write_is_left_alone_and_not_changed() {
    let ws = project(&[]);
    let manifest = ws.read("Cargo.toml");
    ws.write(
        "Cargo.toml",
        &manifest.replace("license = \"Apache-2.0\"", "license = \"MIT\""),
    );
    refuses(
        &ws,
        &["--license", "none"],
        "the workspace Cargo.toml has `license = \"MIT\"`, which `rsbuilder init` does not write",
        "change the license in Cargo.toml by hand",
    );
    ws.run(&["edit", "--namespaced"]).success();
    assert!(ws.read("Cargo.toml").contains("license = \"MIT\"\n"));
    assert!(
        ws.read("config/manager/manager.yaml")
            .contains("WATCH_NAMESPACE")
    );
}

/// A checkout with CRLF line ends (git's `core.autocrlf`) is no hand edit: `edit` changes the
/// same lines and keeps the line ends.
#[test]
fn a_crlf_checkout_is_edited_like_the_lf_one_and_keeps_its_line_ends() {
    let lf = project(&[]);
    let crlf = project(&[]);
    let to_crlf = |ws: &Workspace| {
        for (path, bytes) in ws.snapshot() {
            let full = ws.root().join(&path);
            if full.is_file()
                && let Ok(text) = String::from_utf8(bytes)
            {
                std::fs::write(&full, text.replace('\n', "\r\n")).unwrap();
            }
        }
    };
    to_crlf(&crlf);
    lf.run(&["edit", "--namespaced"]).success();
    crlf.run(&["edit", "--namespaced"]).success();
    let expected = lf.read("operator/src/main.rs").replace('\n', "\r\n");
    assert_eq!(crlf.read("operator/src/main.rs"), expected);
    assert_eq!(
        crlf.read("config/manager/manager.yaml"),
        lf.read("config/manager/manager.yaml").replace('\n', "\r\n")
    );
}

#[test]
fn a_file_edit_must_change_but_is_missing_is_refused() {
    let ws = project(&[]);
    std::fs::remove_file(ws.root().join("operator/src/main.rs")).unwrap();
    refuses(
        &ws,
        &["--namespaced"],
        "`operator/src/main.rs` is missing, and this change of settings changes it",
        "restore `operator/src/main.rs` (from version control, or from `rsbuilder init` in an empty folder), then run the command again",
    );
}

#[test]
fn a_helper_role_whose_kind_was_changed_by_hand_is_left_with_a_note() {
    let ws = project(&[]);
    let viewer = "config/rbac/appotp_app_otp_viewer_role.yaml";
    let mine = ws
        .read(viewer)
        .replace("kind: ClusterRole\n", "kind: ClusterRole # mine\n");
    ws.write(viewer, &mine);
    let err = stderr(&ws.run(&["edit", "--namespaced"]).success());
    assert!(
        err.lines().any(|line| line
            == format!(
                "note: {viewer} has no `kind: ClusterRole` line; change its kind to `Role` by hand"
            )),
        "{err}"
    );
    assert_eq!(ws.read(viewer), mine);
    for role in ["admin", "editor"] {
        let text = ws.read(&format!("config/rbac/appotp_app_otp_{role}_role.yaml"));
        assert!(text.contains("\nkind: Role\n"), "{text}");
    }
}

#[test]
fn multigroup_is_recorded_in_project_as_kubebuilder_records_it() {
    let made = Workspace::new("otp-operator");
    made.run(&["init", "--domain", "learn.com", "--multigroup"])
        .success();
    assert!(made.read("PROJECT").contains("\nmultigroup: true\n"));
    made.run(APPOTP).success();

    let edited = project(&[]);
    assert!(!edited.read("PROJECT").contains("multigroup"));
    let err = stderr(&edited.run(&["edit", "--multigroup"]).success());
    assert_eq!(err, "updated PROJECT\n");
    assert!(edited.read("PROJECT").contains("\nmultigroup: true\n"));
    // Recorded once: a second `edit --multigroup` changes nothing.
    let err = stderr(&edited.run(&["edit", "--multigroup"]).success());
    assert_eq!(err, "unchanged PROJECT\n");
}

/// kubebuilder's Grafana plugin: the dashboards of the manager and the configuration of the
/// user's metrics; a re-run charts the metrics the configuration lists and keeps the
/// configuration; a configuration that cannot be charted is refused, naming the entry, with the
/// tree unchanged.
#[test]
fn the_grafana_plugin_charts_the_manager_and_the_metrics_the_user_lists() {
    let ws = project(&[]);
    let err = stderr(&ws.run(&["edit", "--plugins=grafana/v1-alpha"]).success());
    assert_eq!(
        err,
        "created grafana/controller-resources-metrics.json\ncreated grafana/controller-runtime-metrics.json\ncreated grafana/custom-metrics/config.yaml\nupdated PROJECT\n"
    );
    assert!(
        ws.read("PROJECT")
            .contains("\n  grafana.kubebuilder.io/v1-alpha: {}\n")
    );
    for dashboard in [
        "grafana/controller-resources-metrics.json",
        "grafana/controller-runtime-metrics.json",
    ] {
        let parsed: serde_json::Value = serde_json::from_str(&ws.read(dashboard)).unwrap();
        assert!(
            !parsed["panels"].as_array().unwrap().is_empty(),
            "{dashboard}"
        );
    }
    assert!(
        !ws.root()
            .join("grafana/custom-metrics/custom-metrics-dashboard.json")
            .exists()
    );

    let config = ws.read("grafana/custom-metrics/config.yaml")
        + "- metric: shop_orders_total\n  type: counter\n- metric: shop_latency_seconds\n  type: histogram\n  unit: s\n";
    ws.write("grafana/custom-metrics/config.yaml", &config);
    let err = stderr(
        &ws.run(&["edit", "--plugins=grafana.kubebuilder.io/v1-alpha"])
            .success(),
    );
    assert_eq!(
        err,
        "unchanged grafana/controller-resources-metrics.json\nunchanged grafana/controller-runtime-metrics.json\ncreated grafana/custom-metrics/custom-metrics-dashboard.json\nunchanged PROJECT\n"
    );
    assert_eq!(ws.read("grafana/custom-metrics/config.yaml"), config);
    let custom: serde_json::Value =
        serde_json::from_str(&ws.read("grafana/custom-metrics/custom-metrics-dashboard.json"))
            .unwrap();
    let titles: Vec<&str> = custom["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["shop_orders_total", "shop_latency_seconds"]);
    assert_eq!(custom["panels"][1]["fieldConfig"]["defaults"]["unit"], "s");

    // A type the dashboard cannot chart: refused, nothing written.
    ws.write(
        "grafana/custom-metrics/config.yaml",
        &(config.clone() + "- metric: shop_sizes\n  type: summary\n"),
    );
    assert_refused(
        &ws,
        &["edit", "--plugins=grafana/v1-alpha"],
        "grafana/custom-metrics/config.yaml: customMetrics[2]: type `summary` is not counter, gauge or histogram",
        "each entry of customMetrics needs `metric` and a `type`",
    );
    // A metric listed twice would be two identical panels: refused, naming both entries.
    ws.write(
        "grafana/custom-metrics/config.yaml",
        &(config.clone() + "- metric: shop_orders_total\n  type: counter\n"),
    );
    assert_refused(
        &ws,
        &["edit", "--plugins=grafana/v1-alpha"],
        "grafana/custom-metrics/config.yaml: customMetrics[2] charts the same query as customMetrics[0]",
        "drop one of the two entries",
    );
    // The dashboards are the user's once written: --force keeps them, --reset-dashboards
    // writes them anew and says so; neither touches the user's configuration.
    ws.write("grafana/custom-metrics/config.yaml", &config);
    ws.write("grafana/controller-runtime-metrics.json", "{}\n");
    ws.run(&["edit", "--plugins=grafana/v1-alpha"]).success();
    assert_eq!(ws.read("grafana/controller-runtime-metrics.json"), "{}\n");
    ws.run(&["edit", "--plugins=grafana/v1-alpha", "--force"])
        .success();
    assert_eq!(ws.read("grafana/controller-runtime-metrics.json"), "{}\n");
    let err = stderr(
        &ws.run(&["edit", "--plugins=grafana/v1-alpha", "--reset-dashboards"])
            .success(),
    );
    assert!(
        err.contains("overwrote grafana/controller-runtime-metrics.json\n"),
        "{err}"
    );
    assert_eq!(ws.read("grafana/custom-metrics/config.yaml"), config);
    assert_ne!(ws.read("grafana/controller-runtime-metrics.json"), "{}\n");
    assert_refused(
        &ws,
        &["edit", "--reset-dashboards"],
        "--reset-dashboards is an option of the grafana/v1-alpha plugin, which this command does not run",
        "add --plugins=grafana/v1-alpha, or drop the option",
    );
}

/// kubebuilder's autoupdate plugin: `edit` adds the workflow that runs `rsbuilder alpha
/// update` on a schedule, and PROJECT records it as kubebuilder does; the workflow is the
/// user's once written, and only `--reset-workflows` writes it again. Other commands refuse the
/// plugin.
#[test]
fn the_autoupdate_plugin_adds_the_update_workflow_once_and_keeps_the_users() {
    let ws = project(&[]);
    const WORKFLOW: &str = ".github/workflows/auto_update.yml";
    let err = stderr(&ws.run(&["edit", "--plugins=autoupdate/v1-alpha"]).success());
    assert!(
        err.starts_with(&format!("created {WORKFLOW}\nupdated PROJECT\n")),
        "{err}"
    );
    assert!(
        ws.read("PROJECT")
            .contains("\nplugins:\n  autoupdate.kubebuilder.io/v1-alpha: {}\n  rsbuilder.io/v1:\n")
    );
    let workflow: serde_yaml::Value = serde_yaml::from_str(&ws.read(WORKFLOW)).unwrap();
    assert_eq!(workflow["on"]["schedule"][0]["cron"], "0 0 * * 2");
    let steps = workflow["jobs"]["auto-update"]["steps"]
        .as_sequence()
        .unwrap();
    let runs: String = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    for command in [
        "if rsbuilder alpha update; then",
        "rsbuilder alpha update --force",
        "gh pr create --head \"$branch\"",
    ] {
        assert!(runs.contains(command), "{runs}");
    }
    assert!(runs.contains("cargo install --locked ${{ vars.RSBUILDER_INSTALL || 'rsbuilder' }}"));

    // Again, with the long key: nothing changes. A workflow the user changed is kept, unless
    // --force.
    let before = ws.snapshot();
    ws.run(&["edit", "--plugins=autoupdate.kubebuilder.io/v1-alpha"])
        .success();
    assert_same_tree(&before, &ws.snapshot(), "the plugin again");
    let mine = ws.read(WORKFLOW).replace("0 0 * * 2", "0 6 * * 1");
    ws.write(WORKFLOW, &mine);
    let err = stderr(&ws.run(&["edit", "--plugins=autoupdate/v1-alpha"]).success());
    assert!(err.contains(&format!("kept {WORKFLOW}\n")), "{err}");
    assert_eq!(ws.read(WORKFLOW), mine);
    // The general --force keeps it too; --reset-workflows writes it anew and says so.
    ws.run(&["edit", "--plugins=autoupdate/v1-alpha", "--force"])
        .success();
    assert_eq!(ws.read(WORKFLOW), mine);
    let err = stderr(
        &ws.run(&["edit", "--plugins=autoupdate/v1-alpha", "--reset-workflows"])
            .success(),
    );
    assert!(err.contains(&format!("overwrote {WORKFLOW}\n")), "{err}");
    assert!(ws.read(WORKFLOW).contains("0 0 * * 2"));
    assert_refused(
        &ws,
        &["edit", "--reset-workflows"],
        "--reset-workflows is an option of the autoupdate/v1-alpha and helm/v2-alpha plugins, which this command does not run",
        "add --plugins=autoupdate/v1-alpha or --plugins=helm/v2-alpha, or drop the option",
    );
    // An edit without the plugin keeps it in PROJECT.
    ws.run(&["edit", "--owner", "Someone"]).success();
    assert!(
        ws.read("PROJECT")
            .contains("  autoupdate.kubebuilder.io/v1-alpha: {}\n")
    );

    assert_refused(
        &ws,
        &[
            "create",
            "api",
            "--group",
            "a",
            "--version",
            "v1",
            "--kind",
            "B",
            "--plugins=autoupdate/v1-alpha",
        ],
        "plugin `autoupdate/v1-alpha` is added to a project by `rsbuilder edit`, not by create api\n",
        "drop it here, then run `rsbuilder edit --plugins=autoupdate/v1-alpha`",
    );
}

/// The update workflow's push: a first push creates the branch; a later run replaces a branch
/// that holds only its own commits, and leaves alone one to which someone pushed fixes, as its
/// pull request asks them to.
#[test]
fn the_update_workflow_never_overwrites_commits_it_did_not_make() {
    let ws = project(&[]);
    ws.run(&["edit", "--plugins=autoupdate/v1-alpha"]).success();
    let workflow: serde_yaml::Value =
        serde_yaml::from_str(&ws.read(".github/workflows/auto_update.yml")).unwrap();
    let job = &workflow["jobs"]["auto-update"];
    let bot = job["env"]["BOT_EMAIL"].as_str().unwrap().to_owned();
    let push = job["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Open a pull request")
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .replace("${{ steps.update.outputs.branch }}", "rsbuilder-update")
        .replace("${{ steps.update.outputs.conflicts }}", "false");
    let dir = tempfile::tempdir().unwrap();
    let (remote, clone, user) = (
        dir.path().join("remote.git"),
        dir.path().join("clone"),
        dir.path().join("user"),
    );
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    crate::support::write_executable(&bin.join("gh"), "#!/bin/sh\nexit 0\n");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let sh = |dir: &std::path::Path, script: &str, email: &str| {
        let output = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .env("PATH", &path)
            .env("BOT_EMAIL", &bot)
            .env("GIT_AUTHOR_NAME", "someone")
            .env("GIT_COMMITTER_NAME", "someone")
            .env("GIT_AUTHOR_EMAIL", email)
            .env("GIT_COMMITTER_EMAIL", email)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(output.status.success(), "{script}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let me = "me@example.com";
    sh(
        dir.path(),
        &format!(
            "git init -q --bare -b main {r} && git init -q -b main {c} && cd {c} && \
             git commit -q --allow-empty -m base && git remote add origin {r} && git push -q origin main",
            r = remote.display(),
            c = clone.display()
        ),
        me,
    );
    let update = |message: &str| {
        sh(
            &clone,
            &format!(
                "git switch -q main && git branch -q -D rsbuilder-update 2>/dev/null || true; \
                 git switch -q -c rsbuilder-update && git commit -q --allow-empty -m '{message}'"
            ),
            &bot,
        );
        sh(&clone, &push, &bot)
    };
    let remote_head = || sh(&remote, "git log -1 --format=%s rsbuilder-update", me);

    update("update 1");
    assert_eq!(
        remote_head(),
        "update 1\n",
        "the first push creates the branch"
    );
    update("update 2");
    assert_eq!(remote_head(), "update 2\n", "its own commits are replaced");

    sh(
        dir.path(),
        &format!(
            "git clone -q -b rsbuilder-update {r} {u} && cd {u} && \
             git commit -q --allow-empty -m 'my fix' && git push -q origin rsbuilder-update",
            r = remote.display(),
            u = user.display()
        ),
        me,
    );
    let said = update("update 3");
    assert_eq!(remote_head(), "my fix\n", "the user's fix is kept");
    assert!(
        said.contains("holds commits of others (me@example.com )"),
        "{said}"
    );
}

/// The Helm plugin in a project without a Makefile says that the chart's targets, which its
/// workflow runs, are missing.
#[test]
fn the_helm_plugin_without_a_makefile_says_so() {
    let ws = project(&[]);
    if build_installer(&ws).is_none() {
        return;
    }
    std::fs::remove_file(ws.root().join("Makefile")).unwrap();
    let err = stderr(&ws.run(&["edit", "--plugins=helm/v2-alpha"]).success());
    assert!(
        err.contains("warning: the project has no Makefile: the Helm targets (helm-deploy, helm-lint, ...) are not added, and .github/workflows/test-chart.yml runs `make helm-*`\nhelp: put the Makefile back"),
        "{err}"
    );
    assert!(!ws.root().join("Makefile").exists());
}

/// `make build-installer`'s install file, written with `kubectl kustomize config/default`; `None`
/// with a note when kubectl does not run, unless `RSBUILDER_REQUIRE_KUBECTL=1`.
fn build_installer(ws: &Workspace) -> Option<()> {
    match std::process::Command::new("kubectl")
        .args(["kustomize", "config/default"])
        .current_dir(ws.root())
        .output()
    {
        Ok(output) if output.status.success() => {
            ws.write(
                "dist/install.yaml",
                &String::from_utf8(output.stdout).unwrap(),
            );
            Some(())
        }
        result if std::env::var("RSBUILDER_REQUIRE_KUBECTL").as_deref() == Ok("1") => {
            panic!("RSBUILDER_REQUIRE_KUBECTL=1, but kubectl kustomize fails: {result:?}")
        }
        result => {
            eprintln!("note: skipping the Helm plugin test, kubectl kustomize fails: {result:?}");
            None
        }
    }
}

/// kubebuilder's Helm plugin: a chart from the install file, recorded in PROJECT, with the
/// Makefile's Helm targets added once; a re-run rewrites the templates, keeps `Chart.yaml`, and
/// keeps the user's values while adding the keys they lack. scripts/check-chart.sh checks such
/// charts with a real helm (scripts/test.sh).
#[test]
fn the_helm_plugin_makes_a_chart_from_the_install_file_and_keeps_the_users_values() {
    let ws = project(&[]);
    refuses(
        &ws,
        &["--plugins=helm/v2-alpha"],
        "`dist/install.yaml` does not exist: the chart is made from the kustomize output",
        "run `make build-installer` first, or name another file with --manifests",
    );
    refuses(
        &ws,
        &["--manifests", "dist/install.yaml"],
        "--manifests is an option of the helm/v2-alpha plugin, which this command does not run",
        "add --plugins=helm/v2-alpha, or drop the option",
    );
    let inside = "a path inside the project, relative to its root, without `..` or `.`";
    let plain = "letters, digits, `.`, `_`, `-` and `/` only";
    let owned = "outside `runtime/`, `.git/`, `target/` and `config/`, which rsbuilder, git, cargo and kustomize own";
    for (flag, value, rule, example) in [
        (
            "--manifests",
            "../install.yaml",
            inside,
            "dist/install.yaml",
        ),
        ("--output-dir", "/tmp/dist", inside, "dist"),
        ("--output-dir", "dist chart", plain, "dist"),
        ("--output-dir", "runtime", owned, "dist"),
        ("--output-dir", "target/chart", owned, "dist"),
        ("--output-dir", ".git", owned, "dist"),
        (
            "--manifests",
            "config/install.yaml",
            owned,
            "dist/install.yaml",
        ),
    ] {
        refuses(
            &ws,
            &["--plugins=helm/v2-alpha", flag, value],
            &format!("{flag} `{value}`: must be {rule}\n"),
            &format!("pass a path such as {flag} {example}\n"),
        );
    }
    if build_installer(&ws).is_none() {
        return;
    }
    // A value that YAML 1.1, which Helm reads, takes for a boolean unless quoted.
    let install = ws.read("dist/install.yaml");
    assert!(install.contains("        env:\n"), "{install}");
    assert!(install.contains("    plural: appotps\n"), "{install}");
    ws.write(
        "dist/install.yaml",
        &install
            .replacen(
                "        env:\n",
                "        env:\n        - name: FEATURE\n          value: 'on'\n",
                1,
            )
            .replacen(
                "    plural: appotps\n",
                "    plural: appotps\n    categories:\n    - 'yes'\n",
                1,
            ),
    );
    let err = stderr(
        &ws.run(&["edit", "--plugins=helm.kubebuilder.io/v2-alpha"])
            .success(),
    );
    let values = ws.read("dist/chart/values.yaml");
    assert!(values.contains("    value: 'on'\n"), "{values}");
    let crd = ws.read("dist/chart/templates/crd/appotps.appotp.learn.com.yaml");
    assert!(crd.contains("    categories:\n    - 'yes'\n"), "{crd}");
    for line in [
        "created dist/chart/Chart.yaml",
        "created dist/chart/values.yaml",
        "created dist/chart/values.schema.json",
        "created dist/chart/templates/_helpers.tpl",
        "created dist/chart/templates/crd/appotps.appotp.learn.com.yaml",
        "created dist/chart/templates/manager/manager.yaml",
        "created dist/chart/templates/rbac/manager-role.yaml",
        "created dist/chart/templates/webhook/mutating-webhook-configuration.yaml",
        "created dist/chart/templates/cert-manager/serving-cert.yaml",
        "created .github/workflows/test-chart.yml",
        "updated Makefile",
        "updated PROJECT",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    assert!(ws.read("PROJECT").contains(
        "\n  helm.kubebuilder.io/v2-alpha:\n    manifests: dist/install.yaml\n    output: dist\n"
    ));
    let makefile = ws.read("Makefile");
    for target in [
        "install-helm:",
        "helm-deploy:",
        "helm-uninstall:",
        "helm-status:",
        "helm-history:",
        "helm-rollback:",
    ] {
        assert_eq!(
            makefile.lines().filter(|l| l.starts_with(target)).count(),
            1,
            "{target}"
        );
    }
    assert!(makefile.contains("\nHELM_CHART ?= dist/chart\nHELM_RELEASE ?= otp-operator\n"));
    let crd = ws.read("dist/chart/templates/crd/appotps.appotp.learn.com.yaml");
    assert!(
        crd.contains("\n    helm.sh/resource-policy: keep\n"),
        "{crd}"
    );
    let webhook = ws.read("dist/chart/templates/webhook/mutating-webhook-configuration.yaml");
    assert!(
        webhook.contains("cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include \"otp-operator.resourceName\" (dict \"suffix\" \"serving-cert\" \"context\" $) }}"),
        "{webhook}"
    );
    assert!(!webhook.contains("otp-operator-system"), "{webhook}");

    // A second run changes nothing.
    let before = ws.snapshot();
    ws.run(&["edit", "--plugins=helm/v2-alpha"]).success();
    assert_same_tree(&before, &ws.snapshot(), "a second run");

    // The user's values and Chart.yaml are kept; a value set to null stays removed, a key
    // deleted comes back, and a template edited by hand is rewritten.
    let values = ws
        .read("dist/chart/values.yaml")
        .replace("  replicas: 1\n", "  replicas: 3 # three\n")
        .replace("networkPolicy:\n  enabled: false\n", "")
        .replace("prometheus:\n  enabled: false\n", "prometheus: null\n");
    ws.write("dist/chart/values.yaml", &values);
    ws.write(
        "dist/chart/Chart.yaml",
        "apiVersion: v2\nname: mine\nversion: 9.9.9\n",
    );
    ws.write("dist/chart/templates/manager/manager.yaml", "edited\n");
    let err = stderr(&ws.run(&["edit", "--plugins=helm/v2-alpha"]).success());
    assert!(
        err.lines().any(|l| l == "kept dist/chart/Chart.yaml"),
        "{err}"
    );
    let merged = ws.read("dist/chart/values.yaml");
    assert!(merged.starts_with(&values), "{merged}");
    assert!(
        merged.ends_with("\nnetworkPolicy:\n  enabled: false\n"),
        "{merged}"
    );
    assert!(merged.contains("\nprometheus: null\n"), "{merged}");
    assert_eq!(
        ws.read("dist/chart/Chart.yaml"),
        "apiVersion: v2\nname: mine\nversion: 9.9.9\n"
    );
    assert_ne!(
        ws.read("dist/chart/templates/manager/manager.yaml"),
        "edited\n"
    );

    // --force keeps the values, which are the user's; --reset-values replaces them, and says
    // so. Chart.yaml is kept either way.
    let mine = ws
        .read("dist/chart/values.yaml")
        .replace("  replicas: 1\n", "  replicas: 3\n");
    ws.write("dist/chart/values.yaml", &mine);
    ws.run(&["edit", "--plugins=helm/v2-alpha", "--force"])
        .success();
    assert_eq!(ws.read("dist/chart/values.yaml"), mine);
    let err = stderr(
        &ws.run(&["edit", "--plugins=helm/v2-alpha", "--reset-values"])
            .success(),
    );
    assert!(
        err.lines().any(|l| l == "overwrote dist/chart/values.yaml"),
        "{err}"
    );
    assert!(
        ws.read("dist/chart/values.yaml")
            .contains("  replicas: 1\n")
    );
    assert_eq!(
        ws.read("dist/chart/Chart.yaml"),
        "apiVersion: v2\nname: mine\nversion: 9.9.9\n"
    );

    // A values.yaml that is not UTF-8 is refused, reset or not, and nothing changes.
    std::fs::write(
        ws.root().join("dist/chart/values.yaml"),
        b"manager:\n  replicas: \xff\n",
    )
    .unwrap();
    for force in [&[][..], &["--force"][..], &["--reset-values"][..]] {
        let mut args = vec!["--plugins=helm/v2-alpha"];
        args.extend_from_slice(force);
        refuses(
            &ws,
            &args,
            "failed to read dist/chart/values.yaml: ",
            "make it a readable UTF-8 file, or remove it to get the generated one",
        );
    }

    // A values.yaml that is not YAML is refused, and nothing changes.
    ws.write("dist/chart/values.yaml", "manager: [\n");
    refuses(
        &ws,
        &["--plugins=helm/v2-alpha"],
        "dist/chart/values.yaml is not valid YAML",
        "correct it, or run again with --reset-values",
    );
}

/// What install.yaml sets on the manager reaches the chart's values: the Deployment's labels
/// and annotations, the pod's, its pull secrets, priority class, strategy, spread constraints,
/// and the volumes and mounts but the certificates' (kubebuilder's v2-alpha keeps the first
/// three of the pod's); the webhook port is `--webhook-port`'s; a ServiceMonitor turns
/// `prometheus.enabled` on. An install file older than config/ is refused, and templates of
/// objects that left it are removed, never the user's own.
#[test]
fn the_helm_chart_follows_the_install_file_and_refuses_a_stale_one() {
    use serde_yaml::Value;
    let ws = project(&[]);
    if build_installer(&ws).is_none() {
        return;
    }
    let yaml = |text: &str| -> Value { serde_yaml::from_str(text).unwrap() };
    let mut documents: Vec<Value> = ws
        .read("dist/install.yaml")
        .split("\n---\n")
        .map(|d| yaml(d.trim_start_matches("---\n")))
        .collect();
    let deployment = documents
        .iter_mut()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    deployment["metadata"]["annotations"] = yaml("owner: team-a");
    deployment["metadata"]["labels"]["tier"] = "control".into();
    deployment["spec"]["strategy"] = yaml("type: Recreate");
    let template = &mut deployment["spec"]["template"];
    template["metadata"]["annotations"]["prometheus.io/scrape"] = "true".into();
    template["metadata"]["labels"]["team"] = "a".into();
    let pod = &mut template["spec"];
    pod["imagePullSecrets"] = yaml("- name: registry");
    pod["priorityClassName"] = "system-cluster-critical".into();
    pod["topologySpreadConstraints"] = yaml(
        "- maxSkew: 1\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: ScheduleAnyway\n",
    );
    let volumes = pod["volumes"].as_sequence_mut().unwrap();
    volumes.push(yaml("name: cache\nemptyDir: {}"));
    let container = &mut pod["containers"][0];
    container["volumeMounts"]
        .as_sequence_mut()
        .unwrap()
        .push(yaml("name: cache\nmountPath: /cache"));
    let args = container["args"].as_sequence_mut().unwrap();
    args.retain(|a| !a.as_str().unwrap().starts_with("--webhook-port"));
    args.push("--webhook-port=9555".into());
    documents.push(yaml(
        "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: otp-operator-controller-manager-metrics-monitor\n  namespace: otp-operator-system\nspec:\n  endpoints:\n  - port: https\n",
    ));
    let dressed: Vec<String> = documents
        .iter()
        .map(|d| serde_yaml::to_string(d).unwrap())
        .collect();
    ws.write("dist/install.yaml", &dressed.join("---\n"));
    ws.run(&["edit", "--plugins=helm/v2-alpha"]).success();
    let values = yaml(&ws.read("dist/chart/values.yaml"));
    let manager = &values["manager"];
    for (key, expected) in [
        ("annotations", "owner: team-a"),
        ("labels", "tier: control"),
        ("strategy", "type: Recreate"),
        (
            "pod",
            "annotations:\n  prometheus.io/scrape: 'true'\nlabels:\n  team: a",
        ),
        ("imagePullSecrets", "- name: registry"),
        ("priorityClassName", "system-cluster-critical"),
        (
            "topologySpreadConstraints",
            "- maxSkew: 1\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: ScheduleAnyway\n",
        ),
        ("extraVolumes", "- name: cache\n  emptyDir: {}"),
        ("extraVolumeMounts", "- name: cache\n  mountPath: /cache"),
    ] {
        assert_eq!(manager[key], yaml(expected), "manager.{key}");
    }
    assert_eq!(values["webhook"]["port"], 9555);
    assert!(
        !manager["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().starts_with("--webhook-port")),
        "{manager:?}"
    );
    assert_eq!(values["prometheus"]["enabled"], true);
    let monitor = ws.read("dist/chart/templates/prometheus/monitor.yaml");
    assert!(
        monitor.contains("(list .Values.prometheus true)"),
        "{monitor}"
    );

    // A kind added since `make build-installer`: the install file is stale, and refused.
    ws.run(&[
        "create",
        "api",
        "--group",
        "appotp",
        "--version",
        "v1",
        "--kind",
        "Bar",
    ])
    .success();
    refuses(
        &ws,
        &["--plugins=helm/v2-alpha"],
        "`dist/install.yaml` is older than config/: it has no CustomResourceDefinition `bars.appotp.learn.com`, which config/crd/bases/appotp.learn.com_bars.yaml holds",
        "write it again with `make build-installer`, then run this command again",
    );
    // The kind's RBAC alone missing is stale too.
    let install = ws.read("dist/install.yaml");
    build_installer(&ws).unwrap();
    let fresh = ws.read("dist/install.yaml");
    let role = fresh.find("\n  name: otp-operator-manager-role\n").unwrap();
    let (head, tail) = fresh.split_at(role);
    assert!(tail.contains("\n  - appotps\n  - bars\n"), "{tail}");
    let crds_only = format!(
        "{head}{}",
        tail.replacen("\n  - appotps\n  - bars\n", "\n  - appotps\n", 1)
    );
    ws.write("dist/install.yaml", &crds_only);
    refuses(
        &ws,
        &["--plugins=helm/v2-alpha"],
        "`dist/install.yaml` is older than config/: its ClusterRole `otp-operator-manager-role` lacks the rule of config/rbac/role.yaml on appotps, bars",
        "write it again with `make build-installer`",
    );
    assert_ne!(install, fresh);
    ws.write("dist/install.yaml", &fresh);
    // A CRD file the CRD kustomization does not list is not the install file's to have.
    ws.write(
        "config/crd/bases/kept.example.com_others.yaml",
        "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: others.kept.example.com\nspec:\n  versions:\n  - name: v1\n",
    );

    // Written again, the chart has Bar; a template of an object gone from the install file
    // is removed, and a template of the user's is kept.
    let mark = "{{/* Code generated by rsbuilder edit --plugins=helm/v2-alpha. DO NOT EDIT. */}}\n";
    ws.write(
        "dist/chart/templates/crd/gones.appotp.learn.com.yaml",
        &format!("{mark}kind: CustomResourceDefinition\n"),
    );
    ws.write("dist/chart/templates/mine.yaml", "kind: ConfigMap\n");
    let err = stderr(&ws.run(&["edit", "--plugins=helm/v2-alpha"]).success());
    assert!(
        err.lines()
            .any(|l| l == "removed dist/chart/templates/crd/gones.appotp.learn.com.yaml"),
        "{err}"
    );
    assert!(
        !ws.root()
            .join("dist/chart/templates/crd/gones.appotp.learn.com.yaml")
            .exists()
    );
    assert_eq!(
        ws.read("dist/chart/templates/mine.yaml"),
        "kind: ConfigMap\n"
    );
    assert!(
        ws.root()
            .join("dist/chart/templates/crd/bars.appotp.learn.com.yaml")
            .is_file()
    );
}
