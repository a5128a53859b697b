use super::*;

#[test]
fn every_name_made_from_the_longest_domain_fits_its_limit() {
    let longest = format!(
        "{}.com",
        "a".repeat(60)
            + "."
            + &"b".repeat(60)
            + "."
            + &"c".repeat(60)
            + "."
            + &"d".repeat(MAX_DOMAIN - 4 - 183)
    );
    assert_eq!(longest.len(), MAX_DOMAIN);
    assert!(validate_domain(&longest).is_ok());
    assert!(leader_election_id("my-operator", &longest).len() <= 253);
    let over = format!("e{longest}");
    let error = validate_domain(&over).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("it has 245 characters, and may have 244"),
        "{error}"
    );
    assert_eq!(error.help_text(), Some("pass a shorter --domain"));
}

#[test]
fn webhooks_are_named_as_kubebuilder_names_them() {
    let names = ResourceNames::new("example", "v1", "Application", None, "example.com");
    assert_eq!(
        webhook_path("mutate", &names),
        "/mutate-example-example-com-v1-application"
    );
    assert_eq!(webhook_name('m', &names, &[]), "mapplication-v1.kb.io");
    assert_eq!(
        webhook_name('m', &names, &["mapplication-v1.kb.io".to_owned()]),
        "mapplication-example-example-com-v1.kb.io"
    );
    let pod = builtin_names(find_builtin("core", "v1", "Pod").unwrap());
    assert_eq!(webhook_path("validate", &pod), "/validate--v1-pod");
    assert_eq!(group_shown(pod.qualified_group.as_str()), "core");
    assert_eq!(api_group("core"), "");
    assert_eq!(api_group("apps"), "apps");
    assert_eq!(crd_file("a.io", "bs"), "a.io_bs.yaml");
}

#[test]
fn modules_never_take_the_files_of_crates_or_of_their_parents() {
    for stem in ["bin", "lib", "main", "mod", "schema", "support"] {
        let kind = format!("{}{}", stem[..1].to_uppercase(), &stem[1..]);
        let names = ResourceNames::new(stem, "v1", &kind, None, "learn.com");
        let suffixed = format!("{stem}_");
        assert_eq!(
            (names.group_module.as_str(), names.group_dir.as_str()),
            (suffixed.as_str(), suffixed.as_str())
        );
        assert_eq!(
            (names.kind_module.as_str(), names.kind_file.as_str()),
            (suffixed.as_str(), suffixed.as_str())
        );
        assert_eq!(names.qualified_group, format!("{stem}.learn.com"));
    }
}

