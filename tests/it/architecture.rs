//! The claims of `ARCHITECTURE.md` that a reading of `src/` can check. Each test names the
//! claim it holds the code to; a change that breaks one fails here, with the places.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module of the CLI: its path (`plugins::helm::values`), its file, and its code without
/// its tests.
struct Module {
    path: String,
    file: PathBuf,
    code: String,
}

/// The longest a file of `src/` may be.
const MAX_FILE_LINES: usize = 800;
/// The longest a function of `src/` may be.
const MAX_FN_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file of `src/`: `apply/mod.rs` is `apply`, `main.rs` the crate.
fn module_path(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

/// Every module of `src/` that is not a test: files of test modules (`tests.rs`, `tests/`,
/// one a `#[cfg(test)] mod x;` declares) are left out, and so is the `#[cfg(test)] mod`
/// block a file ends with.
fn modules() -> Vec<Module> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let texts: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|f| (f.clone(), std::fs::read_to_string(f).unwrap()))
        .collect();
    let mut test_only = BTreeSet::new();
    for (file, text) in &texts {
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if pair[0].trim() == "#[cfg(test)]"
                && let Some(name) = pair[1]
                    .trim()
                    .strip_prefix("mod ")
                    .and_then(|rest| rest.strip_suffix(';'))
            {
                let dir = if file
                    .file_name()
                    .is_some_and(|n| n == "mod.rs" || n == "main.rs")
                {
                    file.parent().unwrap().to_path_buf()
                } else {
                    file.with_extension("")
                };
                test_only.insert(dir.join(format!("{name}.rs")));
                test_only.insert(dir.join(name));
            }
        }
    }
    texts
        .into_iter()
        .filter(|(file, _)| {
            let relative = file.strip_prefix(src()).unwrap();
            !test_only.iter().any(|t| file.starts_with(t))
                && !relative.components().any(|c| c.as_os_str() == "tests")
        })
        .map(|(file, text)| {
            let lines: Vec<&str> = text.lines().collect();
            let end = lines
                .windows(2)
                .position(|pair| {
                    pair[0].trim() == "#[cfg(test)]"
                        && pair[1].starts_with("mod ")
                        && pair[1].trim_end().ends_with('{')
                })
                .unwrap_or(lines.len());
            Module {
                path: module_path(&file),
                code: lines[..end].join("\n"),
                file,
            }
        })
        .collect()
}

fn shown(file: &Path) -> String {
    file.strip_prefix(src().parent().unwrap())
        .unwrap()
        .display()
        .to_string()
}

/// "No file in `src/` is over 800 lines."
#[test]
fn no_file_of_src_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(f, lines)| format!("{} ({lines} lines)", shown(f)))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines: {long:?}"
    );
}

