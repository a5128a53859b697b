use super::*;

use crate::tree::Memory;

/// A CRD of `Thing` in `example.com/v1` whose schema holds `rules` at the root, on the
/// spec, on the items of an atomic list and of a map list, and on the values of a map.
const CRD: &str = r#"---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: example.com
  names:
    kind: Thing
    plural: things
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        x-kubernetes-validations:
        - rule: has(self.spec)
        properties:
          spec:
            x-kubernetes-validations:
            - rule: self.replicas <= self.size * 2
              message: at most twice the size
            - rule: self.size == oldSelf.size
              message: size is immutable
            properties:
              size:
                type: integer
              replicas:
                type: integer
              tags:
                type: array
                items:
                  type: string
                  x-kubernetes-validations:
                  - rule: self.startsWith('t-')
                    messageExpression: "'tag ' + self + ' must start with t-'"
              ports:
                type: array
                x-kubernetes-list-type: map
                items:
                  type: object
                  x-kubernetes-validations:
                  - rule: self.port == oldSelf.port
              notes:
                type: object
                additionalProperties:
                  type: string
                  x-kubernetes-validations:
                  - rule: self.size() < 10
                    message: a note is short
              limits:
                type: object
                additionalProperties:
                  type: string
                  x-kubernetes-validations:
                  - rule: quantity(self).isGreaterThan(quantity('0'))
"#;

fn crds(yaml: &str) -> BTreeMap<PathBuf, String> {
    BTreeMap::from([(
        PathBuf::from("config/crd/bases/example.com_things.yaml"),
        yaml.to_owned(),
    )])
}

#[test]
fn rules_are_found_with_their_place_and_whether_old_values_pair_there() {
    let crd: Json = serde_yaml::from_str(CRD.trim_start_matches("---\n")).unwrap();
    let found: Vec<(String, &str, bool)> = rules(&crd)
        .iter()
        .map(|r| (r.path(), r.rule.as_str(), r.correlatable))
        .map(|(p, r, c)| (p, &CRD[CRD.find(r).unwrap()..][..r.len()], c))
        .collect();
    assert_eq!(
        found,
        [
            (".".to_owned(), "has(self.spec)", true),
            (".spec".to_owned(), "self.replicas <= self.size * 2", true),
            (".spec".to_owned(), "self.size == oldSelf.size", true),
            (
                ".spec.limits[*]".to_owned(),
                "quantity(self).isGreaterThan(quantity('0'))",
                true
            ),
            (".spec.notes[*]".to_owned(), "self.size() < 10", true),
            (
                ".spec.ports[*]".to_owned(),
                "self.port == oldSelf.port",
                true
            ),
            (".spec.tags[*]".to_owned(), "self.startsWith('t-')", false),
        ]
    );
    let crd_rules = rules(&crd);
    assert_eq!(
        crd_rules[1].message.as_deref(),
        Some("at most twice the size")
    );
    assert_eq!(crd_rules[1].kind, "Thing");
    assert_eq!(crd_rules[1].version, "v1");
    assert!(crd_rules[6].message_expression.is_some());
}

#[test]
fn a_rule_that_does_not_parse_is_named_with_its_kind_place_and_the_parsers_message() {
    check_crds(&crds(CRD)).unwrap();
    // Kubernetes' optional syntax parses.
    let optional = CRD.replace("has(self.spec)", "self.?spec.?size.orValue(1) > 0");
    check_crds(&crds(&optional)).unwrap();
    let broken = CRD.replace("self.replicas <= self.size * 2", "self.replicas <=");
    let error = check_crds(&crds(&broken)).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(
            "the CEL rule `self.replicas <=` of Thing v1 at `.spec` does not parse; nothing was written:\nERROR: <input>:1:"
        ),
        "{message}"
    );
    let error = error.downcast::<UserError>().unwrap();
    assert!(error.help_text().is_some_and(|h| h.contains("x_kube")));
    assert!(error.to_string().contains("Syntax error"), "{error}");
    // A message expression is parsed too.
    let broken = CRD.replace("' must start with t-'\"", "' must start with t-\"");
    let message = check_crds(&crds(&broken)).unwrap_err().to_string();
    assert!(
        message.starts_with("the CEL messageExpression `'tag ' + self + ' must start with t-` of Thing v1 at `.spec.tags[*]`"),
        "{message}"
    );
}

