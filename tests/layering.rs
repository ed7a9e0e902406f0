//! The layering of `src/lib.rs`, checked: a module of the library may name (`crate::x`) only
//! modules of strictly lower layers. Comments are skipped; everything else counts, so an
//! inline path such as `crate::http::start(…)` is caught like a `use` line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Lowest first; the same order as the comment at the top of `src/lib.rs`.
const LAYERS: &[&[&str]] = &[
    &[
        "build_info",
        "child_env",
        "clock",
        "domain",
        "log_field",
        "mask",
        "process_signal",
    ],
    &["http_client", "sandbox", "ssh"],
    &[
        "agent",
        "kube",
        "prompt",
        "scm",
        "tracker",
        "ui",
        "workspace",
    ],
    &["pricing", "registry"],
    &["config"],
    &["logging", "notify", "store"],
    &["metrics"],
    &["orchestrator"],
    &["http", "mcp"],
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
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

/// The top-level module a file of `src/` belongs to; `None` for the crate roots and binaries.
fn owning_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    match name {
        "lib" | "main" | "bin" => None,
        other => Some(other.to_string()),
    }
}

/// Every `crate::<name>` outside comments, as (line number, name).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
            rest = after;
        }
    }
    out
}

#[test]
fn every_module_is_in_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_else(|e| panic!("{e}"));
    for line in lib.lines() {
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|r| r.strip_suffix(';'))
        {
            assert!(
                layer_of(name).is_some(),
                "module `{name}` of src/lib.rs is in no layer of tests/layering.rs"
            );
        }
    }
}

#[test]
fn no_module_imports_from_its_own_or_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = owning_module(&src, file) else {
            continue;
        };
        let Some(own) = layer_of(&module) else {
            panic!(
                "{} belongs to `{module}`, which is in no layer",
                file.display()
            );
        };
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{e}"));
        for (line, name) in crate_paths(&text) {
            if name == module {
                continue;
            }
            match layer_of(&name) {
                Some(l) if l < own => {}
                _ => violations.entry(module.clone()).or_default().push(format!(
                    "{}:{line} names crate::{name}",
                    file.strip_prefix(&src).unwrap_or(file).display()
                )),
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering:\n{violations:#?}"
    );
}

#[test]
fn the_scanner_sees_inline_paths_and_skips_comments() {
    let found = crate_paths("let x = crate::http::start(); // crate::cli\n/// [`crate::ui`]\n");
    assert_eq!(found, vec![(1, "http".to_string())]);
}

/// The layers as a document lists them: `(layer, [modules])` from its lines that start with
/// `prefix` followed by a layer number (`//! 3. \`a\`, \`b\`` in `src/lib.rs`, `| 3 | \`a\`,
/// \`b\` | …` in ARCHITECTURE.md), rows of one number joined.
fn documented_layers(text: &str, prefix: &str, sep: char) -> Vec<Vec<String>> {
    let mut by_layer: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix) else {
            continue;
        };
        let Some((number, tail)) = rest.split_once(sep) else {
            continue;
        };
        let Ok(layer) = number.trim().parse::<usize>() else {
            continue;
        };
        let modules = tail.split('|').next().unwrap_or("");
        let names = modules
            .split(',')
            .filter_map(|m| m.trim().strip_prefix('`')?.strip_suffix('`'))
            .map(str::to_string);
        by_layer.entry(layer).or_default().extend(names);
    }
    by_layer
        .into_values()
        .map(|mut v| {
            v.sort();
            v
        })
        .collect()
}

#[test]
fn lib_rs_and_the_architecture_document_list_the_same_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let want: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|l| {
            let mut v: Vec<String> = l.iter().map(|m| m.to_string()).collect();
            v.sort();
            v
        })
        .collect();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert_eq!(documented_layers(&lib, "//! ", '.'), want, "src/lib.rs");
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert_eq!(documented_layers(&doc, "| ", '|'), want, "ARCHITECTURE.md");
}
