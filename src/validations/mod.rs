//! The CEL rules of the CRDs (`x-kubernetes-validations`), which the API server evaluates on
//! every write of an object. `generate` parses each rule, so that a typo fails there and not
//! at install time, and evaluates the rules against the objects of `config/samples/`.
//!
//! The parser and the evaluator are the `cel` crate's, with its string and list extensions and
//! the optional syntax (`self.?x.orValue(1)`), as Kubernetes has them. Kubernetes adds
//! libraries of its own (`quantity`, `url`, `ip`, `cidr`, `format`, `isSorted`, ...): a rule
//! that calls one is still parsed, but not evaluated, and the reason is printed.
//!
//! A sample is evaluated as the API server evaluates an object it is asked to create: the
//! schema's defaults filled in, a `status` dropped when the version has the status subresource,
//! and a rule run only on the fields that are set (not null).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub kind: String,
    pub version: String,
    steps: Vec<Step>,
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    /// `optionalOldSelf`: the API server also evaluates the transition rule on create.
    pub optional_old_self: bool,
    /// Whether the API server pairs the old value with the new one here, which a rule that
    /// reads `oldSelf` needs: not under a list unless it is `x-kubernetes-list-type: map`.
    pub correlatable: bool,
    /// The `format` of the field the rule stands on, if any.
    format: Option<String>,
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

/// Every rule of `crd`, version by version, properties in the order of their names.
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
            optional_old_self: false,
            correlatable: true,
            format: None,
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
            optional_old_self: item["optionalOldSelf"] == true,
            format: text(schema, "format"),
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

/// CEL's standard library with the string and list extensions, which Kubernetes also has.
fn environment() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension declares what the standard library lacks");
        env.add_extension(cel::extensions::lists)
            .expect("the lists extension declares what the standard library lacks");
        Arc::new(env)
    })
    .clone()
}

/// `source` compiled in [`environment`].
fn compile(source: &str) -> Result<cel::Program, cel::ParseErrors> {
    environment().compile(source)
}

/// Parses every rule of the CRDs (`path` → YAML). The first that does not parse is an error
/// that names the kind, the place, the rule and the parser's message; so is a rule that reads
/// `oldSelf` where the API server cannot pair old and new values, which it refuses.
pub fn check_crds(crds: &BTreeMap<PathBuf, String>) -> anyhow::Result<()> {
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
                return Err(UserError::new(format!(
                    "the rule `{}` of {} {} at `{}` reads oldSelf under a list that is not `x-kubernetes-list-type: map`: the API server cannot pair an old item with a new one there, and refuses the CRD; nothing was written",
                    rule.rule,
                    rule.kind,
                    rule.version,
                    rule.path()
                ))
                .help("put the rule on the list itself, where oldSelf is the whole list, or make the list a map list: `#[schemars(extend(\"x-kubernetes-list-type\" = \"map\", \"x-kubernetes-list-map-keys\" = [\"name\"]))]`")
                .into());
            }
        }
    }
    Ok(())
}

/// `source`, the `what` of `rule`, compiled.
fn parse(rule: &Rule, source: &str, what: &str) -> anyhow::Result<cel::Program> {
    compile(source).map_err(|error| {
        UserError::new(format!(
            "the CEL {what} `{source}` of {} {} at `{}` does not parse; nothing was written:\n{error}",
            rule.kind,
            rule.version,
            rule.path()
        ))
        .help("fix it where the type declares it (`#[x_kube(validation = ...)]`, `#[kube(validation = ...)]` or `extend(\"x-kubernetes-validations\" = ...)` in api/src/), then run `rsbuilder generate` again")
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
        /// The value's place, `.spec.tags[1]`.
        path: String,
        /// The value, as JSON, cut to 80 characters.
        value: String,
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

/// The rules of one version of a kind, with what the API server does to an object before it
/// evaluates them.
struct Version {
    schema: Json,
    status_subresource: bool,
    rules: Vec<Rule>,
}

/// The versions of the CRDs, by (group, version, kind).
fn versions(
    crds: &BTreeMap<PathBuf, String>,
) -> anyhow::Result<BTreeMap<(String, String, String), Version>> {
    let mut out = BTreeMap::new();
    for yaml in crds.values() {
        let crd: Json = serde_yaml::from_str(yaml.trim_start_matches("---\n"))?;
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let all = rules(&crd);
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let name = version["name"].as_str().unwrap_or_default();
            out.insert(
                (group.to_owned(), name.to_owned(), kind.to_owned()),
                Version {
                    schema: version["schema"]["openAPIV3Schema"].clone(),
                    status_subresource: version["subresources"]["status"].is_object(),
                    rules: all.iter().filter(|r| r.version == name).cloned().collect(),
                },
            );
        }
    }
    Ok(out)
}

/// Evaluates the rules of the CRDs against every object of `config/samples/` of their kind
/// and version, as the API server evaluates an object it creates.
pub fn check_samples(
    tree: &dyn Tree,
    crds: &BTreeMap<PathBuf, String>,
) -> anyhow::Result<Vec<Finding>> {
    let versions = versions(crds)?;
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
            let Ok(mut object) = Json::deserialize(document) else {
                continue;
            };
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let (group, version) = match api_version.rsplit_once('/') {
                Some((group, version)) => (group.to_owned(), version.to_owned()),
                None => (String::new(), api_version.to_owned()),
            };
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            let Some(version) = versions.get(&(group, version, kind)) else {
                continue;
            };
            // A create drops the status of a kind with the status subresource.
            if version.status_subresource
                && let Some(map) = object.as_object_mut()
            {
                map.remove("status");
            }
            apply_defaults(&version.schema, &mut object);
            for rule in &version.rules {
                evaluate(&sample, &object, rule, &mut findings);
            }
        }
    }
    Ok(findings)
}

