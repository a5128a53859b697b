use super::*;

#[test]
fn the_root_is_the_nearest_directory_with_a_project_file() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("operator/src");
    std::fs::create_dir_all(&nested).unwrap();
    let error = find_root(&nested).unwrap_err();
    assert!(
        error.to_string().starts_with("no PROJECT file found in `"),
        "{error}"
    );
    std::fs::write(dir.path().join(FILE), "").unwrap();
    assert_eq!(find_root(&nested).unwrap(), dir.path());
    assert_eq!(find_root(dir.path()).unwrap(), dir.path());
    // A directory named PROJECT is not the file.
    std::fs::create_dir_all(nested.join(FILE)).unwrap();
    assert_eq!(find_root(&nested).unwrap(), dir.path());
}

/// What PROJECT records is checked when it is read, as on the command line: the
/// rsbuilder that `alpha update` installs is a version, not more arguments, and the chart's
/// paths stay inside the project and out of the folders others own.
#[test]
fn recorded_versions_and_chart_paths_are_checked_when_read() {
    let head = "domain: learn.com\nlayout:\n- rsbuilder.io/v1\nprojectName: p\nversion: \"3\"\n";
    let helm = |key: &str, value: &str| {
        format!("cliVersion: 0.1.0\n{head}plugins:\n  {HELM}:\n    {key}: {value}\n")
    };
    let refused = [
        (
            format!("cliVersion: 0.0.9 --path ../elsewhere\n{head}"),
            "cliVersion `0.0.9 --path ../elsewhere`: must be a version such as",
        ),
        (
            helm("manifests", "../install.yaml"),
            "`manifests:` `../install.yaml`: must be a path inside the project",
        ),
        (
            helm("manifests", "/etc/install.yaml"),
            "`manifests:` `/etc/install.yaml`: must be a path inside the project",
        ),
        (
            helm("output", "runtime"),
            "`output:` `runtime`: must be outside `runtime/`, `.git/`, `target/` and `config/`",
        ),
        (
            helm("output", ".git/hooks"),
            "`output:` `.git/hooks`: must be outside",
        ),
    ];
    for (text, error) in refused {
        let refused = parse(&text).unwrap_err().to_string();
        assert!(
            refused.starts_with("PROJECT is not valid: ") && refused.contains(error),
            "{refused}"
        );
    }
    let fine = parse(&helm("output", "deploy/helm")).unwrap();
    assert_eq!(fine.helm.unwrap().output, "deploy/helm");
}

#[test]
fn a_core_kind_is_kubernetes_own_with_both_layouts_and_a_project_kind_has_one() {
    let text = "cliVersion: 0.1.0\ndomain: learn.com\nlayout:\n- rsbuilder.io/v1\nprojectName: p\nversion: \"3\"\n\
resources:\n- core: true\n  group: apps\n  kind: Deployment\n  version: v1\n  \
webhooks:\n    defaulting: true\n- api:\n    crdVersion: v1\n  domain: learn.com\n  group: ship\n  \
kind: Frigate\n  version: v1\n";
    let project = parse(text).unwrap();
    let [deployment, frigate] = project.resources.as_slice() else {
        panic!("{:?}", project.resources);
    };
    assert_eq!(
        deployment.webhooks.as_ref().unwrap().webhook_version,
        "v1",
        "webhookVersion defaults to v1"
    );
    assert_eq!(deployment.builtin().map(|b| b.kind), Some("Deployment"));
    let layouts = deployment.layouts("learn.com");
    assert_eq!(layouts.len(), 2, "today's layout and the earlier one");
    assert_eq!(layouts[0].kind, "Deployment");
    assert_ne!(layouts[0].group_module, layouts[1].group_module);
    assert_eq!(
        deployment.names("learn.com").group_module,
        layouts[0].group_module
    );
    assert!(frigate.builtin().is_none());
    let layouts = frigate.layouts("learn.com");
    assert_eq!(layouts.len(), 1);
    assert_eq!(layouts[0].crd_name, "frigates.ship.learn.com");
    assert_eq!(frigate.group_with_domain(), "ship.learn.com");
    assert_eq!(deployment.group_with_domain(), "apps");
    let no_group = Resource {
        group: String::new(),
        ..frigate.clone()
    };
    assert_eq!(no_group.group_with_domain(), "learn.com");
    assert!(frigate.is("ship", "v1", "Frigate"));
    for (group, version, kind) in [
        ("sail", "v1", "Frigate"),
        ("ship", "v2", "Frigate"),
        ("ship", "v1", "Sloop"),
    ] {
        assert!(
            !frigate.is(group, version, kind),
            "{group}/{version} {kind}"
        );
    }
}

