//! Copilot CLI tool names mapped onto the API's tool categories (`tool_kind`) and their one
//! main argument (`tool_argument`).

use serde_json::Value;
use std::path::Path;

use crate::agent::tool_kind::{ToolKind, clean_argument, relative_to, strip_shell_wrapper};

/// Classifies a Copilot CLI tool call and extracts its main argument.
pub fn classify(
    name: &str,
    arguments: &Value,
    workspace: &Path,
) -> (Option<ToolKind>, Option<String>) {
    let str_field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| arguments.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    let path = || str_field(&["path", "file_path", "filePath"]).map(|p| relative_to(&p, workspace));
    let (kind, arg) = match name {
        "bash" | "shell" => (
            ToolKind::Shell,
            str_field(&["command"]).map(|c| strip_shell_wrapper(&c)),
        ),
        "view" => (ToolKind::Read, path()),
        "edit" | "create" => (ToolKind::Edit, path()),
        // The editor tool also views files when its `command` says so.
        n if n.starts_with("str_replace") => match str_field(&["command"]).as_deref() {
            Some("view") => (ToolKind::Read, path()),
            _ => (ToolKind::Edit, path()),
        },
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
    fn classifies_copilot_tools() {
        let ws = Path::new("/ws");
        assert_eq!(
            classify("bash", &json!({"command": "bash -lc 'cargo test'"}), ws),
            (Some(ToolKind::Shell), Some("cargo test".into()))
        );
        assert_eq!(
            classify("shell", &json!({"command": "ls"}), ws),
            (Some(ToolKind::Shell), Some("ls".into()))
        );
        assert_eq!(
            classify("view", &json!({"path": "/ws/src/lib.rs"}), ws),
            (Some(ToolKind::Read), Some("src/lib.rs".into()))
        );
        for name in ["edit", "create", "str_replace", "str_replace_editor"] {
            assert_eq!(
                classify(name, &json!({"path": "/ws/a.txt"}), ws),
                (Some(ToolKind::Edit), Some("a.txt".into())),
                "{name}"
            );
        }
        assert_eq!(
            classify(
                "str_replace_editor",
                &json!({"command": "view", "path": "/ws/a.txt"}),
                ws
            ),
            (Some(ToolKind::Read), Some("a.txt".into()))
        );
        assert_eq!(classify("report_intent", &json!({}), ws), (None, None));
    }
}
