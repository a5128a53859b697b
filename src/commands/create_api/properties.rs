//! A property test over names: projects are scaffolded in memory with groups, versions, kinds
//! and plurals drawn from the values validation accepts, the tricky ones first (Rust keywords,
//! names of crate files, names the generated code imports, words YAML 1.1 reads as booleans,
//! the longest names), and every tree is checked:
//! - planning never panics, and refuses with a `UserError` or succeeds;
//! - every Rust file parses (syn), imports no name twice, and every `mod x;` finds exactly one
//!   file (no E0583, no E0761);
//! - every YAML file parses, and holds no plain scalar that YAML 1.1 reads as something else;
//! - no scaffolded file is planned again by another resource;
//! - every name that reaches the API server fits its limit.
//!
//! The cases come from a seeded generator, the same on every run; `RSBUILDER_PROPERTY_CASES`
//! asks for more (CI runs more than `cargo test`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{crd_to_join, plan, resolve, with_project};
use crate::apply::{self, Options};
use crate::cli::CreateApiArgs;
use crate::project::Project;
use crate::scaffold::Plan;
use crate::tree::Memory;
use crate::ui::UserError;

const GROUPS: &[&str] = &[
    "",
    "apps",
    "core",
    "lib",
    "mod",
    "main",
    "bin",
    "support",
    "self",
    "super",
    "crate",
    "type",
    "fn",
    "async",
    "std",
    "kube",
    "on",
    "no",
    "y",
    "a-b",
    "a.b",
    "app-otp",
    "x9",
    "webhooks",
    "controllers",
    "tests",
    "security.platform",
    "a-very-long-group-name-that-goes-on.and-on-and-on-for-a-while",
];

const KINDS: &[&str] = &[
    "AppOTP",
    "A",
    "Mod",
    "Lib",
    "Main",
    "Support",
    "Bin",
    "Client",
    "Api",
    "Controller",
    "Context",
    "Error",
    "Object",
    "Spec",
    "Status",
    "Webhooks",
    "Defaulter",
    "Validator",
    "Hub",
    "Spoke",
    "On",
    "No",
    "Y",
    "Yes",
    "Null",
    "True",
    "Off",
    "Loop",
    "Impl",
    "Type",
    "Match",
    "Box",
    "Backoff",
    "Observed",
    "Deployment",
    "Registration",
    "Recorder",
    "Duration",
    "Value",
    "Cd",
    "BCd",
    "Policy",
    "Person",
    "Index",
    "Fish",
    "Series",
    "Child",
    "Analysis",
    "V2",
    "CertificateRequestPolicy",
    "ServiceLevelObjectiveScheduleWithAVeryLongNameThatNeverEnds",
];

const VERSIONS: &[&str] = &["v1", "v2", "v1beta1", "v1alpha1", "v10alpha3"];

const PLURALS: &[&str] = &["foo", "on", "yes", "no", "x", "cds", "a-b", "people"];

use crate::yaml::YAML_1_1_WORDS;

/// A xorshift generator: deterministic, and enough to mix the lists above.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A project in memory: its files by path, and its PROJECT.
#[derive(Clone)]
struct Tree {
    memory: Memory,
    project: Project,
    /// The files as `init` left them, which `check` need not read again.
    initial: std::sync::Arc<BTreeMap<PathBuf, String>>,
}

/// The projects `init` makes, cluster-wide and namespaced, planned once.
static INITIAL: std::sync::OnceLock<[Tree; 2]> = std::sync::OnceLock::new();

impl Tree {
    fn new(namespaced: bool) -> Self {
        let initial = INITIAL.get_or_init(|| {
            [false, true].map(|namespaced| {
                let (plan, project) =
                    crate::commands::init::planned("prop-operator", "learn.com", namespaced);
                let files: BTreeMap<PathBuf, String> = plan
                    .files
                    .into_iter()
                    .map(|file| (file.path, file.contents))
                    .collect();
                Tree {
                    initial: std::sync::Arc::new(files.clone()),
                    memory: Memory { files },
                    project,
                }
            })
        });
        initial[usize::from(namespaced)].clone()
    }

    /// Runs `create api` with `args`: `Ok(false)` when it refuses, as a user error.
    fn create_api(&mut self, args: &CreateApiArgs) -> Result<bool, String> {
        let request = match resolve(args, &self.project) {
            Ok(request) => request,
            Err(error) if error.downcast_ref::<UserError>().is_some() => return Ok(false),
            Err(error) => return Err(format!("resolve failed without a user error: {error:#}")),
        };
        let crd = crd_to_join(&self.memory, &request).map_err(|e| format!("read: {e:#}"))?;
        let planned =
            plan(&self.project, &request, crd.as_deref()).map_err(|e| format!("plan: {e:#}"))?;
        let mut project = self.project.clone();
        let planned = with_project(planned, &mut project, &request);
        self.apply(planned, args.force)?;
        self.project = project;
        Ok(true)
    }

