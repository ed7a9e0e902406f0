//! Checks over the `opencode:` block: each key's type, and tool scoping that names a tool as
//! both allowed and denied (which would leave OpenCode's permission ambiguous).

use super::argv::{BOOL_KEYS, LIST_KEYS, STRING_KEYS, permission_json};
use crate::agent::{AgentSettings, SettingProblem};
use serde_json::Value;

/// Every problem with the block; empty when the kind can run.
pub fn problems(settings: &AgentSettings) -> Vec<SettingProblem> {
    let block = &settings.block;
    let mut out = Vec::new();
    let field = |key: &str| format!("opencode.{key}");
    for key in STRING_KEYS {
        if let Some(v) = block.get(*key)
            && !v.is_string()
            && !v.is_null()
        {
            out.push(SettingProblem::new(
                field(key),
                format!("must be a string, got {}", type_name(v)),
            ));
        }
    }
    for key in BOOL_KEYS {
        if let Some(v) = block.get(*key)
            && !v.is_boolean()
            && !v.is_null()
        {
            out.push(SettingProblem::new(
                field(key),
                format!("must be true or false, got {}", type_name(v)),
            ));
        }
    }
    for key in LIST_KEYS {
        match block.get(*key) {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Array(items)) => {
                if let Some(bad) = items.iter().find(|i| !i.is_string()) {
                    out.push(SettingProblem::new(
                        field(key),
                        format!("must list tool names, got {}", type_name(bad)),
                    ));
                }
            }
            Some(v) => out.push(SettingProblem::new(
                field(key),
                format!("must be a list of tool names, got {}", type_name(v)),
            )),
        }
    }
    if let Err(problem) = permission_json(block) {
        out.push(problem);
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