/// The characters of a line of code that are code: string and character literals and what
/// follows `//` left out (a literal is taken to end on its line, as in rustfmt's output but
/// for raw multi-line strings, which hold no braces in `src/`).
fn code_chars(line: &str) -> Vec<char> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let mut string = false;
    while let Some(c) = chars.next() {
        if string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => string = true,
            '/' if chars.peek() == Some(&'/') => break,
            // A character literal: `'{'`, `'\''`; a lifetime (`'a`) has no closing quote.
            '\'' => {
                let rest: String = chars.clone().take(4).collect();
                if let Some(close) = rest
                    .char_indices()
                    .skip(1)
                    .find(|(_, c)| *c == '\'')
                    .map(|(i, _)| i)
                    && (close == 1 || rest.starts_with('\\'))
                {
                    for _ in 0..=close {
                        chars.next();
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The functions of `code`, with the line each starts on and its length in lines: from the
/// line of `fn` to the line of the brace that closes its body.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let Some(at) = trimmed.find("fn ") else {
            continue;
        };
        let head = &trimmed[..at];
        let is_item = head.split_whitespace().all(|word| {
            [
                "pub",
                "pub(crate)",
                "pub(super)",
                "async",
                "const",
                "unsafe",
            ]
            .contains(&word)
        });
        if !is_item || trimmed.starts_with("//") {
            continue;
        }
        let name: String = trimmed[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: from the first `{` after the signature, at no bracket's depth, to its
        // match; a `;` before it ends a declaration without a body. Strings, characters and
        // comments do not count.
        let mut depth = 0usize;
        let mut body = None;
        let mut end = None;
        'scan: for (index, text) in lines.iter().enumerate().skip(start) {
            for c in code_chars(text) {
                match c {
                    '(' | '[' | '{' if body.is_some() || c != '{' || depth > 0 => depth += 1,
                    '{' => {
                        body = Some(index);
                        depth = 1;
                    }
                    ')' | ']' | '}' => {
                        depth = depth.saturating_sub(1);
                        if body.is_some() && depth == 0 {
                            end = Some(index);
                            break 'scan;
                        }
                    }
                    ';' if body.is_none() && depth == 0 => break 'scan,
                    _ => {}
                }
            }
        }
        if let Some(end) = end {
            out.push((name, start + 1, end - start + 1));
        }
    }
    out
}

/// "Every function of `src/` is under 80 lines."
#[test]
fn every_function_of_src_is_under_80_lines() {
    let long: Vec<String> = modules()
        .iter()
        .flat_map(|module| {
            functions(&module.code)
                .into_iter()
                .filter(|(_, _, length)| *length > MAX_FN_LINES)
                .map(|(name, line, length)| {
                    format!("{}:{line} `{name}` ({length} lines)", shown(&module.file))
                })
        })
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: {long:#?}"
    );
}

/// The counting of lines above can fail: a long function is found.
#[test]
fn a_long_function_is_counted_as_long() {
    let body = "    step();\n".repeat(MAX_FN_LINES);
    let code = format!(
        "/// Doc.\npub(crate) fn long(\n    a: u8,\n) -> u8 {{\n{body}    a\n}}\nfn short() {{}}\n"
    );
    let found = functions(&code);
    assert_eq!(
        functions("fn f(a: [u8; 3]) -> char {\n    let _ = \"}}\";\n    '}'\n}\n"),
        [("f".to_owned(), 1, 4)]
    );
    assert_eq!(found[0].0, "long");
    assert_eq!(found[0].2, MAX_FN_LINES + 5);
    assert_eq!(found[1], ("short".to_owned(), MAX_FN_LINES + 7, 1));
}

/// "No code outside `apply/` writes, creates or removes a file of the project",
/// and "reads go through `tree.rs`": no other module of the CLI names `std::fs` or walkdir.
#[test]
fn only_apply_and_tree_touch_the_file_system() {
    let allowed = ["apply", "tree"];
    let touching: Vec<String> = modules()
        .iter()
        .filter(|module| {
            let top = module.path.split("::").next().unwrap_or_default();
            !allowed.contains(&top)
        })
        .flat_map(|module| {
            module
                .code
                .lines()
                .enumerate()
                .filter(|(_, line)| {
                    let code = line.split("//").next().unwrap_or_default();
                    code.contains("std::fs")
                        || (code.contains("use std::{") && code.contains("fs"))
                        || code.contains("walkdir")
                        || code.contains("fs::read")
                        || code.contains("fs::write")
                        || code.contains("File::create")
                        || code.contains("OpenOptions")
                })
                .map(|(index, line)| {
                    format!("{}:{}: {}", shown(&module.file), index + 1, line.trim())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        touching.is_empty(),
        "file system use outside apply/ and tree.rs: {touching:#?}"
    );
}

/// "No plugin assembles a file with `.replace` or `format!`": the plugins' code holds no
/// `.replace(` and no Go template text (`{{`), which their templates under `templates/` hold.
/// The one exception is read, not written: `GENERATED`, the first line by which the Helm
/// plugin knows its own templates.
#[test]
fn plugins_build_no_file_text_in_rust() {
    let built: Vec<String> = modules()
        .iter()
        .filter(|module| module.path.starts_with("plugins"))
        .flat_map(|module| {
            let mut in_header = false;
            let mut found = Vec::new();
            for (index, line) in module.code.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                in_header |= code.trim_start().starts_with("const GENERATED: &str");
                if in_header {
                    in_header = !code.contains(';');
                    continue;
                }
                if code.contains(".replace(") || code.contains("{{") {
                    found.push(format!(
                        "{}:{}: {}",
                        shown(&module.file),
                        index + 1,
                        line.trim()
                    ));
                }
            }
            found
        })
        .collect();
    assert!(built.is_empty(), "file text built in a plugin: {built:#?}");
}

/// "No other module imports clap."
#[test]
fn only_cli_uses_clap() {
    let users: Vec<String> = modules()
        .iter()
        .filter(|module| {
            module.path != "cli"
                && (module.code.contains("clap::") || module.code.contains("use clap"))
        })
        .map(|module| shown(&module.file))
        .collect();
    assert!(users.is_empty(), "clap outside cli.rs: {users:?}");
}

/// The modules `module` names, by path, among `known` (`crate::a::b`, `super::c`); a module's
/// own ancestors and descendants do not count (a child reads its parent's items by design).
fn uses(module: &Module, known: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<&str> = if module.path.is_empty() {
        Vec::new()
    } else {
        module.path.split("::").collect()
    };
    let mut out = BTreeSet::new();
    let code = module.code.as_str();
    let next = |text: &str| match (text.find("crate::"), text.find("super::")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut rest = code;
    while let Some(at) = next(rest) {
        let (prefix, path_start) = if rest[at..].starts_with("crate::") {
            (Vec::new(), at + "crate::".len())
        } else {
            // `super::` from a file module is its parent; a chain climbs further.
            let mut base = own.clone();
            base.pop();
            let mut start = at + "super::".len();
            while rest[start..].starts_with("super::") {
                base.pop();
                start += "super::".len();
            }
            (base, start)
        };
        let prefix: Vec<String> = prefix.iter().map(|p| (*p).to_owned()).collect();
        for path in paths_at(&rest[path_start..], &prefix) {
            // The longest module the path names.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].join("::"))
                .find(|candidate| known.contains(candidate));
            if let Some(target) = target {
                let related = target == module.path
                    || target.starts_with(&format!("{}::", module.path))
                    || module.path.starts_with(&format!("{target}::"));
                if !related && !module.path.is_empty() {
                    out.insert(target);
                }
            }
        }
        rest = &rest[path_start..];
    }
    out
}

/// The paths a `use` or an expression names at the start of `text`, after `prefix`:
/// `a::b` is one, `a::{b, c::{d, self}}` is `a::b`, `a::c::d` and `a::c`.
fn paths_at(text: &str, prefix: &[String]) -> Vec<Vec<String>> {
    let mut path = prefix.to_vec();
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .iter()
                .flat_map(|item| paths_at(item.trim(), &path))
                .collect();
        }
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[word.len()..];
        if !word.is_empty() && word != "self" {
            path.push(word);
        }
        if let Some(after) = rest.strip_prefix("::") {
            rest = after;
            continue;
        }
        return vec![path];
    }
}

/// The items of a `{...}` group whose text starts after its `{`: split at its own commas.
fn group_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (index, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&text[start..index]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    items
}

/// The pairs of `graph` that reach each other: each edge `from -> to` from which `from` is
/// reached again.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let reaches = |from: &str, to: &str| -> bool {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(at) = stack.pop() {
            if !seen.insert(at.clone()) {
                continue;
            }
            for next in graph.get(&at).into_iter().flatten() {
                if next == to {
                    return true;
                }
                stack.push(next.clone());
            }
        }
        false
    };
    let mut found = Vec::new();
    for (from, targets) in graph {
        for to in targets {
            if reaches(to, from) {
                found.push(format!("{from} -> {to} -> ... -> {from}"));
            }
        }
    }
    found
}