#[test]
fn groups_versions_kinds_plurals() {
    for good in ["appotp", "apps", "foo-bar", "foo.policy", ""] {
        assert!(validate_group(good, "learn.com").is_ok(), "{good:?}");
    }
    for (bad, help) in [
        ("app_otp", "pass `--group app-otp`"),
        ("AppOTP", "pass `--group appotp`"),
    ] {
        let error = validate_group(bad, "learn.com").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("invalid group `{bad}`")),
            "{error}"
        );
        assert_eq!(error.help_text(), Some(help));
    }
    for good in ["v1", "v2", "v1beta1", "v2alpha3", "v10"] {
        assert!(validate_version(good).is_ok(), "{good}");
    }
    for (bad, fix) in [
        ("1", "v1"),
        ("V1", "v1"),
        ("v1beta", "v1"),
        ("v0", "v1"),
        ("v1gamma1", "v1"),
        ("", "v1"),
        ("V1Beta1", "v1beta1"),
    ] {
        let error = validate_version(bad).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid version `{bad}`: must look like `v1`, `v1beta1` or `v2alpha1`")
        );
        assert_eq!(
            error.help_text(),
            Some(format!("pass `--version {fix}`").as_str()),
            "{bad}"
        );
    }
    for good in ["AppOTP", "Loop", "Client", "Memcached", "V2"] {
        assert!(validate_kind(good).is_ok(), "{good}");
    }
    for (bad, help) in [
        ("appOTP", "pass `--kind AppOtp`"),
        ("app_otp", "pass `--kind AppOtp`"),
        (
            "Self",
            "the kind names the generated Rust type: choose another name for it",
        ),
        (
            "Option",
            "the kind names the generated Rust type: choose another name for it",
        ),
        (
            "Vec",
            "the kind names the generated Rust type: choose another name for it",
        ),
        ("8ball", "pass a PascalCase kind such as `--kind AppOTP`"),
        ("App-OTP", "pass `--kind AppOtp`"),
    ] {
        let error = validate_kind(bad).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("invalid kind `{bad}`")),
            "{error}"
        );
        assert_eq!(error.help_text(), Some(help), "{bad}");
    }
    assert!(validate_kind(&format!("A{}", "b".repeat(62))).is_ok());
    let error = validate_kind(&format!("A{}", "b".repeat(63))).unwrap_err();
    assert!(
        error.to_string().ends_with("must be at most 63 characters"),
        "{error}"
    );
    assert!(validate_plural("appotps").is_ok());
    assert!(validate_plural("app_otps").is_err());
    assert!(validate_plural("9lives").is_err());
    let error = validate_domain("10.0.0.1").unwrap_err();
    assert!(
        error.to_string().contains("an IP address is not a domain"),
        "{error}"
    );
    assert!(validate_domain("localhost").is_ok());
    let error = validate_group("", "localhost").unwrap_err();
    assert_eq!(
        error.help_text(),
        Some("pass a group, such as `--group apps` for `apps.localhost`")
    );
    assert!(validate_group("g", "localhost").is_ok());
    let long = [
        "A".repeat(60),
        "a".repeat(60),
        "a".repeat(60),
        "a".repeat(60),
    ]
    .join(".");
    let error = validate_group(&long, "learn.example.com").unwrap_err();
    assert_eq!(
        error.help_text(),
        Some("pass a lowercase group such as `--group apps`"),
        "the lowercased group is no subdomain with the domain: 261 characters"
    );
    assert!(validate_group("", "learn.com").is_ok());
    for (bad, help) in [
        ("App_OTPs", "pass `--plural app-otps`"),
        (
            "9w",
            "leave out --plural to use the kind's plural, or pass one that starts with a letter, such as `--plural apps`",
        ),
        // Lowercased, still no label: no fix is offered.
        (
            "9W",
            "leave out --plural to use the kind's plural, or pass one that starts with a letter, such as `--plural apps`",
        ),
    ] {
        let error = validate_plural(bad).unwrap_err();
        assert_eq!(error.help_text(), Some(help), "{bad}");
    }
}

#[test]
fn resource_names_are_valid_rust() {
    let names = ResourceNames::new("appotp", "v1", "AppOTP", None, "learn.com");
    assert_eq!(
        (
            names.group_module.as_str(),
            names.kind_module.as_str(),
            names.kind_file.as_str()
        ),
        ("appotp", "app_otp", "app_otp")
    );
    assert_eq!(names.crd_name, "appotps.appotp.learn.com");
    assert_eq!(names.short_name.as_deref(), Some("aotp"));
    assert_eq!(names.file_prefix, "appotp_app_otp");
    assert!(!names.plural_overridden);

    let names = ResourceNames::new("super", "v1", "Loop", Some("loopies"), "learn.com");
    assert_eq!(
        (names.group_module.as_str(), names.group_dir.as_str()),
        ("super_", "super_")
    );
    assert_eq!(
        (names.kind_module.as_str(), names.kind_file.as_str()),
        ("r#loop", "loop")
    );
    assert!(names.plural_overridden);

    let names = ResourceNames::new("type", "v1", "Client", None, "learn.com");
    assert_eq!(
        (names.group_module.as_str(), names.group_dir.as_str()),
        ("r#type", "type")
    );

    let names = ResourceNames::new("", "v1", "Widget", None, "learn.com");
    assert_eq!(names.qualified_group, "learn.com");
    assert_eq!(names.group_module, "learn_com");
    assert_eq!(names.short_name.as_deref(), Some("widget"));
}

#[test]
fn domains() {
    for good in [
        "learn.com",
        "my.domain",
        "a",
        "x-1.example.org",
        "tutorial.kubebuilder.io",
    ] {
        assert!(validate_domain(good).is_ok(), "{good}");
    }
    for (bad, fix) in [
        ("Learn.COM", Some("learn.com")),
        ("learn_com.io", Some("learn-com.io")),
        ("-learn.com", Some("learn.com")),
        ("learn..com", Some("learn.com")),
        ("", None),
    ] {
        let error = validate_domain(bad).unwrap_err();
        assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
        match fix {
            Some(fix) => assert_eq!(
                error.help_text(),
                Some(format!("pass `--domain {fix}`").as_str())
            ),
            None => assert!(error.help_text().is_some()),
        }
    }
    assert!(
        validate_domain(&"a.".repeat(127)).is_err(),
        "over 253 characters"
    );
}