fn project() -> Project {
    Project {
        autoupdate: false,
        cli_version: "0.1.0".into(),
        grafana: false,
        helm: None,
        domain: "learn.com".into(),
        multigroup: false,
        namespaced: false,
        project_name: "otp-operator".into(),
        repo: None,
        kube_version: "5.0.0".into(),
        k8s_openapi_version: "0.29.0".into(),
        runtime: None,
        resources: Vec::new(),
        deploy_images: Vec::new(),
    }
}

/// A resource of `group/version kind` under `domain`, with nothing else recorded.
fn resource(domain: &str, group: &str, version: &str, kind: &str) -> Resource {
    Resource {
        api: None,
        controller: false,
        controllers: Vec::new(),
        core: false,
        domain: domain.into(),
        group: group.into(),
        kind: kind.into(),
        plural: None,
        version: version.into(),
        webhooks: None,
        extra: Default::default(),
    }
}

/// PROJECT as `project` writes it, after checking that it reads back as `project`.
fn written(project: &Project) -> String {
    let yaml = project.to_yaml();
    assert_eq!(&parse(&yaml).unwrap(), project);
    yaml
}

#[test]
fn resources_are_written_as_kubebuilder_writes_them_and_read_back() {
    let mut project = project();
    project.resources = vec![
        Resource {
            api: Some(ResourceApi {
                crd_version: "v1".into(),
                namespaced: true,
                ssa: false,
            }),
            controller: true,
            webhooks: Some(ResourceWebhooks {
                conversion: true,
                defaulting: true,
                defaulting_path: None,
                spoke: vec!["v2".into()],
                validation: true,
                validation_path: Some("/custom-validate-appotp".into()),
                webhook_version: "v1".into(),
            }),
            ..resource("learn.com", "appotp", "v1", "AppOTP")
        },
        Resource {
            api: Some(ResourceApi {
                crd_version: "v1".into(),
                namespaced: false,
                ssa: false,
            }),
            plural: Some("persons".into()),
            ..resource("learn.com", "fleet", "v1beta1", "Person")
        },
    ];
    let yaml = written(&project);
    assert!(
            yaml.contains(
                "resources:\n- api:\n    crdVersion: v1\n    namespaced: true\n  controller: true\n  domain: learn.com\n  group: appotp\n  kind: AppOTP\n  version: v1\n  webhooks:\n    conversion: true\n    defaulting: true\n    spoke:\n    - v2\n    validation: true\n    validationPath: /custom-validate-appotp\n    webhookVersion: v1\n- api:\n    crdVersion: v1\n  domain: learn.com\n  group: fleet\n  kind: Person\n  plural: persons\n  version: v1beta1\nversion: \"3\"\n"
            ),
            "{yaml}"
        );
}

#[test]
fn kubernetes_kinds_and_images_are_recorded_as_kubebuilder_records_them() {
    let mut project = project();
    project.resources = vec![
        Resource {
            controller: true,
            core: true,
            ..resource("", "apps", "v1", "Deployment")
        },
        Resource {
            controller: true,
            core: true,
            ..resource("k8s.io", "networking", "v1", "Ingress")
        },
    ];
    project.deploy_images = vec![DeployImage {
        domain: "learn.com".into(),
        group: "example.com".into(),
        kind: "Memcached".into(),
        options: DeployImageOptions {
            container_command: Some("memcached,--memory-limit=64,-o,modern,-v".into()),
            container_port: Some("11211".into()),
            image: "memcached:1.6.26-alpine3.19".into(),
            run_as_user: Some("1001".into()),
        },
        version: "v1alpha1".into(),
    }];
    let yaml = written(&project);
    assert!(
            yaml.contains(
                "plugins:\n  deploy-image.go.kubebuilder.io/v1-alpha:\n    resources:\n    - domain: learn.com\n      group: example.com\n      kind: Memcached\n      options:\n        containerCommand: \"memcached,--memory-limit=64,-o,modern,-v\"\n        containerPort: \"11211\"\n        image: \"memcached:1.6.26-alpine3.19\"\n        runAsUser: \"1001\"\n      version: v1alpha1\n  rsbuilder.io/v1:\n"
            ),
            "{yaml}"
        );
    assert!(
            yaml.contains(
                "resources:\n- controller: true\n  core: true\n  group: apps\n  kind: Deployment\n  version: v1\n- controller: true\n  core: true\n  domain: k8s.io\n  group: networking\n"
            ),
            "{yaml}"
        );
}