/// "There are no import cycles": no two modules of `src/` use each other, directly or through
/// others (a module and its own submodules and parents aside).
#[test]
fn no_two_modules_depend_on_each_other() {
    let modules = modules();
    let known: BTreeSet<String> = modules.iter().map(|m| m.path.clone()).collect();
    // A module holds its submodules: what they use, it uses (but its own parts).
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let targets = uses(module, &known);
        let parts: Vec<&str> = module.path.split("::").collect();
        for n in 1..=parts.len() {
            let holder = parts[..n].join("::");
            let inside = format!("{holder}::");
            graph.entry(holder.clone()).or_default().extend(
                targets
                    .iter()
                    .filter(|t| {
                        **t != holder
                            && !t.starts_with(&inside)
                            && !holder.starts_with(&format!("{t}::"))
                    })
                    .cloned(),
            );
        }
    }
    let found = cycles(&graph);
    assert!(found.is_empty(), "import cycles: {found:#?}");
}

/// The reading of uses and the cycle finder can fail: a module's uses are found through
/// `crate::` and `super::` paths, its parent and children aside, and two modules that reach
/// each other are a cycle.
#[test]
fn uses_and_cycles_are_seen() {
    let known: BTreeSet<String> = ["a", "b", "a::c"].map(String::from).into();
    let a = Module {
        path: "a".into(),
        file: PathBuf::from("a.rs"),
        code: "use crate::b::thing;\nfn f() { super::x(); crate::a::c::y(); }".into(),
    };
    let c = Module {
        path: "a::c".into(),
        file: PathBuf::from("a/c.rs"),
        code: "use super::super::b;\nuse crate::a::z;".into(),
    };
    assert_eq!(uses(&a, &known), ["b".to_owned()].into());
    assert_eq!(uses(&c, &known), ["b".to_owned()].into());
    let grouped = Module {
        path: "b".into(),
        file: PathBuf::from("b.rs"),
        code: "use crate::{a::{self, c::Thing}, b::x};\nuse super::{x, y};".into(),
    };
    assert_eq!(
        uses(&grouped, &known),
        ["a".to_owned(), "a::c".to_owned()].into()
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), ["b".to_owned()].into()),
        ("b".to_owned(), ["c".to_owned()].into()),
        ("c".to_owned(), ["a".to_owned()].into()),
        ("d".to_owned(), ["a".to_owned()].into()),
    ]
    .into();
    assert_eq!(cycles(&graph).len(), 3);
    let mut acyclic = graph.clone();
    acyclic.insert("c".to_owned(), BTreeSet::new());
    assert!(cycles(&acyclic).is_empty());
}
