//! `rsbuilder create webhook`: the module a kind gets, the config/ the first webhook switches
//! on, and the bad input it refuses without changing anything.

use crate::support::{Workspace, assert_refused, assert_same_tree, stderr};

/// A project with Application v1, and Cache v1 and v2.
fn project() -> Workspace {
    let ws = Workspace::new("myoperator");
    ws.run(&["init", "--domain", "example.com"]).success();
    for args in [
        "--group example --version v1 --kind Application",
        "--group example --version v1 --kind Cache",
        "--group example --version v2 --kind Cache --controller=false",
    ] {
        let mut all = vec!["create", "api"];
        all.extend(args.split(' '));
        ws.run(&all).success();
    }
    ws
}

fn webhook(ws: &Workspace, args: &str) -> assert_cmd::assert::Assert {
    let mut all = vec!["create", "webhook"];
    all.extend(args.split(' '));
    ws.run(&all)
}

/// Runs a failing `create webhook` and checks its message, exit code 1 and the untouched tree.
#[track_caller]
fn refuses(ws: &Workspace, args: &str, error: &str, help: &str) {
    let mut all = vec!["create", "webhook"];
    all.extend(args.split(' '));
    assert_refused(ws, &all, &format!("{error}\n"), help);
}

const APPLICATION: &str = "--group example --version v1 --kind Application";
const MODULE: &str = "operator/src/webhooks/example/v1/application.rs";

#[test]
fn the_first_webhook_gets_its_module_and_switches_on_config() {
    let ws = project();
    let assert = webhook(
        &ws,
        &format!("{APPLICATION} --defaulting --programmatic-validation"),
    )
    .success();
    let err = stderr(&assert);
    for line in [
        "created operator/src/webhooks/mod.rs",
        "created operator/src/webhooks/example/v1/application.rs",
        "updated operator/src/main.rs",
        "updated operator/src/lib.rs",
        "created config/webhook/manifests.yaml",
        "created config/webhook/service.yaml",
        "created config/certmanager/certificate-webhook.yaml",
        "created config/default/manager_webhook_patch.yaml",
        "created config/network-policy/allow-webhook-traffic.yaml",
        "updated config/default/kustomization.yaml",
        "updated PROJECT",
    ] {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?} in:\n{err}"
        );
    }
    assert!(
        ws.read("PROJECT").contains(
            "  kind: Application\n  version: v1\n  webhooks:\n    defaulting: true\n    validation: true\n    webhookVersion: v1\n"
        ),
        "{}",
        ws.read("PROJECT")
    );
    let module = ws.read(MODULE);
    assert!(module.contains("pub struct Defaulter;") && module.contains("pub struct Validator;"));
    assert!(module.contains(
        "    webhooks.defaulting(DEFAULTING_PATH, Defaulter);\n    // +rsbuilder:scaffold:register.defaulting\n    webhooks.validating(VALIDATION_PATH, Validator);\n"
    ));
    assert!(
        ws.read("operator/src/main.rs")
            .contains("        .webhooks(webhooks::all())\n")
    );
    let manifests = ws.read("config/webhook/manifests.yaml");
    assert!(manifests.contains("      path: /mutate-example-example-com-v1-application\n"));
    assert!(manifests.contains("  name: vapplication-v1.kb.io\n"));
    let default = ws.read("config/default/kustomization.yaml");
    for wanted in [
        "- ../webhook\n- ../certmanager\n",
        "- path: manager_webhook_patch.yaml\n  target:\n    kind: Deployment\n",
        "  - select:\n      kind: MutatingWebhookConfiguration\n",
        "  - select:\n      kind: ValidatingWebhookConfiguration\n",
    ] {
        assert!(
            default.contains(wanted),
            "missing {wanted:?} in:\n{default}"
        );
    }
    assert!(
        !default.contains("CustomResourceDefinition\n"),
        "no conversion, no CRD injection"
    );
}

#[test]
fn validation_extends_the_module_of_a_defaulting_webhook() {
    let ws = project();
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    let after_defaulting = ws.read("config/default/kustomization.yaml");
    assert!(!after_defaulting.contains("ValidatingWebhookConfiguration"));
    // The user's edit survives.
    let edited = ws.read(MODULE).replace(
        "        Ok(())\n",
        "        object.spec.size = 1;\n        Ok(())\n",
    );
    ws.write(MODULE, &edited);

    let assert = webhook(&ws, &format!("{APPLICATION} --programmatic-validation")).success();
    let err = stderr(&assert);
    assert!(
        err.lines()
            .any(|l| l == "updated operator/src/webhooks/example/v1/application.rs"),
        "{err}"
    );
    assert!(
        !err.contains("created config/"),
        "config/ exists already:\n{err}"
    );
    let module = ws.read(MODULE);
    assert!(module.contains("        object.spec.size = 1;\n"));
    assert_eq!(module.matches("pub struct Defaulter;").count(), 1);
    assert_eq!(module.matches("pub struct Validator;").count(), 1);
    assert_eq!(
        module
            .matches("async fn validation_admits_the_sample")
            .count(),
        1
    );
    let default = ws.read("config/default/kustomization.yaml");
    assert_eq!(default.matches("replacements:").count(), 1);
    assert_eq!(
        default
            .matches("kind: MutatingWebhookConfiguration")
            .count(),
        2
    );
    assert_eq!(
        default
            .matches("kind: ValidatingWebhookConfiguration")
            .count(),
        2
    );
    assert!(
        ws.read("PROJECT")
            .contains("    defaulting: true\n    validation: true\n")
    );
    assert_eq!(
        ws.read("config/webhook/manifests.yaml")
            .matches("- admissionReviewVersions:")
            .count(),
        2
    );
}

