//! The CEL rules of the CRDs (`x-kubernetes-validations`), which the API server evaluates on
//! every write of an object. `generate` parses each rule, so that a typo fails there and not
//! at install time, and evaluates the rules against the objects of `config/samples/`.
//!
//! The parser and the evaluator are the `cel` crate's, with its string and list extensions.
//! Kubernetes adds libraries of its own (`quantity`, `url`, `ip`, `cidr`, `format`, `isSorted`,
//! ...): a rule that calls one is still parsed, but not evaluated, and the reason is printed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde::Deserialize as _;
use serde_json::Value as Json;

use crate::tree::Tree;
use crate::ui::UserError;

/// Where the samples are.
pub const SAMPLES_DIR: &str = "config/samples";

/// One step of a rule's place in an object: a field, or every item of a list or value of a map.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Each,
}

/// One rule of a CRD's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub kind: String,
    pub version: String,
    steps: Vec<Step>,
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    /// Whether the API server pairs the old value with the new one here, which a rule that
    /// reads `oldSelf` needs: not under a list unless it is `x-kubernetes-list-type: map`.
    pub correlatable: bool,
}

impl Rule {
    /// Where the rule stands, as a JSON path: `.spec.size`, `[*]` for each item; `.` for the
    /// whole object.
    pub fn path(&self) -> String {
        if self.steps.is_empty() {
            return ".".to_owned();
        }
        self.steps
            .iter()
            .map(|step| match step {
                Step::Field(name) => format!(".{name}"),
                Step::Each => "[*]".to_owned(),
            })
            .collect()
    }
}

/// Every rule of `crd`, version by version, in the schema's order.
pub fn rules(crd: &Json) -> Vec<Rule> {
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or("?");
    let mut out = Vec::new();
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let template = Rule {
            kind: kind.to_owned(),
            version: version["name"].as_str().unwrap_or("?").to_owned(),
            steps: Vec::new(),
            rule: String::new(),
            message: None,
            message_expression: None,
            correlatable: true,
        };
        walk(&version["schema"]["openAPIV3Schema"], &template, &mut out);
    }
    out
}

/// The rules of `schema` and of the schemas under it; `at` holds the kind, the version and the
/// place.
fn walk(schema: &Json, at: &Rule, out: &mut Vec<Rule>) {
    let text = |item: &Json, key: &str| item[key].as_str().map(str::to_owned);
    for item in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        out.push(Rule {
            rule: text(item, "rule").unwrap_or_default(),
            message: text(item, "message"),
            message_expression: text(item, "messageExpression"),
            ..at.clone()
        });
    }
    let under = |step: Step, correlatable: bool| {
        let mut next = at.clone();
        next.steps.push(step);
        next.correlatable = correlatable;
        next
    };
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        walk(
            property,
            &under(Step::Field(name.clone()), at.correlatable),
            out,
        );
    }
    if schema["items"].is_object() {
        let map_list = schema["x-kubernetes-list-type"] == "map";
        walk(
            &schema["items"],
            &under(Step::Each, at.correlatable && map_list),
            out,
        );
    }
    if schema["additionalProperties"].is_object() {
        walk(
            &schema["additionalProperties"],
            &under(Step::Each, at.correlatable),
            out,
        );
    }
}

/// Parses every rule of the CRDs (`path` → YAML): the first that does not parse is an error
/// that names the kind, the place, the rule and the parser's message. Returns the warnings:
/// a rule that reads `oldSelf` where the API server cannot pair old and new values.
pub fn check_crds(crds: &BTreeMap<PathBuf, String>) -> anyhow::Result<Vec<String>> {
    let mut warnings = Vec::new();
    for (path, yaml) in crds {
        let crd: Json =
            serde_yaml::from_str(yaml.trim_start_matches("---\n")).with_context(|| {
                format!(
                    "crdgen printed a CRD that does not parse: {}",
                    path.display()
                )
            })?;
        for rule in rules(&crd) {
            let program = parse(&rule, &rule.rule, "rule")?;
            if let Some(expression) = &rule.message_expression {
                parse(&rule, expression, "messageExpression")?;
            }
            if !rule.correlatable && program.references().has_variable("oldSelf") {
                warnings.push(format!(
                    "the rule `{}` of {} {} at `{}` reads oldSelf under a list that is not `x-kubernetes-list-type: map`: the API server cannot pair an old item with a new one there, and refuses the CRD",
                    rule.rule,
                    rule.kind,
                    rule.version,
                    rule.path()
                ));
            }
        }
    }
    Ok(warnings)
}

