//! Claude Code's tool names mapped onto the API's tool categories (`tool_kind`) and their one
//! main argument (`tool_argument`).

use serde_json::Value;
use std::path::Path;

use crate::agent::tool_kind::{ToolKind, clean_argument, relative_to, strip_shell_wrapper};

/// Classifies a Claude Code tool call and extracts its main argument.
pub fn classify(name: &str, input: &Value, workspace: &Path) -> (Option<ToolKind>, Option<String>) {
    let str_field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    let (kind, arg) = match name {
        "Bash" => (
            ToolKind::Shell,
            str_field(&["command"]).map(|c| strip_shell_wrapper(&c)),
        ),
        "Read" => (
            ToolKind::Read,
            str_field(&["file_path", "path"]).map(|p| relative_to(&p, workspace)),
        ),
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => (
            ToolKind::Edit,
            str_field(&["file_path", "notebook_path", "path"]).map(|p| relative_to(&p, workspace)),
        ),
        "Skill" => (ToolKind::Skill, str_field(&["skill", "name", "command"])),
        _ => return (None, None),
    };
    (
        Some(kind),
        arg.map(|a| clean_argument(&a)).filter(|a| !a.is_empty()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_claude_tools() {
        let ws = Path::new("/ws");
        assert_eq!(
            classify("Bash", &json!({"command": "bash -lc 'go test ./...'"}), ws),
            (Some(ToolKind::Shell), Some("go test ./...".into()))
        );
        assert_eq!(
            classify("Read", &json!({"file_path": "/ws/src/main.rs"}), ws),
            (Some(ToolKind::Read), Some("src/main.rs".into()))
        );
        assert_eq!(
            classify("Write", &json!({"file_path": "main.go"}), ws),
            (Some(ToolKind::Edit), Some("main.go".into()))
        );
        assert_eq!(
            classify("Skill", &json!({"skill": "pdf"}), ws),
            (Some(ToolKind::Skill), Some("pdf".into()))
        );
        assert_eq!(classify("TodoWrite", &json!({}), ws), (None, None));
    }
}