#[test]
fn force_writes_the_module_again_with_every_webhook_it_had() {
    let ws = project();
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    webhook(&ws, &format!("{APPLICATION} --programmatic-validation")).success();
    ws.write(MODULE, "// lost\n");
    refuses(
        &ws,
        &format!("{APPLICATION} --defaulting"),
        "a defaulting webhook for example.example.com/v1, Kind=Application already exists",
        "pass --force to scaffold it again, overwriting operator/src/webhooks/example/v1/application.rs",
    );
    let before = ws.snapshot();
    webhook(&ws, &format!("{APPLICATION} --defaulting --force")).success();
    let module = ws.read(MODULE);
    assert!(module.contains("pub struct Defaulter;") && module.contains("pub struct Validator;"));
    // Nothing else changed: the shared files hold each line once.
    let after = ws.snapshot();
    let changed: Vec<_> = after
        .iter()
        .filter(|(path, bytes)| before.get(*path) != Some(bytes))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert_eq!(changed, [MODULE]);
}

#[test]
fn conversion_patches_the_crd_and_injects_its_ca() {
    let ws = project();
    webhook(
        &ws,
        "--group example --version v1 --kind Cache --conversion --spoke v2",
    )
    .success();
    let module = ws.read("operator/src/webhooks/example/v1/cache.rs");
    assert!(module.contains("    conversion.spoke(v2::to_hub, v2::from_hub);\n"));
    assert!(module.contains("pub mod v2 {\n"));
    assert!(module.contains("    webhooks.conversion(conversion());\n"));
    assert!(ws.read("PROJECT").contains(
        "  webhooks:\n    conversion: true\n    spoke:\n    - v2\n    webhookVersion: v1\n"
    ));
    let patch = ws.read("config/crd/patches/webhook_in_caches.yaml");
    assert!(patch.contains("  name: caches.example.example.com\n"));
    assert!(patch.contains("    strategy: Webhook\n"));
    let crd = ws.read("config/crd/kustomization.yaml");
    assert!(
        crd.contains("patches:\n- path: patches/webhook_in_caches.yaml\n"),
        "{crd}"
    );
    assert!(
        crd.contains("configurations:\n- kustomizeconfig.yaml\n"),
        "{crd}"
    );
    let default = ws.read("config/default/kustomization.yaml");
    assert_eq!(
        default
            .matches(
                "      kind: CustomResourceDefinition\n      name: caches.example.example.com\n"
            )
            .count(),
        2
    );
    // Conversion alone has no admission webhook to configure.
    assert!(
        ws.read("config/webhook/manifests.yaml")
            .starts_with("# rsbuilder generate writes the webhook configurations here")
    );
}

