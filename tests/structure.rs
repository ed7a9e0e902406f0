//! Structural measures of `src/`, read from the code itself: no import circle between files, no
//! production function over 100 lines outside declarative tables, no `Result<_, String>` in
//! production code. Each measure has a list of the places still known to break it; the test fails
//! when a new place appears *and* when a listed place is fixed, so the lists only ever shrink.
//!
//! The scanner is deliberately small: comments, string and char literals are blanked first, test
//! modules (`#[cfg(test)] mod x;` files and inline `#[cfg(test)] mod x { … }` blocks) are left
//! out, and a file's imports are its `use crate::/super::/self::` trees plus inline paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Import circles still known, each as its sorted member modules joined by `, `.
const KNOWN_CIRCLES: &[&str] = &[];

/// Functions that are declarative tables: long because they list data, not because they branch.
const TABLES: &[&str] = &[
    // Every API path with its operations, one entry each.
    "http/openapi.rs::paths",
    // Every metric's registration (name, help, label, label values), one field each.
    "metrics/mod.rs::new",
];

/// Production functions over the limit still known, as `file::name`.
const KNOWN_LONG: &[&str] = &[];

/// The longest a production function may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 100;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// One production source file: its module path, its path under `src/`, and its text with
/// comments, literals and inline test modules blanked (lines kept, so line numbers hold).
struct Source {
    module: Vec<String>,
    rel: String,
    code: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
        if !matches!(stem.as_str(), "mod" | "lib" | "main") {
            parts.push(stem);
        }
    }
    parts
}

/// Files declared as `#[cfg(test)] mod name;` (or `#[path]`-less equivalents) by their parent.
fn test_module_files(src: &Path, files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let dir = if matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        ) {
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            file.with_extension("")
        };
        let mut pending_cfg_test = false;
        for line in text.lines() {
            let t = line.trim();
            if t == "#[cfg(test)]" {
                pending_cfg_test = true;
                continue;
            }
            if let Some(path) = t
                .strip_prefix("#[path = \"")
                .and_then(|r| r.strip_suffix("\"]"))
                .filter(|_| pending_cfg_test)
            {
                out.insert(file.parent().unwrap_or(src).join(path));
            }
            if pending_cfg_test {
                let decl = t.strip_prefix("pub(crate) ").unwrap_or(t);
                if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                    out.insert(dir.join(format!("{name}.rs")));
                    out.insert(dir.join(name).join("mod.rs"));
                }
                if !t.starts_with("#[") {
                    pending_cfg_test = false;
                }
            }
        }
    }
    out
}

fn sources() -> Vec<Source> {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let tests = test_module_files(&src, &files);
    let mut out = Vec::new();
    for file in &files {
        if tests.contains(file) || under_test_dir(&tests, file) {
            continue;
        }
        let rel = file.strip_prefix(&src).unwrap_or(file);
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{e}"));
        out.push(Source {
            module: module_of(rel),
            rel: rel.display().to_string(),
            code: drop_inline_test_modules(&blank(&text)),
        });
    }
    out
}

fn under_test_dir(tests: &BTreeSet<PathBuf>, file: &Path) -> bool {
    tests.iter().any(|t| {
        t.file_name().is_some_and(|n| n == "mod.rs")
            && t.parent().is_some_and(|dir| file.starts_with(dir))
    })
}

/// The text with comments, string, byte-string, raw-string and char literals replaced by spaces.
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            let open = chars[i..].iter().position(|&c| c == '"').unwrap_or(0) + 1;
            for _ in 0..open {
                out.push(' ');
            }
            i += open;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                out.push(keep(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&chars, i) {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, `br##"` … at `i` (not the tail of an identifier): the number of `#`s.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(hashes)
}

/// A `'` opening a char literal rather than a lifetime or label.
fn is_char_literal(chars: &[char], i: usize) -> bool {
    match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    }
}

/// The code with every `#[cfg(test)] mod name { … }` block blanked.
fn drop_inline_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]") {
        let start = from + at;
        let after = &out[start + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub(crate) mod ");
        let brace = after.find('{');
        let semi = after.find(';');
        match (is_mod, brace) {
            (true, Some(b)) if semi.is_none_or(|s| b < s) => {
                let open = start + "#[cfg(test)]".len() + b;
                let close = matching_brace(&out, open).unwrap_or(out.len() - 1);
                let blanked: String = out[start..=close]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' })
                    .collect();
                out.replace_range(start..=close, &blanked);
                from = close + 1;
            }
            _ => from = start + 1,
        }
    }
    out
}

/// The byte index of the `}` closing the `{` at `open` (text already blanked of literals).
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, b) in code.as_bytes()[open..].iter().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open + k);
                }
            }
            _ => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Imports