#[test]
fn the_runtime_is_recorded_under_the_plugin_and_read_back() {
    let mut project = project();
    project.runtime = Some(RuntimeRecord {
        version: "0.1.0".into(),
        checksum: Some(format!("sha256:{}", "ab".repeat(32))),
        form: crate::runtime::Form::Vendored,
    });
    let yaml = project.to_yaml();
    assert!(
            yaml.contains(&format!(
                "    kubeVersion: 5.0.0\n    runtimeChecksum: sha256:{}\n    runtimeVersion: 0.1.0\nprojectName:",
                "ab".repeat(32)
            )),
            "{yaml}"
        );
    assert_eq!(parse(&yaml).unwrap(), project);
    // A vendored runtime without its checksum is no runtime PROJECT can vouch for.
    let without = yaml.replace(
        &format!("    runtimeChecksum: sha256:{}\n", "ab".repeat(32)),
        "",
    );
    assert_eq!(parse(&without).unwrap().runtime, None);
}

#[test]
fn a_runtime_taken_from_elsewhere_records_its_form_and_no_checksum() {
    for form in [
        "registry",
        "path:../rsbuilder/runtime",
        "git:https://github.com/rsbuilder/rsbuilder#v0.1.0",
    ] {
        let mut project = project();
        project.runtime = Some(RuntimeRecord {
            version: "0.1.0".into(),
            checksum: None,
            form: crate::runtime::Form::parse(form).unwrap(),
        });
        let yaml = project.to_yaml();
        assert!(
            yaml.contains(&format!(
                "    kubeVersion: 5.0.0\n    runtime: {form}\n    runtimeVersion: 0.1.0\nprojectName:"
            )),
            "{yaml}"
        );
        assert_eq!(parse(&yaml).unwrap(), project);
        // A checksum beside it is left: only a copy in runtime/ has one.
        let with = yaml.replace(
            "    runtimeVersion:",
            &format!(
                "    runtimeChecksum: sha256:{}\n    runtimeVersion:",
                "ab".repeat(32)
            ),
        );
        assert_eq!(parse(&with).unwrap(), project);
    }
    let vendored = RuntimeRecord::current(crate::runtime::Form::Vendored);
    let files = crate::runtime::files();
    let checksums = &files[std::path::Path::new("runtime/CHECKSUMS")];
    assert_eq!(vendored.checksum, Some(crate::runtime::record(checksums)));
    assert_eq!(vendored.version, crate::runtime::version());
    let registry = RuntimeRecord::current(crate::runtime::Form::Registry);
    assert_eq!(registry.checksum, None);
    assert_eq!(registry.form, crate::runtime::Form::Registry);
    let mut project = project();
    project.runtime = Some(crate::project::RuntimeRecord::current(
        crate::runtime::Form::Registry,
    ));
    let yaml = project
        .to_yaml()
        .replace("runtime: registry", "runtime: crates");
    let error = parse(&yaml).unwrap_err().to_string();
    assert!(
        error.contains("PROJECT is not valid: `crates` is not a form of the runtime crate"),
        "{error}"
    );
}

#[test]
fn hand_edited_values_and_unknown_keys_are_refused() {
    let good = project().to_yaml();
    for (edit, message) in [
            (
                good.replace("domain: learn.com", "domain: Learn.COM"),
                "PROJECT is not valid: invalid domain `Learn.COM`",
            ),
            (
                good.replace("projectName: otp-operator", "projectName: My_Operator"),
                "PROJECT is not valid: invalid project name `My_Operator`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- controllers:\n  - name: Bad_Name\n  kind: Foo\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: invalid controller name `Bad_Name`",
            ),
            (
                good.replace("version: \"3\"", "version: \"3\"\nmultiGroup: true"),
                "PROJECT is not valid: unknown field `multiGroup`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: app_otp\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/v1 app_otp: invalid kind `app_otp`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: AppOTP\n  version: one\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/one AppOTP: invalid version `one`",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: Apps_X\n  kind: AppOTP\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource Apps_X/v1 AppOTP: ",
            ),
            (
                good.replace(
                    "version: \"3\"",
                    "resources:\n- group: apps\n  kind: AppOTP\n  version: v1\n- group: apps\n  kind: AppOTP\n  version: v1\nversion: \"3\"",
                ),
                "PROJECT is not valid: resource apps/v1 AppOTP is listed twice",
            ),
        ] {
            let error = parse(&edit).unwrap_err();
            assert!(error.to_string().starts_with(message), "{error}");
            let help = error
                .downcast_ref::<UserError>()
                .and_then(UserError::help_text);
            assert!(help.is_some(), "{error}");
        }
}