    /// Applies `plan` with `apply`'s own resolution, in memory. A conflict that `--force` would
    /// override fails the property: a resource must never plan another resource's file.
    fn apply(&mut self, plan: Plan, force: bool) -> Result<(), String> {
        let options = Options {
            force,
            dry_run: false,
        };
        apply::apply_in_memory(&mut self.memory, plan, options).map_err(|e| format!("apply: {e:#}"))
    }

    /// Every property of the tree; the problems found.
    fn check(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (path, text) in &self.memory.files {
            if self.initial.get(path) == Some(text) {
                continue;
            }
            let name = path.display();
            if path.iter().any(|part| part.len() > 255) {
                problems.push(format!("{name}: a path component over 255 bytes"));
            }
            match path.extension().and_then(|e| e.to_str()) {
                Some("rs") => match syn::parse_file(text) {
                    Err(error) => problems.push(format!("{name}: does not parse: {error}")),
                    Ok(file) => {
                        problems.extend(self.check_rust(path, &file));
                    }
                },
                Some("yaml") => problems.extend(check_yaml(path, text)),
                _ => {}
            }
        }
        for resource in &self.project.resources {
            let names = crate::names::ResourceNames::new(
                &resource.group,
                &resource.version,
                &resource.kind,
                resource.plural.as_deref(),
                &resource.domain,
            );
            for (what, value, limit) in [
                ("CRD name", &names.crd_name, 253),
                ("plural", &names.plural, 63),
                ("controller name", &names.controller_name, 63),
                (
                    "short name",
                    &names.short_name.clone().unwrap_or_default(),
                    63,
                ),
            ] {
                if value.len() > limit {
                    problems.push(format!(
                        "{}: {what} `{value}` is over {limit}",
                        resource.kind
                    ));
                }
            }
        }
        problems
    }

    fn check_rust(&self, path: &Path, file: &syn::File) -> Vec<String> {
        let mut problems = Vec::new();
        let mut imported = BTreeSet::new();
        for item in &file.items {
            match item {
                syn::Item::Use(item) => {
                    let mut names = Vec::new();
                    use_names(&item.tree, &mut names);
                    for name in names {
                        if name != "_" && name != "self" && !imported.insert(name.clone()) {
                            problems
                                .push(format!("{}: `{name}` is imported twice", path.display()));
                        }
                    }
                }
                syn::Item::Mod(module) if module.content.is_none() => {
                    let name = module.ident.to_string();
                    let name = name.strip_prefix("r#").unwrap_or(&name);
                    let dir = module_dir(path);
                    let candidates = [
                        dir.join(format!("{name}.rs")),
                        dir.join(name).join("mod.rs"),
                    ];
                    let found = candidates
                        .iter()
                        .filter(|candidate| self.memory.files.contains_key(*candidate))
                        .count();
                    if found != 1 {
                        problems.push(format!(
                            "{}: `mod {name};` finds {found} files ({})",
                            path.display(),
                            if found == 0 { "E0583" } else { "E0761" }
                        ));
                    }
                }
                _ => {}
            }
        }
        problems
    }
}

/// The folder where the modules a file declares live.
fn module_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new(""));
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let root = matches!(stem, "mod" | "lib" | "main") || parent.ends_with("tests");
    if root || parent.ends_with("src/bin") {
        parent.to_path_buf()
    } else {
        parent.join(stem)
    }
}

/// The names a `use` tree brings into scope.
fn use_names(tree: &syn::UseTree, out: &mut Vec<String>) {
    match tree {
        syn::UseTree::Path(path) => use_names(&path.tree, out),
        syn::UseTree::Name(name) => out.push(name.ident.to_string()),
        syn::UseTree::Rename(rename) => out.push(rename.rename.to_string()),
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(group) => group.items.iter().for_each(|tree| use_names(tree, out)),
    }
}

