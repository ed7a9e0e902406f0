//! Copilot CLI command line: the exact argv for one turn, from the session state and the
//! `copilot-cli:` pass-through block, plus the block's type checks.
//!
//! Every turn runs `-p <prompt> --output-format json -s --autopilot --no-ask-user
//! --max-autopilot-continues N`, then `--resume <id>` (or `--continue` when the CLI never named
//! its session), then the block's keys:
//!
//! | key | argv |
//! |---|---|
//! | `model`, `agent` (strings) | `--model`, `--agent` |
//! | `max_autopilot_continues` (positive integer, default 50) | `--max-autopilot-continues N` |
//! | `allowed_tools`, `denied_tools`, `available_tools`, `excluded_tools` (lists of strings, or one string) | `--allow-tool`, `--deny-tool`, `--available-tools`, `--excluded-tools`, one flag per entry; with none of them set, `--allow-all` |
//! | `mcp_config` (string) | `--additional-mcp-config`: inline JSON (`{…}`) or `@file` as written, any other value a file relative to WORKFLOW.md (`@` added); the worker's own MCP file wins |
//! | `disable_builtin_mcps`, `no_custom_instructions`, `experimental` (booleans) | `--disable-builtin-mcps`, `--no-custom-instructions`, `--experimental` when true |

use crate::domain::SettingProblem;
use serde_json::{Map, Value};
use std::path::Path;

/// The `copilot-cli:` block keys the argv understands.
pub const BLOCK_KEYS: &[&str] = &[
    "model",
    "max_autopilot_continues",
    "agent",
    "allowed_tools",
    "denied_tools",
    "available_tools",
    "excluded_tools",
    "mcp_config",
    "disable_builtin_mcps",
    "no_custom_instructions",
    "experimental",
];

/// `--max-autopilot-continues` when the block sets none.
pub const DEFAULT_AUTOPILOT_CONTINUES: u64 = 50;

/// Prompts longer than this go on stdin: Linux caps one argv element at 128 KiB, and the CLI
/// reads a piped prompt when `-p` is absent.
pub const MAX_ARGV_PROMPT_BYTES: usize = 100 * 1024;

/// The tool-scoping keys, each with the flag it becomes; any of them replaces `--allow-all`.
const TOOL_KEYS: &[(&str, &str)] = &[
    ("allowed_tools", "--allow-tool"),
    ("denied_tools", "--deny-tool"),
    ("available_tools", "--available-tools"),
    ("excluded_tools", "--excluded-tools"),
];
const STRING_KEYS: &[&str] = &["model", "agent", "mcp_config"];
const BOOL_KEYS: &[&str] = &[
    "disable_builtin_mcps",
    "no_custom_instructions",
    "experimental",
];

/// How the prompt reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptArg<'a> {
    /// `-p <prompt>`.
    Flag(&'a str),
    /// `--prompt=<prompt>`: a prompt starting with `-` would otherwise read as an option.
    Attached(&'a str),
    /// No prompt flag: the prompt is written to stdin.
    Stdin,
}

impl<'a> PromptArg<'a> {
    /// The safest way to pass `prompt` on the command line. Sortie itself sends every prompt
    /// on stdin ([`PromptArg::Stdin`]), so `ps` never shows issue text; the argv forms stay
    /// for checking the CLI's parser.
    pub fn for_prompt(prompt: &'a str) -> PromptArg<'a> {
        if prompt.len() > MAX_ARGV_PROMPT_BYTES {
            PromptArg::Stdin
        } else if prompt.starts_with('-') {
            PromptArg::Attached(prompt)
        } else {
            PromptArg::Flag(prompt)
        }
    }
}

/// How the turn names its conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuity {
    /// The first turn of a new conversation: no flag.
    New,
    /// A later turn when no session id was ever reported: `--continue`.
    Continue,
    /// `--resume <id>`.
    Resume(String),
}

impl Continuity {
    /// The word a log line carries.
    pub fn word(&self) -> &'static str {
        match self {
            Continuity::New => "new",
            Continuity::Continue => "continue",
            Continuity::Resume(_) => "resume",
        }
    }
}