/// `kubectl kustomize <dir>` in the project, or `None` with a note when kubectl is missing,
/// unless `RSBUILDER_REQUIRE_KUBECTL=1` makes that a failure.
fn kustomize(ws: &Workspace, dir: &str) -> Option<String> {
    match std::process::Command::new("kubectl")
        .args(["kustomize", dir])
        .current_dir(ws.root())
        .output()
    {
        Ok(output) => {
            assert!(
                output.status.success(),
                "kubectl kustomize {dir}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            Some(String::from_utf8(output.stdout).unwrap())
        }
        Err(error) if std::env::var("RSBUILDER_REQUIRE_KUBECTL").as_deref() == Ok("1") => {
            panic!("RSBUILDER_REQUIRE_KUBECTL=1, but kubectl does not run: {error}")
        }
        Err(error) => {
            eprintln!("note: skipping the kustomize check, kubectl does not run: {error}");
            None
        }
    }
}

/// How many CRDs of the kustomized config point at the conversion webhook.
fn conversions(ws: &Workspace) -> Option<usize> {
    kustomize(ws, "config/default")
        .map(|yaml| yaml.lines().filter(|line| *line == "  conversion:").count())
}

#[test]
fn conversion_webhooks_of_two_kinds_convert_both() {
    let ws = project();
    ws.run(&[
        "create",
        "api",
        "--group",
        "example",
        "--version",
        "v2",
        "--kind",
        "Application",
        "--resource",
        "--controller=false",
    ])
    .success();
    for kind in ["Cache", "Application"] {
        webhook(
            &ws,
            &format!("--group example --version v1 --kind {kind} --conversion --spoke v2"),
        )
        .success();
    }
    let crd = ws.read("config/crd/kustomization.yaml");
    assert!(
        crd.contains(
            "patches:\n- path: patches/webhook_in_caches.yaml\n- path: patches/webhook_in_applications.yaml\n# +rsbuilder:scaffold:crdkustomizewebhookpatchpaths\n\nconfigurations:\n- kustomizeconfig.yaml\n# +rsbuilder:scaffold:crdkustomizewebhookpatch\n"
        ),
        "{crd}"
    );
    assert_eq!(crd.matches("patches:").count(), 1, "{crd}");
    if let Some(count) = conversions(&ws) {
        assert_eq!(count, 2, "both CRDs convert through the webhook");
    }

    // Again with --force: the module is written again as it was, and nothing is inserted twice;
    // the files that come out byte for byte as they were are reported unchanged, not overwritten.
    let before = ws.snapshot();
    let forced = webhook(
        &ws,
        "--group example --version v1 --kind Cache --conversion --spoke v2 --force",
    )
    .success();
    assert_same_tree(&before, &ws.snapshot(), "--conversion --force");
    let err = stderr(&forced);
    assert!(
        err.contains("unchanged operator/src/webhooks/example/v1/cache.rs\n"),
        "{err}"
    );
    assert!(!err.contains("overwrote"), "{err}");
    if let Some(count) = conversions(&ws) {
        assert_eq!(count, 2);
    }
}

/// A spoke joins a kind's conversion at its markers, keeping the user's code; `--force` writes
/// the module again with every spoke it had; a new version of a converting kind says how to
/// convert it.
#[test]
fn a_new_spoke_goes_in_at_the_markers_and_no_spoke_is_ever_dropped() {
    let ws = project();
    for version in ["v2", "v3"] {
        ws.run(&[
            "create",
            "api",
            "--group",
            "example",
            "--version",
            version,
            "--kind",
            "Application",
            "--controller=false",
        ])
        .success();
    }
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    webhook(&ws, &format!("{APPLICATION} --conversion --spoke v2")).success();
    let module = ws.read(MODULE);
    let mine = module.replace(
        "        tracing::debug!(name = ?object.metadata.name, \"defaulting\");\n",
        "        tracing::debug!(name = ?object.metadata.name, \"defaulting\");\n        // mine: the defaults of my kind\n",
    );
    assert_ne!(module, mine);
    ws.write(MODULE, &mine);
    refuses(
        &ws,
        &format!("{APPLICATION} --conversion --spoke v2"),
        "a conversion webhook for example.example.com/v1, Kind=Application already exists, with the spokes v2",
        "pass --spoke with a version it does not convert yet, or --force to scaffold operator/src/webhooks/example/v1/application.rs again",
    );

    webhook(&ws, &format!("{APPLICATION} --conversion --spoke v3")).success();
    let extended = ws.read(MODULE);
    assert!(
        extended.contains("// mine: the defaults of my kind"),
        "{extended}"
    );
    assert!(
        extended.contains("    conversion.spoke(v2::to_hub, v2::from_hub);\n    conversion.spoke(v3::to_hub, v3::from_hub);\n    // +rsbuilder:scaffold:spokes\n"),
        "{extended}"
    );
    for version in ["v2", "v3"] {
        assert_eq!(
            extended.matches(&format!("pub mod {version} {{")).count(),
            1
        );
        assert_eq!(
            extended
                .matches(&format!(
                    "async fn conversion_round_trips_through_{version}()"
                ))
                .count(),
            1
        );
    }
    assert!(
        ws.read("PROJECT").contains(
            "    conversion: true\n    defaulting: true\n    spoke:\n    - v2\n    - v3\n"
        ),
        "{}",
        ws.read("PROJECT")
    );

    // A module written before the conversion had markers gets none of its code twice: the
    // spoke is refused for the missing marker, and nothing changes.
    let marked = ws.read(MODULE);
    let unmarked: String = marked
        .lines()
        .filter(|line| {
            ![
                "+rsbuilder:scaffold:spokes",
                "+rsbuilder:scaffold:spoke-modules",
                "+rsbuilder:scaffold:conversion-tests",
            ]
            .iter()
            .any(|marker| line.trim_end().ends_with(marker))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(unmarked, marked);
    ws.write(MODULE, &unmarked);
    ws.run(&[
        "create",
        "api",
        "--group",
        "example",
        "--version",
        "v5",
        "--kind",
        "Application",
        "--controller=false",
    ])
    .success();
    refuses(
        &ws,
        &format!("{APPLICATION} --conversion --spoke v5"),
        "marker `// +rsbuilder:scaffold:conversion-tests` not found in `operator/src/webhooks/example/v1/application.rs`",
        "put the line `// +rsbuilder:scaffold:conversion-tests` back where rsbuilder should add code",
    );
    assert_eq!(ws.read(MODULE).matches("pub fn conversion()").count(), 1);
    ws.write(MODULE, &marked);

    // --force writes the module again, and keeps both spokes.
    webhook(
        &ws,
        &format!("{APPLICATION} --conversion --spoke v3 --force"),
    )
    .success();
    let forced = ws.read(MODULE);
    assert!(!forced.contains("// mine"));
    for version in ["v2", "v3"] {
        assert_eq!(forced.matches(&format!("pub mod {version} {{")).count(), 1);
    }
    assert!(
        ws.read("PROJECT")
            .contains("    spoke:\n    - v2\n    - v3\n")
    );

    // A fourth version is not converted until it is a spoke, and `create api` says so.
    let err = stderr(
        &ws.run(&[
            "create",
            "api",
            "--group",
            "example",
            "--version",
            "v4",
            "--kind",
            "Application",
            "--controller=false",
        ])
        .success(),
    );
    assert!(
        err.contains("warning: Application converts through its v1 webhook, which cannot convert v4 objects yet"),
        "{err}"
    );
    assert!(
        err.contains("  rsbuilder create webhook --group example --version v1 --kind Application --conversion --spoke v4\n"),
        "{err}"
    );
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let ws = project();
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    let cases = [
        (
            APPLICATION.to_owned(),
            "nothing to scaffold: create webhook needs at least one of --defaulting, --programmatic-validation and --conversion",
            "for example `rsbuilder create webhook --group example --version v1 --kind Application --defaulting --programmatic-validation`",
        ),
        (
            "--group example --version v1 --kind Captain --defaulting".to_owned(),
            "no API example.example.com/v1, Kind=Captain in PROJECT",
            "run `rsbuilder create api --group example --version v1 --kind Captain` first",
        ),
        (
            format!("{APPLICATION} --defaulting"),
            "a defaulting webhook for example.example.com/v1, Kind=Application already exists",
            "pass --force to scaffold it again",
        ),
        (
            format!("{APPLICATION} --programmatic-validation --defaulting-path /m"),
            "--defaulting-path `/m` can only be used with --defaulting",
            "add --defaulting, or drop --defaulting-path",
        ),
        (
            format!("{APPLICATION} --programmatic-validation --validation-path validate"),
            "invalid --validation-path `validate`: must be `/` then segments of lowercase letters, digits, `-` and `.` (each starting and ending with a letter or digit, as the API server requires), other than /convert",
            "pass something like `--validation-path=/custom-mutate-application`",
        ),
        // What the marker would refuse is refused at the flag, before any file is planned.
        (
            format!("{APPLICATION} --programmatic-validation --validation-path /Mutate_Foo"),
            "invalid --validation-path `/Mutate_Foo`: must be `/` then segments of lowercase letters, digits, `-` and `.` (each starting and ending with a letter or digit, as the API server requires), other than /convert",
            "pass something like `--validation-path=/custom-mutate-application`",
        ),
        (
            format!("{APPLICATION} --programmatic-validation --spoke v2"),
            "--spoke v2 can only be used with --conversion",
            "add --conversion, or drop --spoke",
        ),
        (
            "--group example --version v1 --kind Cache --conversion".to_owned(),
            "--conversion needs the versions to convert to and from the hub",
            "pass --spoke with the kind's other versions, as in `--conversion --spoke v2` (the hub is --version v1)",
        ),
        (
            format!("{APPLICATION} --conversion --spoke v2"),
            "--conversion needs a second version of Application: it has only v1",
            "add one with `rsbuilder create api --group example --version <v2> --kind Application`, then convert",
        ),
        (
            "--group example --version v1 --kind Cache --conversion --spoke v3".to_owned(),
            "invalid spoke version `v3`: the other versions of Cache are v2",
            "pass --spoke with versions that `create api` made for this kind",
        ),
        (
            "--group example --version v2 --kind Cache --conversion --spoke v1".to_owned(),
            "the hub of a conversion must be the storage version of Cache, v1, not v2",
            "pass --version v1 and list the other versions with --spoke",
        ),
        (
            format!("{APPLICATION} --programmatic-validation --plural apps"),
            "invalid plural `apps`: example.example.com/v1, Kind=Application is `applications` in PROJECT",
            "drop --plural: the webhooks use the kind's resource name",
        ),
        (
            "--group example --version v1 --kind Cache --defaulting --defaulting-path /mutate-example-example-com-v1-application".to_owned(),
            "the webhook path `/mutate-example-example-com-v1-application` is taken by example.example.com/v1, Kind=Application",
            "pass another --defaulting-path or --validation-path",
        ),
    ];
    for (args, error, help) in cases {
        refuses(&ws, &args, error, help);
    }
}

#[test]
fn a_dry_run_lists_the_changes_and_writes_nothing() {
    let ws = project();
    let before = ws.snapshot();
    let assert = webhook(&ws, &format!("{APPLICATION} --defaulting --dry-run")).success();
    let out = crate::support::stdout(&assert);
    assert!(
        out.contains("would create operator/src/webhooks/example/v1/application.rs\n"),
        "{out}"
    );
    assert!(!stderr(&assert).contains("would "));
    assert_same_tree(&before, &ws.snapshot(), "a dry run");
}

#[test]
fn custom_paths_are_recorded_and_kept_when_the_module_grows() {
    let ws = project();
    webhook(
        &ws,
        &format!(
            "{APPLICATION} --programmatic-validation --validation-path /custom-validate-application"
        ),
    )
    .success();
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    let project = ws.read("PROJECT");
    assert!(
        project.contains("    validationPath: /custom-validate-application\n"),
        "{project}"
    );
    let manifests = ws.read("config/webhook/manifests.yaml");
    assert!(manifests.contains("      path: /custom-validate-application\n"));
    assert!(manifests.contains("      path: /mutate-example-example-com-v1-application\n"));
}

#[test]
fn generate_names_a_malformed_webhook_marker_with_its_line() {
    let ws = project();
    webhook(&ws, &format!("{APPLICATION} --defaulting")).success();
    let module = ws
        .read(MODULE)
        .replace("failurePolicy=fail", "failurePolicy=sometimes");
    ws.write(MODULE, &module);
    let line = module
        .lines()
        .position(|l| l.contains("failurePolicy=sometimes"))
        .unwrap()
        + 1;
    let before = ws.snapshot();
    let assert = ws.run(&["generate"]).code(1);
    let err = stderr(&assert);
    assert!(
        err.contains(&format!(
            "error: invalid webhook marker at operator/src/webhooks/example/v1/application.rs:{line}: `failurePolicy=sometimes` must be one of fail, ignore"
        )),
        "{err}"
    );
    assert_same_tree(&before, &ws.snapshot(), "a failed generate");
}

#[test]
fn kinds_of_kubernetes_get_webhooks_without_an_api_in_project() {
    let ws = project();
    let assert = webhook(
        &ws,
        "--group core --version v1 --kind Pod --programmatic-validation",
    )
    .success();
    let err = stderr(&assert);
    assert!(err.contains("warning: a webhook on one of Kubernetes' own kinds"));
    // The warning points at the marker keys that narrow the webhook, and the next manifests
    // carry the selector the user adds there.
    assert!(
        err.contains("help: narrow it in its `+rsbuilder:webhook` markers in operator/src/webhooks/k8s_core/v1/pod.rs, with a label selector such as `namespaceSelector=kubernetes.io/metadata.name!=myoperator-system`"),
        "{err}"
    );
    let module = ws.read("operator/src/webhooks/k8s_core/v1/pod.rs");
    let narrowed = module.replace(
        "admissionReviewVersions=v1\n",
        "admissionReviewVersions=v1,namespaceSelector=kubernetes.io/metadata.name!=myoperator-system\n",
    );
    assert_ne!(module, narrowed);
    ws.write("operator/src/webhooks/k8s_core/v1/pod.rs", &narrowed);
    webhook(
        &ws,
        "--group apps --version v1 --kind Deployment --defaulting",
    )
    .success();
    assert!(
        ws.read("config/webhook/manifests.yaml").contains(
            "  namespaceSelector:\n    matchExpressions:\n    - key: kubernetes.io/metadata.name\n      operator: NotIn\n      values:\n      - myoperator-system\n  rules:\n"
        )
    );
    webhook(
        &ws,
        "--group apps --version v1 --kind Deployment --programmatic-validation",
    )
    .success();
    let pod = ws.read("operator/src/webhooks/k8s_core/v1/pod.rs");
    assert!(
        pod.contains("type Object = k8s_openapi::api::core::v1::Pod;"),
        "{pod}"
    );
    assert!(pod.contains("pub const VALIDATION_PATH: &str = \"/validate--v1-pod\";"));
    let manifests = ws.read("config/webhook/manifests.yaml");
    assert!(
        manifests.contains("  - apiGroups:\n    - \"\"\n"),
        "{manifests}"
    );
    assert!(manifests.contains("      path: /mutate-apps-v1-deployment\n"));
    let project = ws.read("PROJECT");
    assert!(
        project.contains("- core: true\n  group: core\n  kind: Pod\n  version: v1\n  webhooks:\n    validation: true\n"),
        "{project}"
    );
    refuses(
        &ws,
        "--group apps --version v1 --kind Deployment --conversion --spoke v2",
        "--conversion converts between the versions of a custom resource, and apps/v1, Kind=Deployment is Kubernetes' own",
        "drop --conversion",
    );
    refuses(
        &ws,
        "--group apps --version v1 --kind Deployment --defaulting",
        "a defaulting webhook for apps/v1, Kind=Deployment already exists",
        "pass --force to scaffold it again",
    );
    refuses(
        &ws,
        "--group admissionregistration --version v1 --kind ValidatingWebhookConfiguration --programmatic-validation",
        "the API server calls no admission webhook for admissionregistration.k8s.io/v1, Kind=ValidatingWebhookConfiguration: objects of admissionregistration.k8s.io are never sent to webhooks, so that a webhook cannot lock the cluster out of fixing its webhooks",
        "check those objects in a controller instead",
    );
}

/// kubebuilder names webhooks `m<kind>-<version>.kb.io`; the same kind in another group takes
/// its group into its names instead of being refused for a name it cannot choose.
#[test]
fn the_same_kind_in_two_groups_gets_webhooks_with_their_own_names() {
    let ws = project();
    for group in ["example", "other"] {
        if group == "other" {
            ws.run(&[
                "create",
                "api",
                "--group",
                "other",
                "--version",
                "v1",
                "--kind",
                "Cache",
            ])
            .success();
        }
        webhook(
            &ws,
            &format!(
                "--group {group} --version v1 --kind Cache --defaulting --programmatic-validation"
            ),
        )
        .success();
    }
    let manifests = ws.read("config/webhook/manifests.yaml");
    for name in [
        "mcache-v1.kb.io",
        "vcache-v1.kb.io",
        "mcache-other-example-com-v1.kb.io",
        "vcache-other-example-com-v1.kb.io",
    ] {
        assert_eq!(
            manifests.matches(&format!("  name: {name}\n")).count(),
            1,
            "{name} in\n{manifests}"
        );
    }
    // Running it again for the first kind keeps its names.
    webhook(
        &ws,
        "--group example --version v1 --kind Cache --defaulting --programmatic-validation --force",
    )
    .success();
    assert_eq!(ws.read("config/webhook/manifests.yaml"), manifests);
}

/// Moving the project to another namespace and name prefix in config/default moves every name a
/// certificate or a client checks: both Certificates' DNS names, the ServiceMonitor's
/// `serverName` (Prometheus over TLS switched on as its comments say) and cert-manager's CA
/// injection, so that TLS verification holds under any `namespace` and `namePrefix`.
#[test]
fn every_dns_name_follows_the_namespace_and_name_prefix_of_config_default() {
    let ws = project();
    webhook(
        &ws,
        &format!("{APPLICATION} --defaulting --programmatic-validation"),
    )
    .success();
    webhook(
        &ws,
        "--group example --version v1 --kind Cache --conversion --spoke v2",
    )
    .success();
    let default = ws.read("config/default/kustomization.yaml");
    let edited = default
        .replacen("namespace: myoperator-system\n", "namespace: shop\n", 1)
        .replacen("namePrefix: myoperator-\n", "namePrefix: blue-\n", 1)
        .replacen("#- ../prometheus\n", "- ../prometheus\n", 1)
        .replacen(
            "#- path: cert_metrics_manager_patch.yaml\n#  target:\n#    kind: Deployment\n",
            "- path: cert_metrics_manager_patch.yaml\n  target:\n    kind: Deployment\n",
            1,
        );
    assert_eq!(
        edited.matches("shop").count() + edited.matches("blue-").count(),
        2,
        "{default}"
    );
    assert!(edited.contains("\n- ../prometheus\n") && edited.contains("\n- path: cert_metrics"));
    ws.write("config/default/kustomization.yaml", &edited);
    // The ServiceMonitor without TLS verification builds too, and names the Service as well.
    if let Some(yaml) = kustomize(&ws, "config/default") {
        assert!(
            yaml.contains("serverName: blue-controller-manager-metrics-service.shop.svc\n"),
            "{yaml}"
        );
    }
    let prometheus = ws.read("config/prometheus/kustomization.yaml");
    let tls =
        "#patches:\n#  - path: monitor_tls_patch.yaml\n#    target:\n#      kind: ServiceMonitor\n";
    assert!(prometheus.contains(tls), "{prometheus}");
    ws.write(
        "config/prometheus/kustomization.yaml",
        &prometheus.replacen(tls, &tls.replace('#', ""), 1),
    );

    let Some(yaml) = kustomize(&ws, "config/default") else {
        return;
    };
    for stale in [
        "myoperator-system",
        "myoperator-",
        "SERVICE_NAME",
        "SERVICE_NAMESPACE",
    ] {
        assert!(!yaml.contains(stale), "`{stale}` is left in:\n{yaml}");
    }
    let objects: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|document| serde::Deserialize::deserialize(document).unwrap())
        .collect();
    let named = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in:\n{yaml}"))
    };
    for (certificate, service) in [
        ("blue-serving-cert", "blue-webhook-service"),
        (
            "blue-metrics-certs",
            "blue-controller-manager-metrics-service",
        ),
    ] {
        named("Service", service);
        let names = &named("Certificate", certificate)["spec"]["dnsNames"];
        let expected: serde_yaml::Value = serde_yaml::from_str(&format!(
            "[{service}.shop.svc, {service}.shop.svc.cluster.local]"
        ))
        .unwrap();
        assert_eq!(names, &expected, "{certificate}");
    }
    let monitor = named("ServiceMonitor", "blue-controller-manager-metrics-monitor");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"],
        "blue-controller-manager-metrics-service.shop.svc"
    );
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["insecureSkipVerify"],
        false
    );
    let injected: Vec<_> = objects
        .iter()
        .filter_map(|o| o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as_str())
        .collect();
    assert_eq!(injected, ["shop/blue-serving-cert"; 3], "{yaml}");
}