/// The problems of one YAML file: it must parse, and hold no plain YAML 1.1 boolean.
fn check_yaml(path: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        if let Err(error) = <serde_yaml::Value as serde::Deserialize>::deserialize(document) {
            problems.push(format!("{}: does not parse: {error}", path.display()));
            // serde_yaml's documents after an error are that error again, without end.
            break;
        }
    }
    let mut block: Option<usize> = None;
    for (number, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        if let Some(block_indent) = block {
            if line.trim().is_empty() || indent > block_indent {
                continue;
            }
            block = None;
        }
        let body = line.trim();
        if body.starts_with('#') {
            continue;
        }
        let body = body.strip_prefix("- ").unwrap_or(body);
        let (key, value) = match body.split_once(": ") {
            Some((key, value)) => (Some(key), value),
            None => (body.strip_suffix(':'), body),
        };
        if value.starts_with(['|', '>']) {
            block = Some(indent);
        }
        let value = value.split(" #").next().unwrap_or(value).trim();
        for word in [key.unwrap_or_default(), value] {
            if YAML_1_1_WORDS.contains(&word) {
                problems.push(format!(
                    "{}:{}: `{word}` is plain, and YAML 1.1 reads it as a boolean",
                    path.display(),
                    number + 1
                ));
            }
        }
    }
    problems
}

/// Controller names: kubebuilder's, ones that are Rust keywords or reserved file stems, and
/// ones named like the kinds above.
const CONTROLLER_NAMES: &[&str] = &[
    "captain-backup",
    "backup",
    "mod",
    "lib",
    "self",
    "type",
    "main",
    "app-otp",
    "a-b-cd",
    "x1",
];

fn args(group: &str, version: &str, kind: &str) -> CreateApiArgs {
    CreateApiArgs {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: None,
        namespaced: None,
        resource: Some(true),
        controller: Some(true),
        controller_name: None,
        ssa: None,
        image: None,
        image_container_port: None,
        image_container_command: None,
        run_as_user: None,
        plugins: Vec::new(),
        force: false,
        make: false,
        dry_run: false,
    }
}

/// Checks `tree` and panics with every problem and the commands that made it.
#[track_caller]
fn assert_sound(tree: &Tree, commands: &[String]) {
    let problems = tree.check();
    assert!(
        problems.is_empty(),
        "after\n  {}\n{problems:#?}",
        commands.join("\n  ")
    );
}

#[test]
fn every_tricky_name_alone_scaffolds_a_sound_tree() {
    // Every kind, and every group, at least once: each kind with a group in turn, then each
    // group with a kind in turn.
    let pairs = KINDS
        .iter()
        .enumerate()
        .map(|(i, kind)| (GROUPS[i % GROUPS.len()], *kind))
        .chain(
            GROUPS
                .iter()
                .enumerate()
                .map(|(i, group)| (*group, KINDS[(i * 7) % KINDS.len()])),
        );
    for (group, kind) in pairs {
        {
            let mut tree = Tree::new(false);
            let args = args(group, "v1", kind);
            let command = format!("create api --group '{group}' --version v1 --kind {kind}");
            match tree.create_api(&args) {
                Ok(_) => assert_sound(&tree, &[command]),
                Err(problem) => panic!("{command}: {problem}"),
            }
        }
    }
}

#[test]
fn random_projects_scaffold_sound_trees() {
    let cases: u64 = std::env::var("RSBUILDER_PROPERTY_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(60);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    for case in 0..cases {
        let mut tree = Tree::new(rng.chance(30));
        let mut commands = vec![format!("# case {case}")];
        for _ in 0..1 + rng.next() % 4 {
            let mut args = args(rng.pick(GROUPS), rng.pick(VERSIONS), rng.pick(KINDS));
            if rng.chance(20) {
                args.plural = Some(rng.pick(PLURALS).to_owned());
            }
            if rng.chance(20) {
                args.namespaced = Some(rng.chance(50));
            }
            if rng.chance(20) {
                args.controller = Some(false);
            }
            if rng.chance(15) {
                args.image = Some("memcached:1.6.26-alpine3.19".into());
                args.image_container_port = rng.chance(50).then(|| "11211".into());
                args.resource = None;
                args.controller = None;
                args.namespaced = None;
            }
            if rng.chance(10) {
                args.force = true;
            }
            if rng.chance(20) {
                args.controller_name = Some(rng.pick(CONTROLLER_NAMES).to_owned());
                args.resource = Some(rng.chance(50));
            }
            if rng.chance(10) && args.image.is_none() {
                args.ssa = Some(true);
            }
            commands.push(format!(
                "create api --group '{}' --version {} --kind {} --plural {:?} --namespaced {:?} --controller {:?} --controller-name {:?} --ssa={:?} --image {:?} --force={}",
                args.group, args.version, args.kind, args.plural, args.namespaced, args.controller, args.controller_name, args.ssa, args.image, args.force
            ));
            if let Err(problem) = tree.create_api(&args) {
                panic!("after\n  {}\n{problem}", commands.join("\n  "));
            }
            assert_sound(&tree, &commands);
        }
    }
}