#[test]
fn project_names() {
    for good in ["otp-operator", "memcached-operator", "a", "op2"] {
        assert!(validate_project_name(good, false).is_ok(), "{good}");
    }
    for (bad, fix) in [
        ("My_Operator", "my-operator"),
        ("my.operator", "my-operator"),
        ("1operator", "operator"),
        ("-op", "op"),
        ("test", "my-operator"),
        ("fn", "my-operator"),
        ("op-", "op"),
        ("my--op", "my-op"),
        ("kube", "my-operator"),
        ("tokio", "my-operator"),
    ] {
        let error = validate_project_name(bad, false).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("invalid project name `{bad}`")),
            "{error}"
        );
        assert_eq!(
            error.help_text(),
            Some(format!("pass `--project-name {fix}`").as_str()),
            "{bad}"
        );
    }
    for bad in [
        "My_Operator",
        "Std",
        "Kube-Runtime",
        "a--b",
        "9-tokio",
        &"B".repeat(70),
        &format!("{}-b", "a".repeat(55)),
    ] {
        let help = validate_project_name(bad, false)
            .unwrap_err()
            .help_text()
            .unwrap()
            .to_owned();
        let fix = help
            .strip_prefix("pass `--project-name ")
            .and_then(|rest| rest.strip_suffix('`'))
            .unwrap();
        assert!(validate_project_name(fix, false).is_ok(), "{bad}: {help}");
    }
    assert!(validate_project_name(&"a".repeat(56), false).is_ok());
    assert!(validate_project_name(&"a".repeat(57), false).is_err());
    assert!(validate_group("bin", "learn.com").is_ok());
    let error = validate_project_name("My_Operator", true).unwrap_err();
    assert!(
        error.to_string().contains("from the directory name"),
        "{error}"
    );
}

#[test]
fn free_text() {
    assert!(validate_text("owner", "The otp-operator Authors", "x").is_ok());
    for bad in ["", "  ", "say \"hi\"", "a\\b", "two\nlines"] {
        let error = validate_text("owner", bad, "x").unwrap_err();
        assert!(error.to_string().starts_with("invalid --owner"), "{error}");
    }
}