/// config/webhook-self-certs is config/default without cert-manager, under any namespace and
/// name prefix: no cert-manager object or annotation, the manager told its Service's final name
/// and given a writable certificate directory, and the certificate manager's permissions bound
/// to its ServiceAccount in its namespace, the Secrets' only there.
#[test]
fn the_self_managed_certificate_overlay_drops_cert_manager_and_follows_config_default() {
    let ws = project();
    webhook(
        &ws,
        &format!("{APPLICATION} --defaulting --programmatic-validation"),
    )
    .success();
    webhook(
        &ws,
        "--group example --version v1 --kind Cache --conversion --spoke v2",
    )
    .success();
    let default = ws.read("config/default/kustomization.yaml");
    ws.write(
        "config/default/kustomization.yaml",
        &default
            .replacen("namespace: myoperator-system\n", "namespace: shop\n", 1)
            .replacen("namePrefix: myoperator-\n", "namePrefix: blue-\n", 1),
    );
    let (Some(with_cert_manager), Some(yaml)) = (
        kustomize(&ws, "config/default"),
        kustomize(&ws, "config/webhook-self-certs"),
    ) else {
        return;
    };
    let parse = |yaml: &str| -> Vec<serde_yaml::Value> {
        serde_yaml::Deserializer::from_str(yaml)
            .map(|document| serde::Deserialize::deserialize(document).unwrap())
            .collect()
    };
    let (base, objects) = (parse(&with_cert_manager), parse(&yaml));
    assert!(!yaml.contains("cert-manager"), "{yaml}");
    assert!(!yaml.contains("myoperator-system"), "{yaml}");
    // Every object of config/default but cert-manager's is there, and four RBAC objects more.
    let id = |o: &serde_yaml::Value| {
        format!(
            "{} {}",
            o["kind"].as_str().unwrap(),
            o["metadata"]["name"].as_str().unwrap()
        )
    };
    let kept: Vec<String> = base
        .iter()
        .filter(|o| {
            !o["apiVersion"]
                .as_str()
                .unwrap()
                .starts_with("cert-manager.io/")
        })
        .map(id)
        .collect();
    assert_eq!(kept.len() + 3, base.len(), "an Issuer and two Certificates");
    let mut expected = kept;
    expected.extend(
        [
            "ClusterRole blue-webhook-certs-role",
            "ClusterRoleBinding blue-webhook-certs-rolebinding",
            "Role blue-webhook-certs-role",
            "RoleBinding blue-webhook-certs-rolebinding",
        ]
        .map(str::to_owned),
    );
    expected.sort();
    let mut found: Vec<String> = objects.iter().map(id).collect();
    found.sort();
    assert_eq!(found, expected);

    let named = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in:\n{yaml}"))
    };
    let deployment = named("Deployment", "blue-controller-manager");
    let pod = &deployment["spec"]["template"]["spec"];
    let manager = &pod["containers"][0];
    let env = |name: &str| {
        manager["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {manager:?}"))
            .clone()
    };
    assert_eq!(env("WEBHOOK_CERT_SECRET")["value"], "webhook-server-cert");
    assert_eq!(env("WEBHOOK_SERVICE_NAME")["value"], "blue-webhook-service");
    named("Service", "blue-webhook-service");
    assert_eq!(
        env("POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "webhook-certs")
        .unwrap();
    let expected_volume: serde_yaml::Value =
        serde_yaml::from_str("{name: webhook-certs, emptyDir: {}}").unwrap();
    assert_eq!(volume, &expected_volume);
    let mount = manager["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "webhook-certs")
        .unwrap();
    assert_eq!(mount["mountPath"], "/tmp/k8s-webhook-server/serving-certs");
    assert_eq!(mount["readOnly"], false);
    assert!(
        manager["args"]
            .as_sequence()
            .unwrap()
            .contains(&"--webhook-cert-path=/tmp/k8s-webhook-server/serving-certs".into())
    );

    let subject: serde_yaml::Value = serde_yaml::from_str(
        "[{kind: ServiceAccount, name: blue-controller-manager, namespace: shop}]",
    )
    .unwrap();
    let cluster_binding = named("ClusterRoleBinding", "blue-webhook-certs-rolebinding");
    assert_eq!(cluster_binding["subjects"], subject);
    assert_eq!(
        cluster_binding["roleRef"]["name"],
        "blue-webhook-certs-role"
    );
    let binding = named("RoleBinding", "blue-webhook-certs-rolebinding");
    assert_eq!(binding["metadata"]["namespace"], "shop");
    assert_eq!(binding["subjects"], subject);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], "blue-webhook-certs-role");
    // The Secret by name only, in the manager's namespace only.
    let role = named("Role", "blue-webhook-certs-role");
    assert_eq!(role["metadata"]["namespace"], "shop");
    let rules: serde_yaml::Value = serde_yaml::from_str(
        "[{apiGroups: [''], resources: [secrets], verbs: [create]},
          {apiGroups: [''], resourceNames: [webhook-server-cert], resources: [secrets], verbs: [get, update]}]",
    )
    .unwrap();
    assert_eq!(role["rules"], rules);
    assert_eq!(
        env("WEBHOOK_CERT_SECRET")["value"],
        rules[1]["resourceNames"][0]
    );
    // Patches only to the project's own webhook configurations and converted CRD, by name.
    let cluster_role = named("ClusterRole", "blue-webhook-certs-role");
    let rules: serde_yaml::Value = serde_yaml::from_str(
        "[{apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations, validatingwebhookconfigurations], verbs: [list]},
          {apiGroups: [admissionregistration.k8s.io], resourceNames: [blue-mutating-webhook-configuration], resources: [mutatingwebhookconfigurations], verbs: [patch]},
          {apiGroups: [admissionregistration.k8s.io], resourceNames: [blue-validating-webhook-configuration], resources: [validatingwebhookconfigurations], verbs: [patch]},
          {apiGroups: [apiextensions.k8s.io], resourceNames: [caches.example.example.com], resources: [customresourcedefinitions], verbs: [get, patch]}]",
    )
    .unwrap();
    assert_eq!(cluster_role["rules"], rules);
    named(
        "MutatingWebhookConfiguration",
        "blue-mutating-webhook-configuration",
    );
    named(
        "ValidatingWebhookConfiguration",
        "blue-validating-webhook-configuration",
    );
    // The conversion webhook's CRD and the webhook configurations still call the Service, so
    // the manager finds them.
    let crd = named("CustomResourceDefinition", "caches.example.example.com");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"],
        "blue-webhook-service"
    );
}