/// Fills in the schema's defaults where `value` leaves a field out (or null), as the API
/// server does before it validates.
fn apply_defaults(schema: &Json, value: &mut Json) {
    match value {
        Json::Object(map) => {
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                let unset = map.get(name).is_none_or(Json::is_null);
                if unset && let Some(default) = property.get("default") {
                    map.insert(name.clone(), default.clone());
                }
                if let Some(field) = map.get_mut(name) {
                    apply_defaults(property, field);
                }
            }
            if schema["additionalProperties"].is_object() {
                for field in map.values_mut() {
                    apply_defaults(&schema["additionalProperties"], field);
                }
            }
        }
        Json::Array(items) => {
            for item in items {
                apply_defaults(&schema["items"], item);
            }
        }
        _ => {}
    }
}

/// The formats the API server reads as typed values, which the evaluator sees as strings.
const TYPED_FORMATS: &[&str] = &["byte", "date", "date-time", "duration"];

/// Evaluates `rule` on each value of `object` it stands on.
fn evaluate(sample: &Path, object: &Json, rule: &Rule, findings: &mut Vec<Finding>) {
    let Ok(program) = compile(&rule.rule) else {
        return;
    };
    let values = values_at(object, &rule.steps, String::new());
    if values.is_empty() {
        return;
    }
    let skipped = |reason: String| Finding::Skipped {
        sample: sample.to_owned(),
        rule: rule.rule.clone(),
        path: rule.path(),
        reason,
    };
    if program.references().has_variable("oldSelf") {
        findings.push(skipped(if rule.optional_old_self {
            "a transition rule with optionalOldSelf: the API server evaluates it on create with an empty oldSelf, which the evaluator cannot bind".to_owned()
        } else {
            "a transition rule (it reads oldSelf): the API server evaluates it on updates only".to_owned()
        }));
        return;
    }
    if let Some(format) = rule.format.as_deref().filter(|f| TYPED_FORMATS.contains(f)) {
        findings.push(skipped(format!(
            "the field is `format: {format}`, which the API server reads as a typed value and the evaluator as a string"
        )));
        return;
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("?")
        .to_owned();
    for (path, value) in values {
        let mut context = cel::Context::with_env(environment());
        context.add_variable_from_value("self", to_cel(value));
        let broken = |message: String| Finding::Broken {
            sample: sample.to_owned(),
            name: name.clone(),
            rule: rule.rule.clone(),
            path: path.clone(),
            value: shown(value),
            message,
        };
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => findings.push(broken(message(rule, &context))),
            Err(cel::ExecutionError::NoSuchKey(key)) => findings.push(broken(format!(
                "the sample leaves out `{key}`, which the rule reads: the API server refuses it"
            ))),
            Ok(other) => findings.push(skipped(format!(
                "it gives {other:?}, where a rule gives a bool"
            ))),
            Err(error) => findings.push(skipped(format!(
                "rsbuilder's CEL evaluator (the cel crate) cannot evaluate it: {error}"
            ))),
        }
    }
}

/// `value` as JSON, cut to 80 characters.
fn shown(value: &Json) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// The message the API server would give: `messageExpression`'s value when it is one line of
/// text, else `message`, else the rule.
fn message(rule: &Rule, context: &cel::Context) -> String {
    let expressed = rule
        .message_expression
        .as_deref()
        .and_then(|source| compile(source).ok())
        .and_then(|program| program.execute(context).ok());
    match expressed {
        Some(cel::Value::String(text)) if !text.trim().is_empty() && !text.contains('\n') => {
            text.to_string()
        }
        _ => rule
            .message
            .clone()
            .unwrap_or_else(|| format!("failed rule: {}", rule.rule)),
    }
}

/// The values of `object` at `steps`, each with its place (`.spec.tags[1]`) under `at`: a
/// missing or null field has none (the API server evaluates a rule only where its field is
/// set).
fn values_at<'a>(object: &'a Json, steps: &[Step], at: String) -> Vec<(String, &'a Json)> {
    if object.is_null() {
        return Vec::new();
    }
    let Some((first, rest)) = steps.split_first() else {
        let at = if at.is_empty() { ".".to_owned() } else { at };
        return vec![(at, object)];
    };
    match (first, object) {
        (Step::Field(name), Json::Object(map)) => map
            .get(name)
            .map(|value| values_at(value, rest, format!("{at}.{name}")))
            .unwrap_or_default(),
        (Step::Each, Json::Array(items)) => items
            .iter()
            .enumerate()
            .flat_map(|(i, item)| values_at(item, rest, format!("{at}[{i}]")))
            .collect(),
        (Step::Each, Json::Object(map)) => map
            .iter()
            .flat_map(|(key, value)| values_at(value, rest, format!("{at}[{key}]")))
            .collect(),
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
mod tests;