/// The argv after the program (and after any arguments `agent.command` carries).
pub fn build_args(
    prompt: PromptArg<'_>,
    continuity: &Continuity,
    block: &Map<String, Value>,
    workflow_dir: &Path,
    worker_mcp_config: Option<&Path>,
) -> Vec<String> {
    let mut args = Vec::new();
    match prompt {
        PromptArg::Flag(p) => {
            args.push("-p".to_string());
            args.push(p.to_string());
        }
        PromptArg::Attached(p) => args.push(format!("--prompt={p}")),
        PromptArg::Stdin => {}
    }
    args.extend(
        [
            "--output-format",
            "json",
            "-s",
            "--autopilot",
            "--no-ask-user",
            "--max-autopilot-continues",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    args.push(autopilot_continues(block).to_string());
    match continuity {
        Continuity::New => {}
        Continuity::Continue => args.push("--continue".into()),
        Continuity::Resume(id) => {
            args.push("--resume".into());
            args.push(id.clone());
        }
    }
    for (key, flag) in [("model", "--model"), ("agent", "--agent")] {
        if let Some(v) = str_key(block, key) {
            args.push(flag.into());
            args.push(v);
        }
    }
    let scoped: Vec<(&str, Vec<String>)> = TOOL_KEYS
        .iter()
        .map(|(key, flag)| (*flag, tool_values(block, key)))
        .filter(|(_, values)| !values.is_empty())
        .collect();
    if scoped.is_empty() {
        args.push("--allow-all".into());
    }
    for (flag, values) in scoped {
        for v in values {
            args.push(flag.to_string());
            args.push(v);
        }
    }
    if let Some(v) = mcp_value(block, workflow_dir, worker_mcp_config) {
        args.push("--additional-mcp-config".into());
        args.push(v);
    }
    for (key, flag) in [
        ("disable_builtin_mcps", "--disable-builtin-mcps"),
        ("no_custom_instructions", "--no-custom-instructions"),
        ("experimental", "--experimental"),
    ] {
        if block.get(key).and_then(Value::as_bool) == Some(true) {
            args.push(flag.into());
        }
    }
    args
}

/// `max_autopilot_continues` when it is a positive integer, else the default.
fn autopilot_continues(block: &Map<String, Value>) -> u64 {
    block
        .get("max_autopilot_continues")
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_AUTOPILOT_CONTINUES)
}

/// The `--additional-mcp-config` value: the worker's file wins; an operator value that is
/// inline JSON (`{`) or already a CLI file reference (`@`) passes as written; any other value
/// is a file path (relative to WORKFLOW.md's directory) and gets the `@` the CLI needs.
fn mcp_value(
    block: &Map<String, Value>,
    workflow_dir: &Path,
    worker: Option<&Path>,
) -> Option<String> {
    if let Some(p) = worker {
        return Some(format!("@{}", p.display()));
    }
    let v = str_key(block, "mcp_config")?;
    if v.starts_with('{') || v.starts_with('@') {
        return Some(v);
    }
    Some(format!("@{}", workflow_dir.join(v).display()))
}

fn str_key(block: &Map<String, Value>, key: &str) -> Option<String> {
    block
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A tool key's values: each string of a list, or one string as written (the CLI splits it).
fn tool_values(block: &Map<String, Value>, key: &str) -> Vec<String> {
    match block.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        _ => str_key(block, key).into_iter().collect(),
    }
}

/// Type checks over the block: what `build_args` would otherwise silently skip.
pub fn block_problems(block: &Map<String, Value>) -> Vec<SettingProblem> {
    let mut out = Vec::new();
    let field = |key: &str| format!("copilot-cli.{key}");
    for key in STRING_KEYS {
        if let Some(v) = block.get(*key).filter(|v| !v.is_null() && !v.is_string()) {
            out.push(SettingProblem::new(
                field(key),
                format!("must be a string, got {}", type_name(v)),
            ));
        }
    }
    for (key, _) in TOOL_KEYS {
        let ok = match block.get(*key) {
            None | Some(Value::Null) | Some(Value::String(_)) => true,
            Some(Value::Array(items)) => items.iter().all(Value::is_string),
            Some(_) => false,
        };
        if !ok {
            out.push(SettingProblem::new(
                field(key),
                "must be a list of tool names (strings), or one string",
            ));
        }
    }
    for key in BOOL_KEYS {
        if let Some(v) = block.get(*key).filter(|v| !v.is_null() && !v.is_boolean()) {
            out.push(SettingProblem::new(
                field(key),
                format!("must be true or false, got {}", type_name(v)),
            ));
        }
    }
    if let Some(v) = block
        .get("max_autopilot_continues")
        .filter(|v| !v.is_null() && v.as_u64().is_none_or(|n| n == 0))
    {
        out.push(SettingProblem::new(
            field("max_autopilot_continues"),
            format!("must be a positive integer, got {v}"),
        ));
    }
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn prompt_placement() {
        assert_eq!(PromptArg::for_prompt("fix it"), PromptArg::Flag("fix it"));
        assert_eq!(PromptArg::for_prompt("-x"), PromptArg::Attached("-x"));
        let long = "y".repeat(MAX_ARGV_PROMPT_BYTES + 1);
        assert_eq!(PromptArg::for_prompt(&long), PromptArg::Stdin);
    }

    #[test]
    fn block_types_are_checked() {
        let b = block(json!({
            "model": 5, "allowed_tools": ["view", 3], "denied_tools": {"a": 1},
            "experimental": "yes", "max_autopilot_continues": 0
        }));
        let fields: Vec<String> = block_problems(&b).into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "copilot-cli.model",
                "copilot-cli.allowed_tools",
                "copilot-cli.denied_tools",
                "copilot-cli.experimental",
                "copilot-cli.max_autopilot_continues"
            ]
        );
        let good = block(json!({
            "model": "gpt-5-mini", "max_autopilot_continues": 50, "allowed_tools": ["shell(git:*)"],
            "excluded_tools": "bash", "experimental": true
        }));
        assert!(block_problems(&good).is_empty());
        assert_eq!(
            block_problems(&block(json!({"max_autopilot_continues": -3}))).len(),
            1
        );
        assert_eq!(
            block_problems(&block(json!({"max_autopilot_continues": 2.5}))).len(),
            1
        );
    }
}