#[test]
fn a_controller_of_every_kind_of_kubernetes_scaffolds_a_sound_tree() {
    for builtin in crate::names::builtin::BUILTINS {
        let group = match builtin.group {
            "" => "core".to_owned(),
            group => group.to_owned(),
        };
        let mut tree = Tree::new(false);
        let mut args = args(&group, builtin.version, builtin.kind);
        args.resource = Some(false);
        let command = format!(
            "create api --group {group} --version {} --kind {} --resource=false",
            builtin.version, builtin.kind
        );
        match tree.create_api(&args) {
            Ok(true) => {
                assert!(tree.project.resources.iter().any(|r| r.core), "{command}");
                assert_sound(&tree, &[command]);
            }
            Ok(false) => panic!("{command} was refused"),
            Err(problem) => panic!("{command}: {problem}"),
        }
    }
}

/// Images that the reference grammar accepts, with registries, ports, digests and every
/// separator.
const IMAGES: &[&str] = &[
    "nginx",
    "memcached:1.6.26-alpine3.19",
    "registry.example.com:5000/team/app__x.y---z:V1.0_rc",
    "[::1]:5000/a/b",
    "localhost/x:y@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "Registry.Example.com/a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
];

/// Commands with what Rust string literals, Tera and YAML would read otherwise.
const COMMANDS: &[&str] = &[
    "a\\b",
    "say \"hi\"",
    "sh,-c,echo \"$HOME\" \\\\ 'x' # not a comment",
    "{{ kind }},{% raw %},{#,}}",
    "ünïcødé,✓,🦀",
    "\\u{41},\\n,\\\"",
    "r#\"raw\"#,\"#",
    "  spaced  ,: colon",
];

/// The strings of a `&[&str]` or `&str` constant, as the compiler reads them.
fn const_strings(file: &syn::File, name: &str) -> Option<Vec<String>> {
    fn strings(expr: &syn::Expr, out: &mut Vec<String>) {
        match expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(lit),
                ..
            }) => out.push(lit.value()),
            syn::Expr::Reference(reference) => strings(&reference.expr, out),
            syn::Expr::Array(array) => array.elems.iter().for_each(|elem| strings(elem, out)),
            _ => {}
        }
    }
    file.items.iter().find_map(|item| match item {
        syn::Item::Const(item) if item.ident == name => {
            let mut out = Vec::new();
            strings(&item.expr, &mut out);
            Some(out)
        }
        _ => None,
    })
}

#[test]
fn images_and_commands_reach_rust_literals_as_given() {
    for (case, command) in COMMANDS.iter().enumerate() {
        let image = IMAGES[case % IMAGES.len()];
        let mut tree = Tree::new(false);
        let mut args = args("web", "v1", "Site");
        args.image = Some(image.to_owned());
        args.image_container_command = Some((*command).to_owned());
        args.resource = None;
        args.controller = None;
        let shown = format!("create api --image {image:?} --image-container-command {command:?}");
        match tree.create_api(&args) {
            Ok(true) => assert_sound(&tree, std::slice::from_ref(&shown)),
            Ok(false) => panic!("{shown} was refused"),
            Err(problem) => panic!("{shown}: {problem}"),
        }
        let controller = &tree.memory.files[Path::new("operator/src/controllers/web/site.rs")];
        let file = syn::parse_file(controller).unwrap();
        assert_eq!(
            const_strings(&file, "DEFAULT_IMAGE"),
            Some(vec![image.to_owned()]),
            "{shown}"
        );
        let parts: Vec<String> = command.split(',').map(str::to_owned).collect();
        assert_eq!(const_strings(&file, "COMMAND"), Some(parts), "{shown}");
        // The CRD's default, in a schemars attribute that syn does not look into.
        let types = &tree.memory.files[Path::new("api/src/web/v1/site.rs")];
        let default = types
            .lines()
            .skip_while(|line| !line.contains("/// The container image;"))
            .find_map(|line| {
                line.split_once("extend(\"default\" = ")?
                    .1
                    .strip_suffix("))]")
            })
            .unwrap_or_else(|| panic!("{shown}: no default image in\n{types}"));
        assert_eq!(
            syn::parse_str::<syn::LitStr>(default)
                .map(|lit| lit.value())
                .ok(),
            Some(image.to_owned()),
            "{shown}"
        );
        assert_eq!(
            tree.project.deploy_images[0]
                .options
                .container_command
                .as_deref(),
            Some(*command)
        );
    }
}