#[test]
fn old_self_where_old_and_new_values_cannot_pair_is_refused() {
    let uncorrelated = CRD.replace("self.startsWith('t-')", "self == oldSelf");
    let error = check_crds(&crds(&uncorrelated)).unwrap_err();
    assert!(
        error.to_string().starts_with("the rule `self == oldSelf` of Thing v1 at `.spec.tags[*]` reads oldSelf under a list that is not `x-kubernetes-list-type: map`"),
        "{error}"
    );
    // Under a map list inside an atomic list, old and new items cannot pair either.
    let nested = "spec:\n  names:\n    kind: Thing\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        properties:\n          groups:\n            type: array\n            items:\n              properties:\n                ports:\n                  type: array\n                  x-kubernetes-list-type: map\n                  items:\n                    x-kubernetes-validations:\n                    - rule: self.port == oldSelf.port\n";
    let crd: Json = serde_yaml::from_str(nested.trim_start_matches("---\n")).unwrap();
    let port_rule = rules(&crd)
        .into_iter()
        .find(|r| r.rule == "self.port == oldSelf.port")
        .unwrap();
    assert_eq!(port_rule.path(), ".groups[*].ports[*]");
    assert!(!port_rule.correlatable);
    // A map's values pair by key: a map in a correlatable place is one too.
    let crd: Json = serde_yaml::from_str(CRD.trim_start_matches("---\n")).unwrap();
    assert!(
        rules(&crd)
            .iter()
            .all(|r| r.correlatable || r.path() == ".spec.tags[*]")
    );
}

fn findings(sample: &str) -> Vec<Finding> {
    let mut tree = sample_tree(sample);
    for (path, text) in [
        ("config/samples/kustomization.yaml", "resources: [x]\n"),
        // Not YAML, so not a sample, whatever it holds.
        ("config/samples/thing.txt", BAD_IN_TEXT),
    ] {
        tree.files.insert(PathBuf::from(path), text.to_owned());
    }
    check_samples(&tree, &crds(CRD)).unwrap()
}

fn broken(findings: &[Finding]) -> Vec<(&str, &str, &str)> {
    findings
        .iter()
        .filter_map(|f| match f {
            Finding::Broken {
                name,
                path,
                message,
                ..
            } => Some((name.as_str(), path.as_str(), message.as_str())),
            Finding::Skipped { .. } => None,
        })
        .collect()
}

fn skipped(findings: &[Finding]) -> Vec<(&str, &str)> {
    findings
        .iter()
        .filter_map(|f| match f {
            Finding::Skipped { rule, reason, .. } => Some((rule.as_str(), reason.as_str())),
            Finding::Broken { .. } => None,
        })
        .collect()
}

const BAD_IN_TEXT: &str = "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: text\nspec:\n  size: 1\n  replicas: 9\n";

const GOOD: &str = "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: good\nspec:\n  size: 2\n  replicas: 4\n  tags: [t-a, t-b]\n";

#[test]
fn a_sample_that_keeps_the_rules_breaks_none() {
    let found = findings(GOOD);
    assert_eq!(broken(&found), []);
    // The transition rules are skipped, with the reason.
    assert_eq!(
        skipped(&found),
        [(
            "self.size == oldSelf.size",
            "a transition rule (it reads oldSelf): the API server evaluates it on updates only"
        )]
    );
}

#[test]
fn a_sample_that_breaks_a_rule_is_named_with_the_place_and_the_message() {
    let bad = format!("{GOOD}  notes:\n    short: hi\n    long: far too long\n")
        .replace("replicas: 4", "replicas: 5")
        .replace("t-b", "b")
        .replace("name: good", "name: bad");
    let found = findings(&format!("{GOOD}---\n{bad}"));
    assert_eq!(
        broken(&found),
        [
            ("bad", ".spec", "at most twice the size"),
            ("bad", ".spec.notes[long]", "a note is short"),
            ("bad", ".spec.tags[1]", "tag b must start with t-"),
        ]
    );
    let samples: Vec<&Path> = found
        .iter()
        .filter_map(|f| match f {
            Finding::Broken { sample, .. } => Some(sample.as_path()),
            Finding::Skipped { .. } => None,
        })
        .collect();
    assert_eq!(samples, [Path::new("config/samples/thing.yaml"); 3]);
    // Another kind, or another version, is not this CRD's.
    let other = bad.replace("kind: Thing", "kind: Other");
    assert_eq!(broken(&findings(&other)), []);
    let v2 = bad.replace("example.com/v1", "example.com/v2");
    assert_eq!(broken(&findings(&v2)), []);
}

#[test]
fn what_the_evaluator_lacks_is_skipped_with_the_reason() {
    let limits = format!("{GOOD}  limits:\n    cpu: 500m\n");
    let found = findings(&limits);
    assert_eq!(broken(&found), []);
    let lacking = skipped(&found);
    assert_eq!(lacking.len(), 2, "{lacking:?}");
    assert_eq!(lacking[1].0, "quantity(self).isGreaterThan(quantity('0'))");
    assert!(
        lacking[1]
            .1
            .starts_with("rsbuilder's CEL evaluator (the cel crate) cannot evaluate it: ")
            && lacking[1].1.contains("quantity"),
        "{lacking:?}"
    );
    // A field the sample leaves out, or sets to null, is not evaluated: the API server
    // would not either.
    let bad_tags = GOOD.replace("t-b", "b");
    assert_eq!(broken(&findings(&bad_tags)).len(), 1);
    for unset in ["", "  tags: null\n", "  tags:\n"] {
        let sample = bad_tags.replace("  tags: [t-a, b]\n", unset);
        assert_eq!(broken(&findings(&sample)), [], "{unset:?}");
    }
}