/// Every path of a `use` tree (`a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e`).
fn expand_use_tree(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    fn rec(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if let (Some(open), Some(close)) = (part.find('{'), part.rfind('}')) {
                let mut p = prefix.to_vec();
                p.extend(segments(part[..open].trim_end_matches(':')));
                rec(&p, &part[open + 1..close], out);
            } else {
                let head = part.split(" as ").next().unwrap_or(part);
                let mut p = prefix.to_vec();
                p.extend(segments(head));
                out.push(p);
            }
        }
    }
    let compact: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    rec(&[], &compact, &mut out);
    out
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The module file a `crate::`/`super::`/`self::` path lands in: its longest known prefix.
fn resolve(
    modules: &BTreeSet<Vec<String>>,
    current: &[String],
    path: &[String],
) -> Option<Vec<String>> {
    let (mut base, mut rest): (Vec<String>, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (current.to_vec(), &path[1..]),
        "super" => (current.to_vec(), path),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    let mut best = None;
    for i in 0..=rest.len() {
        let mut candidate = base.clone();
        candidate.extend_from_slice(&rest[..i]);
        if modules.contains(&candidate) {
            best = Some(candidate);
        }
    }
    best
}

/// `use` trees and inline paths that start with `crate`, `super` or `self`.
fn imported_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        let tree = after[..end].trim();
        if ["crate", "super", "self"]
            .iter()
            .any(|r| tree.starts_with(&format!("{r}::")))
        {
            out.extend(expand_use_tree(tree));
        }
        rest = &after[end..];
    }
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            // `pub(in crate::x)` names a visibility, not an import.
            if code[..start].trim_end().ends_with("(in") {
                continue;
            }
            let end = code[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| start + e);
            out.push(segments(&code[start..end]));
        }
    }
    out
}

/// The byte index of `word` as a whole word in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let i = from + at;
        let before = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let j = i + word.len();
        let after = j >= bytes.len() || !(bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_');
        if before && after {
            return Some(i);
        }
        from = i + word.len();
    }
    None
}

/// Strongly connected components of more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Vec<String>) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        let edges = w.edges;
        for t in edges.get(v).into_iter().flatten() {
            let Some((key, _)) = edges.get_key_value(t) else {
                continue;
            };
            if !w.index.contains_key(key) {
                visit(w, key);
                let l = w.low[key].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.stack.contains(&key) {
                let l = w.index[key].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut comp = Vec::new();
            while let Some(top) = w.stack.pop() {
                comp.push(top.join("::"));
                if top == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                w.found.push(comp);
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            visit(&mut walk, v);
        }
    }
    walk.found.sort();
    walk.found
}

fn import_graph(sources: &[Source]) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules: BTreeSet<Vec<String>> = sources
        .iter()
        .filter(|s| s.module.first().is_none_or(|m| m != "bin"))
        .map(|s| s.module.clone())
        .collect();
    let mut edges = BTreeMap::new();
    for s in sources.iter().filter(|s| modules.contains(&s.module)) {
        let targets: BTreeSet<Vec<String>> = imported_paths(&s.code)
            .iter()
            .filter_map(|p| resolve(&modules, &s.module, p))
            .filter(|t| *t != s.module)
            .collect();
        edges.insert(s.module.clone(), targets);
    }
    edges
}

// ---------------------------------------------------------------------------------------------
// Functions

/// `(name, first line, line count)` of every function with a body.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find_word(&code[from..], "fn") {
        let start = from + at;
        from = start + 2;
        let after = code[from..].trim_start();
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let Some(brace) = body_start(&code[from..]) else {
            continue;
        };
        let open = from + brace;
        let Some(close) = matching_brace(code, open) else {
            continue;
        };
        let first = code[..start].matches('\n').count() + 1;
        let last = code[..close].matches('\n').count() + 1;
        out.push((name, first, last - first + 1));
    }
    out
}

/// The offset of a signature's body `{`, or `None` for a declaration ending in `;`. Braces inside
/// the signature's generics or parameters (none in practice) are not expected.
fn body_start(sig: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in sig.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if !sig[..i].ends_with('-') => depth -= 1,
            '{' if depth <= 0 => return Some(i),
            ';' if depth <= 0 => return None,
            _ => {}
        }
    }
    None
}

fn long_functions(sources: &[Source]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in sources {
        for (name, _line, len) in functions(&s.code) {
            let key = format!("{}::{name}", s.rel);
            if len > MAX_FN_LINES && !TABLES.contains(&key.as_str()) {
                out.insert(key);
            }
        }
    }
    out
}

/// `file:line` of every `Result<…, String>` in production code.
fn string_errors(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources {
        for (n, line) in s.code.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = find_word(rest, "Result") {
                let after = &rest[at + "Result".len()..];
                if generic_args(after)
                    .is_some_and(|args| args.len() == 2 && args[1].trim() == "String")
                {
                    out.push(format!("{}:{}", s.rel, n + 1));
                }
                rest = after;
            }
        }
    }
    out
}