/// A project made before Kubernetes' kinds had `k8s_<group>` modules keeps their webhooks in
/// `webhooks/<group>/`: a webhook added to such a kind goes into that module, never into a
/// second one that would register the kind's paths twice.
#[test]
fn a_webhook_of_kubernetes_kind_joins_its_module_where_an_earlier_rsbuilder_put_it() {
    let ws = project();
    webhook(
        &ws,
        "--group core --version v1 --kind Pod --programmatic-validation",
    )
    .success();
    // The layout of an earlier rsbuilder: `webhooks/core/v1/pod.rs`.
    let webhooks = ws.root().join("operator/src/webhooks");
    std::fs::rename(webhooks.join("k8s_core"), webhooks.join("core")).unwrap();
    let registry = ws.read("operator/src/webhooks/mod.rs");
    assert_eq!(registry.matches("k8s_core").count(), 2, "{registry}");
    ws.write(
        "operator/src/webhooks/mod.rs",
        &registry.replace("k8s_core", "core"),
    );

    let err = stderr(&webhook(&ws, "--group core --version v1 --kind Pod --defaulting").success());
    assert!(
        err.contains("updated operator/src/webhooks/core/v1/pod.rs\n"),
        "{err}"
    );
    assert!(!webhooks.join("k8s_core").exists(), "{err}");
    assert!(!ws.read("operator/src/webhooks/mod.rs").contains("k8s_core"));
    let pod = ws.read("operator/src/webhooks/core/v1/pod.rs");
    assert!(
        pod.contains("pub const DEFAULTING_PATH: &str = \"/mutate--v1-pod\";"),
        "{pod}"
    );
    assert!(
        pod.contains("pub const VALIDATION_PATH: &str = \"/validate--v1-pod\";"),
        "{pod}"
    );
}
