//! Errors and advisory warnings produced while loading a workflow file.

use std::fmt;
use std::path::PathBuf;

/// Why a workflow could not be loaded. The `Display` texts are kept stable (and compatible
/// with Go Sortie's wording) because operators, scripts and tests match on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The workflow file could not be read.
    MissingFile { path: PathBuf, reason: String },
    /// The workflow file exists but cannot be used: permission denied, not a regular file,
    /// too large, or not decodable as text. `reason` names which.
    Unreadable { path: PathBuf, reason: String },
    /// The file has no front matter (its first line is not `---`) and the settings it would
    /// need are missing; `reason` says what the first lines look like.
    NoFrontMatter { path: PathBuf, reason: String },
    /// The front matter is not valid YAML. `message` already carries line numbers counted
    /// in WORKFLOW.md (the front-matter offset is added).
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// The front matter decoded to something other than a map.
    /// `line` is the file line where the non-map value starts.
    FrontMatterNotMap {
        path: PathBuf,
        got: String,
        line: usize,
    },
    /// A typed field is invalid: `config: <field>: <message>`.
    Field { field: String, message: String },
    /// A typed field is invalid and the fault has a check name of its own (for example
    /// `unreachable_rules`): renders like [`ConfigError::Field`].
    Checked {
        check: &'static str,
        field: String,
        message: String,
    },
    /// Both state lists are empty (the promotion cross-rule).
    NoStates,
}

impl ConfigError {
    pub(crate) fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Field {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The check name `sortie validate` reports this error under: `workflow_load`,
    /// `workflow_front_matter` or `config.<field>`.
    pub fn check(&self) -> String {
        match self {
            ConfigError::MissingFile { .. } | ConfigError::Unreadable { .. } => {
                "workflow_load".to_string()
            }
            ConfigError::Parse { .. }
            | ConfigError::FrontMatterNotMap { .. }
            | ConfigError::NoFrontMatter { .. } => "workflow_front_matter".to_string(),
            ConfigError::Field { field, .. } => format!("config.{field}"),
            ConfigError::Checked { check, .. } => check.to_string(),
            ConfigError::NoStates => "config.tracker.active_states".to_string(),
        }
    }
}

impl ConfigError {
    /// The message without what [`Self::check`] already names: a field error's message alone
    /// (its check is `config.<field>`), a checked error's field and message, any other error
    /// in full. `sortie validate` prints it after the check, so each fact appears once.
    pub fn detail(&self) -> String {
        match self {
            ConfigError::Field { message, .. } => message.clone(),
            ConfigError::Checked { field, message, .. } => format!("{field}: {message}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::MissingFile { path, reason } => {
                write!(f, "workflow file not found: {}: {reason}", path.display())
            }
            ConfigError::Unreadable { path, reason } => {
                write!(f, "cannot read workflow file {}: {reason}", path.display())
            }
            ConfigError::NoFrontMatter { path, reason } => write!(
                f,
                "no front matter found in {}: {reason}",
                path.display()
            ),
            ConfigError::Parse { path, message, .. } => write!(
                f,
                "failed to parse YAML front matter in {} (did you forget the closing '---' delimiter?): {message}",
                path.display()
            ),
            ConfigError::FrontMatterNotMap { path, got, line } => write!(
                f,
                "workflow front matter in {} must be a YAML map: got {got} (line {line})",
                path.display()
            ),
            ConfigError::Field { field, message } | ConfigError::Checked { field, message, .. } => {
                write!(f, "config: {field}: {message}")
            }
            ConfigError::NoStates => f.write_str(
                "tracker.active_states and tracker.terminal_states are both empty; at least one must be configured",
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// An advisory finding that never blocks loading (`sortie validate` prints them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// Check id: `unknown_key`, `unsupported_key` (accepted, not acted on by this build),
    /// `type_mismatch`, `invalid_value`, `dotenv_missing`, `clamped`, `data_path_from_cwd`,
    /// `deprecated_key` (`ci_feedback`), `reactions_ignored` (no block names a provider).
    pub check: String,
    /// Dotted field (or top-level key) the warning is about.
    pub field: String,
    pub message: String,
}

impl ConfigWarning {
    pub(crate) fn new(check: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigWarning {
            check: check.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "warning: {}: {}: {}",
            self.check, self.field, self.message
        )
    }
}

/// One failed check of dispatch preflight: a setting the configured adapters need, or a kind
/// this build does not run. Blocks dispatch (and startup), unlike a [`ConfigWarning`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightProblem {
    /// Check id, as `sortie validate` prints it: `config.<field>` for a missing or wrong
    /// setting, `tracker_adapter` / `agent_adapter` for an unsupported kind.
    pub check: String,
    pub message: String,
}

impl PreflightProblem {
    pub(crate) fn new(check: impl Into<String>, message: impl Into<String>) -> Self {
        PreflightProblem {
            check: check.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for PreflightProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
