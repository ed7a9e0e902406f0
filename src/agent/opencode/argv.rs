//! OpenCode command line and managed environment: the exact argv of one `opencode run` turn,
//! the `opencode export` call that reads a session's records, and the `OPENCODE_*` variables
//! sortie owns, all from the session state and the `opencode:` pass-through block.

use crate::domain::SettingProblem;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The `opencode:` block keys this kind understands.
pub const BLOCK_KEYS: &[&str] = &[
    "model",
    "agent",
    "variant",
    "thinking",
    "pure",
    "dangerously_skip_permissions",
    "disable_autocompact",
    "allowed_tools",
    "denied_tools",
];

/// The string-valued keys, passed as `--<key> <value>`.
pub const STRING_KEYS: &[&str] = &["model", "agent", "variant"];
/// The boolean keys.
pub const BOOL_KEYS: &[&str] = &[
    "thinking",
    "pure",
    "dangerously_skip_permissions",
    "disable_autocompact",
];
/// The tool-scoping list keys.
pub const LIST_KEYS: &[&str] = &["allowed_tools", "denied_tools"];

/// The permission keys OpenCode knows; an allow-list denies every one it does not name.
pub const PERMISSION_KEYS: &[&str] = &[
    "bash",
    "codesearch",
    "doom_loop",
    "edit",
    "external_directory",
    "glob",
    "grep",
    "list",
    "lsp",
    "question",
    "read",
    "skill",
    "task",
    "todowrite",
    "webfetch",
    "websearch",
];

/// Every variable sortie manages; inherited copies are removed before the turn's values apply.
pub const MANAGED_ENV: &[&str] = &[
    "OPENCODE_AUTO_SHARE",
    "OPENCODE_DISABLE_AUTOCOMPACT",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_PERMISSION",
];

/// The argv of one turn after the program (and after any arguments `agent.command` carries).
/// `session` is the id to continue, `None` on a new conversation's first turn; `prompt` is
/// `None` when it travels on stdin (OpenCode reads a piped stdin as the message), as sortie
/// sends every prompt.
pub fn run_args(
    workspace: &Path,
    session: Option<&str>,
    block: &Map<String, Value>,
    prompt: Option<&str>,
) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--format", "json", "--dir"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(workspace.to_string_lossy().into_owned());
    if let Some(id) = session.filter(|s| !s.is_empty()) {
        args.push("--session".into());
        args.push(id.to_string());
    }
    for key in STRING_KEYS {
        if let Some(v) = str_key(block, key) {
            args.push(format!("--{key}"));
            args.push(v);
        }
    }
    for key in ["thinking", "pure"] {
        if bool_key(block, key) == Some(true) {
            args.push(format!("--{key}"));
        }
    }
    if bool_key(block, "dangerously_skip_permissions") != Some(false) {
        args.push("--dangerously-skip-permissions".into());
    }
    // `--` ends the options, so a prompt starting with `-` stays a message.
    if let Some(prompt) = prompt {
        args.push("--".into());
        args.push(prompt.to_string());
    }
    args
}

/// The argv of the export that reads a session's records.
pub fn export_args(session_id: &str) -> Vec<String> {
    vec!["export".into(), "--sanitize".into(), session_id.to_string()]
}

/// The managed variables in a fixed order; `OPENCODE_PERMISSION` only when tools are scoped.
pub fn managed_env(block: &Map<String, Value>) -> Result<Vec<(String, String)>, SettingProblem> {
    let autocompact_off = bool_key(block, "disable_autocompact").unwrap_or(true);
    let mut env = vec![
        ("OPENCODE_AUTO_SHARE".to_string(), "false".to_string()),
        (
            "OPENCODE_DISABLE_AUTOCOMPACT".to_string(),
            autocompact_off.to_string(),
        ),
        (
            "OPENCODE_DISABLE_AUTOUPDATE".to_string(),
            "true".to_string(),
        ),
        (
            "OPENCODE_DISABLE_LSP_DOWNLOAD".to_string(),
            "true".to_string(),
        ),
    ];
    if let Some(json) = permission_json(block)? {
        env.push(("OPENCODE_PERMISSION".to_string(), json));
    }
    Ok(env)
}

/// `OPENCODE_PERMISSION` from `allowed_tools` / `denied_tools`: an allow-list allows its
/// tools and denies every other known key; a deny-list denies its tools. `None` when neither
/// is set; an error when a tool is in both.
pub fn permission_json(block: &Map<String, Value>) -> Result<Option<String>, SettingProblem> {
    let allowed = list_key(block, "allowed_tools");
    let denied = list_key(block, "denied_tools");
    if allowed.is_none() && denied.is_none() {
        return Ok(None);
    }
    let overlap: Vec<&String> = match (&allowed, &denied) {
        (Some(a), Some(d)) => a.iter().filter(|t| d.contains(t)).collect(),
        _ => Vec::new(),
    };
    if !overlap.is_empty() {
        let names: Vec<&str> = overlap.iter().map(|s| s.as_str()).collect();
        return Err(SettingProblem::new(
            "opencode.denied_tools",
            format!(
                "opencode.allowed_tools and opencode.denied_tools both name {}",
                names.join(", ")
            ),
        ));
    }
    let mut rules: BTreeMap<String, &str> = BTreeMap::new();
    if let Some(allowed) = &allowed {
        for key in PERMISSION_KEYS {
            rules.insert(key.to_string(), "deny");
        }
        for tool in allowed {
            rules.insert(tool.clone(), "allow");
        }
    }
    for tool in denied.iter().flatten() {
        rules.insert(tool.clone(), "deny");
    }
    let map: Map<String, Value> = rules
        .into_iter()
        .map(|(k, v)| (k, Value::String(v.to_string())))
        .collect();
    Ok(Some(Value::Object(map).to_string()))
}

fn str_key(block: &Map<String, Value>, key: &str) -> Option<String> {
    block
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn bool_key(block: &Map<String, Value>, key: &str) -> Option<bool> {
    block.get(key).and_then(Value::as_bool)
}

/// A list of tool names (or one comma-separated string); `None` when unset or empty.
pub fn list_key(block: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
    let names: Vec<String> = match block.get(key)? {
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    (!names.is_empty()).then_some(names)
}