/// The top-level arguments of a `<…>` at the start of `text`.
fn generic_args(text: &str) -> Option<Vec<String>> {
    let inner = text.trim_start().strip_prefix('<')?;
    let (mut depth, mut args, mut cur) = (0i32, Vec::new(), String::new());
    for c in inner.chars() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if depth == 0 => {
                args.push(cur);
                return Some(args);
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                args.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The measures

/// What changed against a known list: places that are new, and listed places that are gone.
fn ratchet(found: &BTreeSet<String>, known: &[&str]) -> (Vec<String>, Vec<String>) {
    let known: BTreeSet<String> = known.iter().map(|s| s.to_string()).collect();
    (
        found.difference(&known).cloned().collect(),
        known.difference(found).cloned().collect(),
    )
}

#[test]
fn no_new_import_circle_between_files() {
    let found: BTreeSet<String> = circles(&import_graph(&sources()))
        .into_iter()
        .map(|c| c.join(", "))
        .collect();
    let (new, gone) = ratchet(&found, KNOWN_CIRCLES);
    assert!(new.is_empty(), "new import circles:\n{new:#?}");
    assert!(
        gone.is_empty(),
        "circles gone (remove them from KNOWN_CIRCLES):\n{gone:#?}"
    );
}

#[test]
fn no_new_function_over_the_limit() {
    let found = long_functions(&sources());
    let (new, gone) = ratchet(&found, KNOWN_LONG);
    assert!(
        new.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{new:#?}"
    );
    assert!(
        gone.is_empty(),
        "functions now short (remove them from KNOWN_LONG):\n{gone:#?}"
    );
}

#[test]
fn string_errors_only_where_still_known() {
    let found = string_errors(&sources());
    let per_file: BTreeMap<String, usize> = found.iter().fold(BTreeMap::new(), |mut m, at| {
        let file = at.rsplit_once(':').map_or(at.as_str(), |(f, _)| f);
        *m.entry(file.to_string()).or_default() += 1;
        m
    });
    let files: BTreeSet<String> = per_file.keys().cloned().collect();
    let (new, gone) = ratchet(&files, KNOWN_STRING_ERRORS);
    assert!(
        new.is_empty(),
        "`Result<_, String>` in production code (use a typed error):\n{:#?}",
        found
            .iter()
            .filter(|at| new.iter().any(|f| at.starts_with(&format!("{f}:"))))
            .collect::<Vec<_>>()
    );
    assert!(
        gone.is_empty(),
        "files now free of string errors (remove them from KNOWN_STRING_ERRORS):\n{gone:#?}"
    );
}

/// Files whose production code still returns `Result<_, String>`.
const KNOWN_STRING_ERRORS: &[&str] = &[];

#[test]
fn the_scanner_reads_what_it_must() {
    let code =
        blank("let s = \"fn x() { crate::a }\"; // crate::b\nlet c = '{'; let l: &'a str;\n");
    assert!(!code.contains("crate::"), "{code}");
    assert!(!code.contains('{'), "{code}");
    assert!(code.contains("&'a str"), "{code}");
    let raw = blank("let r = r#\"a \" { b\"#; fn f() {}");
    assert_eq!(functions(&raw).len(), 1, "{raw}");
    let tree = expand_use_tree("crate::a::{b, c::{d, e as f}, self}");
    assert!(tree.contains(&segments("crate::a::c::e")), "{tree:?}");
    assert!(tree.contains(&segments("crate::a::b")), "{tree:?}");
    let fns =
        functions("fn a() -> Result<(), String> {\n  x\n}\nfn b();\nimpl X { fn c(&self) {} }");
    let names: Vec<&str> = fns.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(fns[0].2, 3);
    let tested = drop_inline_test_modules("fn a() {}\n#[cfg(test)]\nmod tests {\n fn b() {}\n}\n");
    assert_eq!(functions(&tested).len(), 1);
    let src = [Source {
        module: segments("m"),
        rel: "m.rs".into(),
        code: "fn f() -> Result<u8, String> { g() }\nfn g() -> Result<Vec<u8>, Error> {}\n".into(),
    }];
    assert_eq!(string_errors(&src), ["m.rs:1"]);
    let mut edges = BTreeMap::new();
    edges.insert(segments("a"), BTreeSet::from([segments("b")]));
    edges.insert(segments("b"), BTreeSet::from([segments("a")]));
    edges.insert(segments("c"), BTreeSet::from([segments("a")]));
    assert_eq!(circles(&edges), [vec!["a".to_string(), "b".to_string()]]);
}

/// `name:? = value` in a log macro: the value is written as Rust debug text (`Some(…)`,
/// `Continue { attempt: 1 }`), which a reader of the logs cannot rely on. Production code
/// logs words and numbers (`:%` with a `word()`, `log_field::opt`, a count).
fn debug_log_fields(sources: &[Source]) -> Vec<String> {
    let mut out = Vec::new();
    for s in sources {
        for (n, line) in s.code.lines().enumerate() {
            if line.contains(":? =") {
                out.push(format!("{}:{}: {}", s.rel, n + 1, line.trim()));
            }
        }
    }
    out
}

#[test]
fn no_log_field_is_written_as_debug_text() {
    let found = debug_log_fields(&sources());
    assert!(
        found.is_empty(),
        "log fields written with `:?` (log a word or a number instead):\n{found:#?}"
    );
}