/// Keys of a resource that rsbuilder does not know (kubebuilder's `path`, a later
/// rsbuilder's) survive a write.
#[test]
fn unknown_keys_of_a_resource_round_trip() {
    let text = project().to_yaml().replace(
            "version: \"3\"",
            "resources:\n- group: apps\n  kind: AppOTP\n  version: v1\n  path: example.com/api/v1\n  external: true\n  future:\n    nested:\n    - 'on'\nversion: \"3\"",
        );
    let project = parse(&text).unwrap();
    let extra = &project.resources[0].extra;
    assert_eq!(
        extra.keys().collect::<Vec<_>>(),
        ["external", "future", "path"]
    );
    let written = project.to_yaml();
    assert!(
            written.contains("  version: v1\n  external: true\n  future:\n    nested:\n    - on\n  path: example.com/api/v1\n"),
            "{written}"
        );
    assert_eq!(parse(&written).unwrap(), project);
}

#[test]
fn a_foreign_or_broken_project_file_is_refused() {
    let kubebuilder = "domain: x.io\nlayout:\n- go.kubebuilder.io/v4\nprojectName: p\nversion: \"3\"\ncliVersion: 4.0.0\n";
    let error = parse(kubebuilder).unwrap_err();
    assert!(error.to_string().contains("layout"), "{error}");
    assert!(parse("domain: [").is_err());
}

#[test]
fn written_in_kubebuilder_key_order() {
    assert_eq!(
        project().to_yaml(),
        "# Code generated by rsbuilder. DO NOT EDIT.\n\
             # This file records how the project was scaffolded; rsbuilder reads it on every command.\n\
             cliVersion: 0.1.0\n\
             domain: learn.com\n\
             layout:\n\
             - rsbuilder.io/v1\n\
             plugins:\n  rsbuilder.io/v1:\n    k8sOpenapiVersion: 0.29.0\n    kubeVersion: 5.0.0\n\
             projectName: otp-operator\n\
             version: \"3\"\n"
    );
}

/// Every string PROJECT keeps without checking it reads back as it was written, whatever it
/// holds, at whatever depth it sits, in a key rsbuilder does not know too.
#[test]
fn any_string_round_trips() {
    for tricky in crate::yaml::TRICKY {
        let value = || (*tricky).to_owned();
        let mut project = project();
        project.repo = Some(value());
        project.kube_version = value();
        project.k8s_openapi_version = value();
        project.runtime = Some(RuntimeRecord {
            version: value(),
            checksum: Some(value()),
            form: crate::runtime::Form::Vendored,
        });
        project.resources = vec![Resource {
            api: Some(ResourceApi {
                crd_version: value(),
                namespaced: true,
                ssa: false,
            }),
            controller: true,
            controllers: Vec::new(),
            // Kind, group and version are checked when PROJECT is read; what `core`
            // resources record is not under the domain.
            core: false,
            domain: "learn.com".into(),
            group: "apps".into(),
            kind: "AppOTP".into(),
            plural: Some(value()),
            version: "v1".into(),
            webhooks: Some(ResourceWebhooks {
                conversion: true,
                defaulting: true,
                defaulting_path: Some(value()),
                spoke: vec![value(), value()],
                validation: true,
                validation_path: Some(value()),
                webhook_version: value(),
            }),
            extra: BTreeMap::from([("unknownKey".to_owned(), serde_yaml::Value::String(value()))]),
        }];
        project.deploy_images = vec![DeployImage {
            domain: format!("{tricky}d"),
            group: format!("{tricky}g"),
            kind: format!("{tricky}k"),
            options: DeployImageOptions {
                container_command: Some(value()),
                container_port: Some(value()),
                image: value(),
                run_as_user: Some(value()),
            },
            version: format!("{tricky}v"),
        }];
        let yaml = project.to_yaml();
        let read = parse(&yaml).unwrap_or_else(|error| panic!("{tricky:?}: {error}\n{yaml}"));
        assert_eq!(read, project, "{tricky:?} in\n{yaml}");
    }
}

#[test]
fn values_that_need_quotes_get_them() {
    let mut project = project();
    project.namespaced = true;
    project.repo = Some("https://github.com/learn/otp-operator: #1".into());
    let yaml = project.to_yaml();
    assert!(yaml.contains("namespaced: true\n"), "{yaml}");
    let parsed: serde_yaml::Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(
        parsed["repo"].as_str(),
        Some("https://github.com/learn/otp-operator: #1")
    );
    assert_eq!(parsed["version"].as_str(), Some("3"));
    for tricky in ["true", "1.0", "null", "~", "yes", "0x1f"] {
        let quoted = crate::yaml::scalar(tricky);
        let parsed: serde_yaml::Value = serde_yaml::from_str(&quoted).unwrap();
        assert_eq!(parsed.as_str(), Some(tricky), "{quoted}");
    }
}
