//! OpenCode's tool names mapped onto the API's tool categories (`tool_kind`) and their one
//! main argument (`tool_argument`).

use crate::agent::tool_kind::{ToolKind, clean_argument, relative_to, strip_shell_wrapper};
use serde_json::Value;
use std::path::Path;

/// Classifies an OpenCode tool call and extracts its main argument.
pub fn classify(name: &str, input: &Value, workspace: &Path) -> (Option<ToolKind>, Option<String>) {
    let str_field = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    let (kind, arg) = match name {
        "bash" => (
            ToolKind::Shell,
            str_field(&["command"]).map(|c| strip_shell_wrapper(&c)),
        ),
        "read" => (
            ToolKind::Read,
            str_field(&["filePath", "path"]).map(|p| relative_to(&p, workspace)),
        ),
        "edit" | "write" | "patch" => (
            ToolKind::Edit,
            str_field(&["filePath", "path"]).map(|p| relative_to(&p, workspace)),
        ),
        "skill" => (ToolKind::Skill, str_field(&["name", "skill"])),
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
    fn classifies_opencode_tools() {
        let ws = Path::new("/ws");
        assert_eq!(
            classify("bash", &json!({"command": "sh -c 'cargo test'"}), ws),
            (Some(ToolKind::Shell), Some("cargo test".into()))
        );
        assert_eq!(
            classify("read", &json!({"filePath": "/ws/src/lib.rs"}), ws),
            (Some(ToolKind::Read), Some("src/lib.rs".into()))
        );
        assert_eq!(
            classify("write", &json!({"filePath": "/ws/a.txt"}), ws),
            (Some(ToolKind::Edit), Some("a.txt".into()))
        );
        assert_eq!(
            classify("skill", &json!({"name": "pdf"}), ws),
            (Some(ToolKind::Skill), Some("pdf".into()))
        );
        assert_eq!(classify("todowrite", &json!({}), ws), (None, None));
    }
}