/// A tree holding one sample.
fn sample_tree(sample: &str) -> Memory {
    Memory {
        files: [("config/samples/thing.yaml", sample)]
            .into_iter()
            .map(|(path, text)| (PathBuf::from(path), text.to_owned()))
            .collect(),
    }
}

#[test]
fn a_sample_is_evaluated_as_the_api_server_creates_it() {
    // The schema's default fills in what the sample leaves out: replicas 9 breaks the rule.
    let defaulted = CRD.replace(
        "              replicas:\n                type: integer\n",
        "              replicas:\n                type: integer\n                default: 9\n",
    );
    let no_replicas = GOOD.replace("  replicas: 4\n", "");
    let found = check_samples(&sample_tree(&no_replicas), &crds(&defaulted)).unwrap();
    assert_eq!(
        broken(&found),
        [("good", ".spec", "at most twice the size")]
    );
    // Without a default, the field the rule reads is missing: the API server refuses that.
    let found = check_samples(&sample_tree(&no_replicas), &crds(CRD)).unwrap();
    assert_eq!(
        broken(&found),
        [(
            "good",
            ".spec",
            "the sample leaves out `replicas`, which the rule reads: the API server refuses it"
        )]
    );
    // A create drops the status of a kind with the status subresource: its rules are not run.
    let with_status = CRD
        .replace(
            "              size:\n                type: integer\n",
            "              size:\n                type: integer\n          status:\n            properties:\n              phase:\n                type: string\n                x-kubernetes-validations:\n                - rule: self == 'Ready'\n",
        )
        .replace("    schema:\n", "    subresources:\n      status: {}\n    schema:\n");
    let sample = format!("{GOOD}status:\n  phase: Pending\n");
    let found = check_samples(&sample_tree(&sample), &crds(&with_status)).unwrap();
    assert_eq!(broken(&found), []);
    let without = with_status.replace("    subresources:\n      status: {}\n", "");
    let found = check_samples(&sample_tree(&sample), &crds(&without)).unwrap();
    assert_eq!(
        broken(&found),
        [("good", ".status.phase", "failed rule: self == 'Ready'")]
    );
}

#[test]
fn typed_formats_are_skipped_and_an_empty_message_expression_falls_back() {
    let dated = CRD.replace(
        "                items:\n                  type: string\n                  x-kubernetes-validations:",
        "                items:\n                  type: string\n                  format: date\n                  x-kubernetes-validations:",
    );
    let bad_tag = GOOD.replace("t-b", "b");
    let found = check_samples(&sample_tree(&bad_tag), &crds(&dated)).unwrap();
    assert_eq!(broken(&found), []);
    assert!(
        skipped(&found)
            .iter()
            .any(|(_, reason)| reason.contains("`format: date`")),
        "{found:?}"
    );
    let empty = CRD.replace("\"'tag ' + self + ' must start with t-'\"", "\"' '\"");
    let found = check_samples(&sample_tree(&bad_tag), &crds(&empty)).unwrap();
    assert_eq!(
        broken(&found),
        [(
            "good",
            ".spec.tags[1]",
            "failed rule: self.startsWith('t-')"
        )]
    );
}

#[test]
fn defaults_reach_list_items_and_the_value_is_shown() {
    // A default of a list item's field is filled in before the item's rule runs.
    let items = CRD.replace(
        "                items:\n                  type: object\n                  x-kubernetes-validations:\n                  - rule: self.port == oldSelf.port\n",
        "                items:\n                  type: object\n                  properties:\n                    port:\n                      type: integer\n                      default: 0\n                  x-kubernetes-validations:\n                  - rule: self.port > 0\n                    message: a port is positive\n",
    );
    let sample = format!("{GOOD}  ports:\n  - name: a\n");
    let found = check_samples(&sample_tree(&sample), &crds(&items)).unwrap();
    assert_eq!(
        broken(&found),
        [("good", ".spec.ports[0]", "a port is positive")]
    );
    let Some(Finding::Broken { value, .. }) =
        found.iter().find(|f| matches!(f, Finding::Broken { .. }))
    else {
        panic!("{found:?}");
    };
    assert_eq!(value, r#"{"name":"a","port":0}"#);
    // A long value is cut.
    let long = Json::String("x".repeat(100));
    assert_eq!(shown(&long), format!("\"{}...", "x".repeat(79)));
}

#[test]
fn a_transition_rule_with_optional_old_self_says_why_it_is_skipped() {
    let optional = CRD.replace(
        "            - rule: self.size == oldSelf.size\n              message: size is immutable\n",
        "            - rule: self.size == oldSelf.size\n              message: size is immutable\n              optionalOldSelf: true\n",
    );
    let found = check_samples(&sample_tree(GOOD), &crds(&optional)).unwrap();
    assert!(
        skipped(&found)
            .iter()
            .any(|(rule, reason)| *rule == "self.size == oldSelf.size"
                && reason.starts_with("a transition rule with optionalOldSelf")),
        "{found:?}"
    );
}
