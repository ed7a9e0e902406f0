//! Claude Code command line: the exact argv for one turn, from the session state and the
//! `claude-code:` pass-through block.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The `claude-code:` block keys the argv understands.
pub const BLOCK_KEYS: &[&str] = &[
    "permission_mode",
    "model",
    "fallback_model",
    "max_turns",
    "max_budget_usd",
    "effort",
    "allowed_tools",
    "disallowed_tools",
    "system_prompt",
    "mcp_config",
    "session_persistence",
];

/// How the turn names its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionFlag {
    /// First turn of a new conversation: `--session-id <uuid>`.
    New(String),
    /// Continue: `--resume <id>`.
    Resume(String),
}

/// The argv after the program (and after any arguments `agent.command` carries).
/// `prompt` is `None` when it is sent on stdin, as sortie sends every prompt (issue text never
/// shows in `ps`).
pub fn build_args(
    prompt: Option<&str>,
    session: &SessionFlag,
    block: &Map<String, Value>,
    workflow_dir: &Path,
    worker_mcp_config: Option<&Path>,
) -> Vec<String> {
    let mut args = vec!["-p".to_string()];
    if let Some(p) = prompt {
        args.push(p.to_string());
    }
    args.extend(
        ["--output-format", "stream-json", "--verbose"]
            .iter()
            .map(|s| s.to_string()),
    );
    match str_key(block, "permission_mode") {
        Some(mode) => {
            args.push("--permission-mode".into());
            args.push(mode);
        }
        None => args.push("--dangerously-skip-permissions".into()),
    }
    match session {
        SessionFlag::New(id) => {
            args.push("--session-id".into());
            args.push(id.clone());
        }
        SessionFlag::Resume(id) => {
            args.push("--resume".into());
            args.push(id.clone());
        }
    }
    let mut flag = |key: &str, flag: &str, value: Option<String>| {
        if let Some(v) = value {
            let _ = key;
            args.push(flag.to_string());
            args.push(v);
        }
    };
    flag("model", "--model", str_key(block, "model"));
    flag(
        "fallback_model",
        "--fallback-model",
        str_key(block, "fallback_model"),
    );
    flag(
        "max_turns",
        "--max-turns",
        block
            .get("max_turns")
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| n.to_string()),
    );
    flag(
        "max_budget_usd",
        "--max-budget-usd",
        block
            .get("max_budget_usd")
            .and_then(Value::as_f64)
            .filter(|n| *n > 0.0)
            .map(|n| n.to_string()),
    );
    flag("effort", "--effort", str_key(block, "effort"));
    flag(
        "allowed_tools",
        "--allowedTools",
        list_key(block, "allowed_tools"),
    );
    flag(
        "disallowed_tools",
        "--disallowedTools",
        list_key(block, "disallowed_tools"),
    );
    flag(
        "system_prompt",
        "--append-system-prompt",
        str_key(block, "system_prompt"),
    );
    let mcp: Option<PathBuf> = match worker_mcp_config {
        Some(p) => Some(p.to_path_buf()),
        None => str_key(block, "mcp_config").map(|p| workflow_dir.join(p)),
    };
    if let Some(p) = mcp {
        args.push("--mcp-config".into());
        args.push(p.to_string_lossy().into_owned());
    }
    if block.get("session_persistence").and_then(Value::as_bool) == Some(false) {
        args.push("--no-session-persistence".into());
    }
    args
}

fn str_key(block: &Map<String, Value>, key: &str) -> Option<String> {
    block
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A string, or a list of strings joined with commas.
fn list_key(block: &Map<String, Value>, key: &str) -> Option<String> {
    match block.get(key)? {
        Value::Array(items) => {
            let v: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            (!v.is_empty()).then(|| v.join(","))
        }
        _ => str_key(block, key),
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
    fn first_turn_defaults() {
        let args = build_args(
            Some("do it"),
            &SessionFlag::New("u-1".into()),
            &Map::new(),
            Path::new("/wf"),
            None,
        );
        assert_eq!(
            args,
            [
                "-p",
                "do it",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--session-id",
                "u-1"
            ]
        );
    }

    #[test]
    fn every_passthrough_key_in_order() {
        let b = block(json!({
            "permission_mode": "acceptEdits", "model": "opus", "fallback_model": "sonnet",
            "max_turns": 7, "max_budget_usd": 1.5, "effort": "high",
            "allowed_tools": ["Read", "Bash"], "disallowed_tools": "WebFetch",
            "system_prompt": "be brief", "mcp_config": "mcp.json", "session_persistence": false
        }));
        let args = build_args(
            None,
            &SessionFlag::Resume("s-9".into()),
            &b,
            Path::new("/wf"),
            None,
        );
        assert_eq!(
            args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--resume",
                "s-9",
                "--model",
                "opus",
                "--fallback-model",
                "sonnet",
                "--max-turns",
                "7",
                "--max-budget-usd",
                "1.5",
                "--effort",
                "high",
                "--allowedTools",
                "Read,Bash",
                "--disallowedTools",
                "WebFetch",
                "--append-system-prompt",
                "be brief",
                "--mcp-config",
                "/wf/mcp.json",
                "--no-session-persistence"
            ]
        );
    }

    #[test]
    fn worker_mcp_path_wins_over_the_block() {
        let b = block(json!({"mcp_config": "mcp.json", "max_turns": 0}));
        let args = build_args(
            Some("x"),
            &SessionFlag::New("u".into()),
            &b,
            Path::new("/wf"),
            Some(Path::new("/ws/.sortie/mcp.json")),
        );
        assert!(args.ends_with(&[
            "--mcp-config".to_string(),
            "/ws/.sortie/mcp.json".to_string()
        ]));
        assert!(!args.contains(&"--max-turns".to_string()));
    }
}