/// `source`, the `what` of `rule`, compiled.
fn parse(rule: &Rule, source: &str, what: &str) -> anyhow::Result<cel::Program> {
    cel::Program::compile(source).map_err(|error| {
        UserError::new(format!(
            "the CEL {what} `{source}` of {} {} at `{}` does not parse; nothing was written:\n{error}",
            rule.kind,
            rule.version,
            rule.path()
        ))
        .help("fix it where the type declares it (`#[x_kube(validation = ...)]` in api/src/), then run `rsbuilder generate` again")
        .into()
    })
}

/// What the evaluation of one rule against one sample found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The sample breaks the rule: the API server would refuse it.
    Broken {
        sample: PathBuf,
        name: String,
        rule: String,
        path: String,
        message: String,
    },
    /// The rule was not evaluated, for `reason`.
    Skipped {
        sample: PathBuf,
        rule: String,
        path: String,
        reason: String,
    },
}

/// Evaluates the rules of the CRDs against every object of `config/samples/` of their kind
/// and version, `self` bound to the field each rule stands on and `oldSelf` unbound.
pub fn check_samples(
    tree: &dyn Tree,
    crds: &BTreeMap<PathBuf, String>,
) -> anyhow::Result<Vec<Finding>> {
    let mut by_version: BTreeMap<(String, String, String), Vec<Rule>> = BTreeMap::new();
    for yaml in crds.values() {
        let crd: Json = serde_yaml::from_str(yaml.trim_start_matches("---\n"))?;
        let group = crd["spec"]["group"].as_str().unwrap_or_default().to_owned();
        for rule in rules(&crd) {
            by_version
                .entry((group.clone(), rule.version.clone(), rule.kind.clone()))
                .or_default()
                .push(rule);
        }
    }
    let dir = Path::new(SAMPLES_DIR);
    let mut findings = Vec::new();
    for sample in tree.files_below(dir, &|_| false)? {
        // A file that is not YAML is no sample (kustomization.yaml is, but holds no object of a
        // CRD's kind).
        if !sample
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml")
        {
            continue;
        }
        let Some(text) = tree.read(&sample)? else {
            continue;
        };
        for document in serde_yaml::Deserializer::from_str(&text) {
            // A document that does not parse is kustomize's to report, not this check's.
            let Ok(object) = Json::deserialize(document) else {
                continue;
            };
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let (group, version) = match api_version.rsplit_once('/') {
                Some((group, version)) => (group.to_owned(), version.to_owned()),
                None => (String::new(), api_version.to_owned()),
            };
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            for rule in by_version
                .get(&(group, version, kind))
                .into_iter()
                .flatten()
            {
                evaluate(&sample, &object, rule, &mut findings);
            }
        }
    }
    Ok(findings)
}

/// Evaluates `rule` on each value of `object` it stands on.
fn evaluate(sample: &Path, object: &Json, rule: &Rule, findings: &mut Vec<Finding>) {
    let skipped = |reason: String| Finding::Skipped {
        sample: sample.to_owned(),
        rule: rule.rule.clone(),
        path: rule.path(),
        reason,
    };
    let Ok(program) = cel::Program::compile(&rule.rule) else {
        return;
    };
    let values = values_at(object, &rule.steps);
    if values.is_empty() {
        return;
    }
    if program.references().has_variable("oldSelf") {
        findings.push(skipped(
            "a transition rule (it reads oldSelf): a sample has no old object".to_owned(),
        ));
        return;
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    for value in values {
        let env = environment();
        let mut context = cel::Context::with_env(env);
        context.add_variable_from_value("self", to_cel(value));
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => findings.push(Finding::Broken {
                sample: sample.to_owned(),
                name: name.clone(),
                rule: rule.rule.clone(),
                path: rule.path(),
                message: message(rule, &context),
            }),
            Ok(other) => findings.push(skipped(format!(
                "it gives {other:?}, where a rule gives a bool"
            ))),
            Err(error) => findings.push(skipped(format!(
                "rsbuilder's CEL evaluator (the cel crate) cannot evaluate it: {error}"
            ))),
        }
    }
}

