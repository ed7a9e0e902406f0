//! Errors of parsing and rendering prompt templates, with the line in WORKFLOW.md they point at.

/// A template error; `line` is a line of the workflow file (template line + front matter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// Bad syntax or an unknown function: the workflow cannot be loaded.
    Parse {
        path: String,
        line: Option<usize>,
        message: String,
    },
    /// Missing key, field of nil or a function error: this attempt fails.
    Render {
        path: String,
        line: Option<usize>,
        message: String,
    },
}

impl std::fmt::Display for PromptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, path, line, message) = match self {
            PromptError::Parse {
                path,
                line,
                message,
            } => ("parse", path, line, message),
            PromptError::Render {
                path,
                line,
                message,
            } => ("render", path, line, message),
        };
        match line {
            Some(n) => write!(f, "template {kind} error in {path} (line {n}): {message}"),
            None => write!(f, "template {kind} error in {path}: {message}"),
        }
    }
}

impl std::error::Error for PromptError {}