#[test]
fn images_follow_the_reference_grammar() {
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    for good in [
        "nginx".to_owned(),
        "nginx:1.25".to_owned(),
        "library/nginx:latest".to_owned(),
        "memcached:1.6.26-alpine3.19".to_owned(),
        "registry.example.com:5000/team/app__x.y---z:V1.0_rc".to_owned(),
        "localhost:5000/a".to_owned(),
        "Registry.Example.COM/a".to_owned(),
        "[::1]:5000/a/b".to_owned(),
        "[fe80::1]/a".to_owned(),
        "192.168.0.1:80/a".to_owned(),
        format!("a@{digest}"),
        format!("reg.io/a:b@{digest}"),
        format!("a:{}", "x".repeat(128)),
        "reg.io:5000".to_owned(),
        "my-reg.io:5000/a".to_owned(),
        "a-b/c".to_owned(),
    ] {
        assert!(
            validate_image(&good).is_ok(),
            "{good}: {:?}",
            validate_image(&good)
        );
    }
    for (bad, problem) in [
        ("", "the repository is empty"),
        (":tag", "the repository is empty"),
        ("reg.io/:tag", "the repository component ``"),
        ("NGINX:1.0", "the repository component `NGINX`"),
        ("reg.io/Team/app", "the repository component `Team`"),
        ("nginx:", "the tag `` after `:`"),
        ("nginx:.1", "the tag `.1`"),
        ("nginx:a:b", "the repository component `nginx:a`"),
        ("a$b", "the repository component `a$b`"),
        ("reg.io/ng\"inx:1", "the repository component `ng\"inx`"),
        ("a\\b", "the repository component `a\\b`"),
        ("nginx latest", "the repository component `nginx latest`"),
        ("two\nlines", "the repository component `two\\nlines`"),
        ("a..b", "the repository component `a..b`"),
        ("a___b", "the repository component `a___b`"),
        ("-a", "the repository component `-a`"),
        ("a//b", "the repository component ``"),
        ("reg.io:port/a", "the repository component `reg.io:port`"),
        ("a@sha256:abc", "the digest `sha256:abc`"),
        ("a@md5:0123", "the digest `md5:0123`"),
        // Registries: a host of DNS labels, an address in brackets, or neither.
        ("[]/a", "the repository component `[]`"),
        ("[zz]/a", "the repository component `[zz]`"),
        ("[::1]x/a", "the repository component `[::1]x`"),
        ("[::1/a", "the repository component `[::1`"),
        (":5000/a", "the repository component `:5000`"),
        ("a_b:5000/c", "the repository component `a_b:5000`"),
        ("-reg.io:5000/a", "the repository component `-reg.io:5000`"),
        ("reg-.io:5000/a", "the repository component `reg-.io:5000`"),
        ("reg..io:5000/a", "the repository component `reg..io:5000`"),
        ("reg.io:/a", "the repository component `reg.io:`"),
        ("reg.io:50a0/a", "the repository component `reg.io:50a0`"),
    ] {
        let error = validate_image(bad).unwrap_err();
        assert!(
            error.to_string().contains(&format!(": {problem}")),
            "{bad:?}: {error}"
        );
        assert!(error.help_text().is_some(), "{bad:?}");
    }
    assert!(validate_image(&format!("{}:1", "a".repeat(255))).is_ok());
    let long = format!("{}:1", "a".repeat(256));
    assert!(
        validate_image(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than 255")
    );
    assert!(validate_image(&format!("a:{}", "x".repeat(129))).is_err());
}

#[test]
fn rust_strings_read_back_as_given() {
    assert_eq!(rust_string("nginx:1"), "\"nginx:1\"");
    assert_eq!(rust_string("a\\b \"c\"\n"), "\"a\\\\b \\\"c\\\"\\n\"");
    assert_eq!(rust_string("ünï ✓"), "\"ünï ✓\"");
}

#[test]
fn derived_names() {
    assert_eq!(crate_ident("otp-operator"), "otp_operator");
    assert_eq!(
        leader_election_id("otp-operator", "learn.com"),
        leader_election_id("otp-operator", "learn.com")
    );
    let id = leader_election_id("otp-operator", "learn.com");
    assert!(
        id.ends_with(".learn.com") && id.len() == 8 + ".learn.com".len(),
        "{id}"
    );
    assert_ne!(id, leader_election_id("other", "learn.com"));
    // FNV-1a of the empty string is its offset basis; the others are its test vectors, and
    // the Lease kubebuilder names for the same project.
    assert_eq!(leader_election_id("", "d"), "811c9dc5.d");
    assert_eq!(leader_election_id("a", "d"), "e40c292c.d");
    assert_eq!(leader_election_id("foobar", "d"), "bf9cf968.d");
    assert_eq!(id, "4881aefd.learn.com");
}

#[test]
fn the_default_project_name_is_the_directory_lowercased() {
    let name = |dir: &str| default_project_name(std::path::Path::new(dir));
    assert_eq!(name("/work/My-Operator").as_deref(), Some("my-operator"));
    assert_eq!(name("otp").as_deref(), Some("otp"));
    assert_eq!(name("/"), None);
}

#[test]
fn the_core_group_is_written_core_and_passed_empty() {
    assert_eq!(group_flag(""), "''");
    assert_eq!(group_flag("apps"), "apps");
    assert_eq!((group_shown(""), group_shown("apps")), ("core", "apps"));
    assert_eq!((api_group("core"), api_group("apps")), ("", "apps"));
}

#[test]
fn kubernetes_groups_are_found_by_their_short_names() {
    assert_eq!(builtin_group_of("core").as_deref(), Some(""));
    assert_eq!(builtin_group_of("apps").as_deref(), Some("apps"));
    assert_eq!(
        builtin_group_of("networking").as_deref(),
        Some("networking.k8s.io")
    );
    assert_eq!(
        builtin_group_of("networking.k8s.io").as_deref(),
        Some("networking.k8s.io")
    );
    assert_eq!(
        builtin_group_of("flowcontrol").as_deref(),
        Some("flowcontrol.apiserver.k8s.io")
    );
    assert_eq!(builtin_group_of("appotp"), None);
    assert_eq!(builtin_group_of(""), None);

    let found = find_builtin("apps", "v1", "Deployment").unwrap();
    assert_eq!(
        (found.group, found.version, found.kind),
        ("apps", "v1", "Deployment")
    );
    let found = find_builtin("core", "v1", "Pod").unwrap();
    assert_eq!((found.group, found.version, found.kind), ("", "v1", "Pod"));
    assert!(find_builtin("apps", "v1", "Pod").is_none());
    assert!(find_builtin("apps", "v1beta1", "Deployment").is_none());
    assert!(find_builtin("batch", "v1", "Deployment").is_none());
    assert!(matches!(builtin("appotp", "v1", "AppOTP"), Ok(None)));
    assert_eq!(
        builtin("apps", "v1", "Deployment").unwrap().map(|b| b.kind),
        Some("Deployment")
    );
}

#[test]
fn a_miss_in_a_kubernetes_group_names_what_the_group_has() {
    let error = builtin("apps", "v1beta1", "Deployment").unwrap_err();
    assert_eq!(
        error.to_string(),
        "Kubernetes has no version `v1beta1` of the `apps` group"
    );
    assert_eq!(error.help_text(), Some("its versions are v1"));
    let error = builtin("apps", "v1", "Pod").unwrap_err();
    assert_eq!(error.to_string(), "Kubernetes has no kind `Pod` in apps/v1");
    assert_eq!(
        error.help_text(),
        Some(
            "its kinds there are ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet"
        )
    );
    let error = builtin("core", "v2", "Pod").unwrap_err();
    assert_eq!(
        error.to_string(),
        "Kubernetes has no version `v2` of the `core` group"
    );
    assert_eq!(error.help_text(), Some("its versions are v1"));
}

#[test]
fn a_named_controller_has_names_of_its_own_and_the_kinds_name_is_the_kinds_own() {
    for (name, want) in [
        ("captain-backup", ("captain_backup", "captain_backup")),
        ("type", ("r#type", "type")),
    ] {
        let (module, file) = controller_module(name);
        assert_eq!((module.as_str(), file.as_str()), want);
    }
    let names = ResourceNames::new("appotp", "v1", "AppOTP", None, "learn.com");
    assert!(!names.named_controller());
    let own = names.clone().with_controller("app-otp");
    assert!(!own.named_controller());
    assert_eq!(
        (own.controller_name.as_str(), own.finalizer.as_str()),
        (names.controller_name.as_str(), names.finalizer.as_str())
    );
    let captain = names.clone().with_controller("captain");
    assert!(captain.named_controller());
    assert_eq!(
        (
            captain.controller_name.as_str(),
            captain.finalizer.as_str(),
            captain.condition_type.as_str(),
            captain.controller_module.as_str(),
            captain.controller_file.as_str(),
        ),
        (
            "appotp-captain",
            "appotp.learn.com/captain",
            "CaptainReady",
            "captain",
            "captain"
        )
    );
}

#[test]
fn a_kind_is_named_once_as_kubernetes_prints_it() {
    let gvk = Gvk::new("example.com", "v1", "Application");
    assert_eq!(gvk.to_string(), "example.com/v1, Kind=Application");
    assert_eq!(gvk.group_kind(), "example.com Kind=Application");
    assert_eq!(Gvk::new("", "v1", "Pod").to_string(), "core/v1, Kind=Pod");
    let deployment = find_builtin("apps", "v1", "Deployment").unwrap();
    assert_eq!(
        Gvk::builtin(deployment).to_string(),
        "apps/v1, Kind=Deployment"
    );
    assert_eq!(api_crate("otp-operator"), "otp-operator-api");
    assert_eq!(api_crate_ident("otp-operator"), "otp_operator_api");
}

/// Asserts that `check` takes each of `taken` as the number it writes and refuses each of
/// `refused`.
#[track_caller]
fn checks<T: ToString, E>(check: fn(&str) -> Result<T, E>, taken: &[&str], refused: &[&str]) {
    for value in taken {
        assert_eq!(
            check(value).ok().map(|n| n.to_string()).as_deref(),
            Some(*value)
        );
    }
    for value in refused {
        assert!(check(value).is_err(), "{value:?}");
    }
}

#[test]
fn an_images_options_are_checked_by_their_rules() {
    checks(
        container_port,
        &["1", "11211", "65535"],
        &["0", "65536", "-1", "80a", ""],
    );
    let refusal = container_port("0").unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "invalid --image-container-port `0`: a port is a number from 1 to 65535"
    );
    checks(
        run_as_user,
        &["1", "1001", "2147483647"],
        &["0", "-1", "2147483648", "root"],
    );
    assert!(run_as_user("0").unwrap_err().help_text().is_some());
    assert_eq!(
        container_command("memcached,-m,64").unwrap(),
        ["memcached", "-m", "64"]
    );
    assert_eq!(container_command("nginx").unwrap(), ["nginx"]);
    for refused in ["a,,b", ",a", "a,", "a\nb", "a\tb", " "] {
        assert!(container_command(refused).is_err(), "{refused:?}");
    }
}
