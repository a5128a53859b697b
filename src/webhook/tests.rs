use super::*;

const MUTATE: &str = "// +rsbuilder:webhook:path=/mutate-example-example-com-v1-application,mutating=true,failurePolicy=fail,sideEffects=None,groups=example.example.com,resources=applications,verbs=create;update,versions=v1,name=mapplication-v1.kb.io,admissionReviewVersions=v1";
const VALIDATE: &str = "// +rsbuilder:webhook:path=/validate-example-example-com-v1-application,mutating=false,failurePolicy=fail,sideEffects=None,groups=example.example.com,resources=applications,verbs=create;update,versions=v1,name=vapplication-v1.kb.io,admissionReviewVersions=v1";
const POD: &str = "// +rsbuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=Ignore,sideEffects=NoneOnDryRun,groups=core,resources=pods,verbs=create,versions=v1,name=mpod-v1.kb.io,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=IfNeeded";

fn parse_all(text: &str) -> Vec<Marker> {
    markers(Path::new("operator/src/webhooks/x.rs"), text).unwrap()
}

#[test]
fn markers_become_controller_gen_manifests() {
    let text = format!("{VALIDATE}\nstruct A;\n    {POD}\n{MUTATE}\n");
    let yaml = manifests(&parse_all(&text)).unwrap();
    assert_eq!(yaml, include_str!("testdata/manifests.yaml"));
    let parsed: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&yaml)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect();
    assert_eq!(parsed.len(), 2);
    assert!(manifests(&[]).unwrap().starts_with("# rsbuilder generate"));
}

#[test]
fn malformed_markers_name_file_and_line() {
    // Each marker is MUTATE with `from` made `to`.
    let edits = [
        (
            "failurePolicy=fail",
            "failurePolicy=maybe",
            "`failurePolicy=maybe` must be one of fail, ignore",
        ),
        (
            "verbs=create;update",
            "verbs=create;patch",
            "unknown verb `patch`: use create, update, delete or connect",
        ),
        (",sideEffects=None", "", "`sideEffects` is missing"),
        (
            "name=mapplication-v1.kb.io",
            "name=short",
            "name `short` must be fully qualified, with at least three segments (`vkind-v1.kb.io`)",
        ),
        (
            "path=/mutate-example-example-com-v1-application",
            "path=/Mutate_Foo",
            "path `/Mutate_Foo`: the segment `Mutate_Foo` is not a DNS-1123 subdomain",
        ),
        (
            "path=/mutate-example-example-com-v1-application",
            "path=/-a",
            "path `/-a`: the segment `-a` is not a DNS-1123 subdomain",
        ),
        (
            "path=/mutate-example-example-com-v1-application",
            "path=/x/../y",
            "path `/x/../y`: the segment `..` is not a DNS-1123 subdomain",
        ),
        (
            "path=/mutate-example-example-com-v1-application",
            "path=/x//y",
            "path `/x//y`: the segment `` is not a DNS-1123 subdomain",
        ),
        ("versions=v1,", "versions=,", "`versions` has an empty item"),
        (
            "admissionReviewVersions=v1",
            "admissionReviewVersions=v9",
            "admissionReviewVersions `v9` does not exist",
        ),
        (
            "verbs=create;update",
            "verbs=create;*",
            "`*` in `verbs` stands for every verb: give it alone",
        ),
        (
            "groups=example.example.com",
            "groups=admissionregistration.k8s.io",
            "the API server calls no admission webhook for objects of `admissionregistration.k8s.io`",
        ),
    ];
    let mut cases: Vec<(String, &str)> = edits
        .iter()
        .map(|(from, to, want)| (MUTATE[22..].replace(from, to), *want))
        .collect();
    cases.push(("path=x".into(), "path `x` must start with `/`"));
    cases.push((
        format!("{},colour=red", &MUTATE[22..]),
        "unknown key `colour`",
    ));
    for (body, want) in cases {
        let text = format!("fn x() {{}}\n// +rsbuilder:webhook:{body}\n");
        let error = markers(Path::new("operator/src/w.rs"), &text).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "invalid webhook marker at operator/src/w.rs:2: {want}"
            )),
            "{body}: {message}"
        );
    }
}