/// The message the API server would give: `messageExpression`'s value, else `message`, else
/// the rule.
fn message(rule: &Rule, context: &cel::Context) -> String {
    let expressed = rule
        .message_expression
        .as_deref()
        .and_then(|source| cel::Program::compile(source).ok())
        .and_then(|program| program.execute(context).ok());
    match expressed {
        Some(cel::Value::String(text)) => text.to_string(),
        _ => rule
            .message
            .clone()
            .unwrap_or_else(|| format!("failed rule: {}", rule.rule)),
    }
}

/// The standard environment with the string and list extensions, which Kubernetes also has.
fn environment() -> Arc<cel::Env> {
    let mut env = cel::Env::stdlib();
    // Extensions declare functions the standard library lacks; they cannot clash with it.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(cel::extensions::lists);
    Arc::new(env)
}

/// The values of `object` at `steps`: a missing field has none (the API server evaluates a
/// rule only where its field is set).
fn values_at<'a>(object: &'a Json, steps: &[Step]) -> Vec<&'a Json> {
    let Some((first, rest)) = steps.split_first() else {
        return vec![object];
    };
    match (first, object) {
        (Step::Field(name), Json::Object(map)) => map
            .get(name)
            .map(|value| values_at(value, rest))
            .unwrap_or_default(),
        (Step::Each, Json::Array(items)) => items.iter().flat_map(|i| values_at(i, rest)).collect(),
        (Step::Each, Json::Object(map)) => map.values().flat_map(|v| values_at(v, rest)).collect(),
        _ => Vec::new(),
    }
}

/// A JSON value as CEL sees it: a whole number is an `int`.
fn to_cel(value: &Json) -> cel::Value {
    match value {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => n
            .as_i64()
            .map(cel::Value::Int)
            .or_else(|| n.as_u64().map(cel::Value::UInt))
            .unwrap_or_else(|| cel::Value::Float(n.as_f64().unwrap_or_default())),
        Json::String(s) => cel::Value::String(Arc::new(s.clone())),
        Json::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Json::Object(map) => {
            let map: HashMap<String, cel::Value> =
                map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(check_crds(&crds(CRD)).unwrap(), Vec::<String>::new());
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
        // A message expression is parsed too.
        let broken = CRD.replace("' must start with t-'\"", "' must start with t-\"");
        let message = check_crds(&crds(&broken)).unwrap_err().to_string();
        assert!(
            message.starts_with("the CEL messageExpression `'tag ' + self + ' must start with t-` of Thing v1 at `.spec.tags[*]`"),
            "{message}"
        );
    }

    #[test]
    fn old_self_where_old_and_new_values_cannot_pair_is_warned_of() {
        let uncorrelated = CRD.replace("self.startsWith('t-')", "self == oldSelf");
        let warnings = check_crds(&crds(&uncorrelated)).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("the rule `self == oldSelf` of Thing v1 at `.spec.tags[*]` reads oldSelf under a list that is not `x-kubernetes-list-type: map`"),
            "{warnings:?}"
        );
    }

    fn findings(sample: &str) -> Vec<Finding> {
        let tree = Memory {
            files: [
                ("config/samples/kustomization.yaml", "resources: [x]\n"),
                ("config/samples/thing.yaml", sample),
                // Not YAML, so not a sample, whatever it holds.
                ("config/samples/thing.txt", BAD_IN_TEXT),
            ]
            .into_iter()
            .map(|(path, text)| (PathBuf::from(path), text.to_owned()))
            .collect(),
        };
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
                "a transition rule (it reads oldSelf): a sample has no old object"
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
                ("bad", ".spec.notes[*]", "a note is short"),
                ("bad", ".spec.tags[*]", "tag b must start with t-"),
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
        // A field the sample leaves out is not evaluated: the API server would not either.
        let no_tags = GOOD.replace("  tags: [t-a, t-b]\n", "");
        assert_eq!(findings(&no_tags).len(), 1);
    }
}
