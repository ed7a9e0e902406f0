//! Tool classification for the API's `tool_kind` / `tool_argument` members: which calls are
//! shell commands, file reads, edits or skill uses, and their one main argument.

use super::text::{controls_to_spaces, cut_chars};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The tool categories the API distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Shell,
    Read,
    Edit,
    Skill,
}

/// The longest served argument, in chars, before `…`.
const MAX_ARGUMENT_CHARS: usize = 999;

/// A tool call's display name: `mcp__server__tool` becomes `server.tool`.
pub fn display_tool_name(name: &str) -> String {
    if let Some(rest) = name.strip_prefix("mcp__")
        && let Some((server, tool)) = rest.split_once("__")
    {
        return format!("{server}.{tool}");
    }
    name.to_string()
}

/// Removes a `bash -lc` / `sh -c` / `zsh -c` wrapper (and its quotes) from a shell command.
pub fn strip_shell_wrapper(cmd: &str) -> String {
    let trimmed = cmd.trim();
    for prefix in [
        "bash -lc ",
        "bash -c ",
        "/bin/bash -lc ",
        "/bin/bash -c ",
        "sh -c ",
        "/bin/sh -c ",
        "zsh -c ",
        "zsh -lc ",
        "/bin/zsh -c ",
        "/bin/zsh -lc ",
    ] {
        if let Some(rest) = trimmed.strip_prefix(prefix) {
            let rest = rest.trim();
            for q in ['\'', '"'] {
                if rest.len() >= 2 && rest.starts_with(q) && rest.ends_with(q) {
                    return rest[1..rest.len() - 1].to_string();
                }
            }
            return rest.to_string();
        }
    }
    trimmed.to_string()
}

/// A path relative to the workspace when it lies inside it; otherwise unchanged.
pub fn relative_to(path: &str, workspace: &Path) -> String {
    match Path::new(path).strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => path.to_string(),
    }
}

/// Control characters become spaces; over 999 chars is cut with `…`.
pub fn clean_argument(arg: &str) -> String {
    cut_chars(&controls_to_spaces(arg), MAX_ARGUMENT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_cleaned_and_bounded() {
        let long = "a\tb".repeat(600);
        let out = clean_argument(&long);
        assert!(!out.contains('\t'));
        assert_eq!(out.chars().count(), 1000);
        assert!(out.ends_with('…'));
    }

    #[test]
    fn mcp_names_become_server_dot_tool() {
        assert_eq!(
            display_tool_name("mcp__github__get_issue"),
            "github.get_issue"
        );
        assert_eq!(display_tool_name("Read"), "Read");
    }
}