#[test]
fn selectors_become_label_selectors() {
    let marker = format!(
        "{POD},namespaceSelector=kubernetes.io/metadata.name notin (kube-system|otp-system);team=a,objectSelector=!skip-webhook;app.kubernetes.io/name!=otp;tier in (web);env;b==c"
    );
    let yaml = manifests(&parse_all(&marker)).unwrap();
    assert!(
        yaml.contains(
            "  name: mpod-v1.kb.io
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      - kube-system
      - otp-system
    matchLabels:
      team: a
  objectSelector:
    matchExpressions:
    - key: skip-webhook
      operator: DoesNotExist
    - key: app.kubernetes.io/name
      operator: NotIn
      values:
      - otp
    - key: tier
      operator: In
      values:
      - web
    - key: env
      operator: Exists
    matchLabels:
      b: c
  reinvocationPolicy: IfNeeded
"
        ),
        "{yaml}"
    );
    // A word YAML 1.1 reads as a boolean stays a string.
    let yaml = manifests(&parse_all(&format!("{POD},objectSelector=enabled=on"))).unwrap();
    assert!(
        yaml.contains("    matchLabels:\n      enabled: 'on'\n"),
        "{yaml}"
    );
}

#[test]
fn selectors_the_api_server_would_refuse_are_refused() {
    let body = &POD[22..];
    for (selector, want) in [
        (
            "namespaceSelector=",
            "`namespaceSelector` has an empty requirement",
        ),
        (
            "objectSelector=a;;b",
            "`objectSelector` has an empty requirement",
        ),
        (
            "objectSelector=Bad Key=x",
            "`objectSelector`: `Bad Key` is not a label key",
        ),
        (
            "objectSelector=a inside (b)",
            "`objectSelector`: `a inside (b)` is not a requirement",
        ),
        (
            "objectSelector=a has b",
            "`objectSelector`: `a has b` is not a requirement",
        ),
        (
            "objectSelector=-a=b",
            "`objectSelector`: `-a` is not a label key",
        ),
        (
            "objectSelector=a/b/c=d",
            "`objectSelector`: `a/b/c` is not a label key",
        ),
        (
            "objectSelector=a=b c",
            "`objectSelector`: `b c` is not a label value",
        ),
        (
            "objectSelector=a in b",
            "`objectSelector`: `a in b` lists its values as `(a|b)`",
        ),
        (
            "objectSelector=a notin ()",
            "`objectSelector`: `a notin ()` lists its values as `(a|b)`",
        ),
        (
            "objectSelector=a=b;a=c",
            "`objectSelector` asks for `a` to be both `b` and `c`",
        ),
        ("objectSelector=a", ""),
    ] {
        let text = format!("// +rsbuilder:webhook:{body},{selector}\n");
        let result = markers(Path::new("operator/src/w.rs"), &text);
        if want.is_empty() {
            assert!(result.is_ok(), "{selector}");
            continue;
        }
        let message = result.unwrap_err().to_string();
        assert!(
            message.starts_with(&format!(
                "invalid webhook marker at operator/src/w.rs:1: {want}"
            )),
            "{selector}: {message}"
        );
    }
}

#[test]
fn two_webhooks_with_one_name_are_refused() {
    let other = VALIDATE.replace("vapplication", "mapplication");
    let error = manifests(&parse_all(&format!("{MUTATE}\n{other}\n"))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "two webhook markers are named `mapplication-v1.kb.io`"
    );
    // The same marker twice (a module and its copy being planned) is one webhook.
    let twice = manifests(&parse_all(&format!("{MUTATE}\n{MUTATE}\n"))).unwrap();
    assert_eq!(twice.matches("- admissionReviewVersions").count(), 1);
}
