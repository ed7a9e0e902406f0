//! Live reload of WORKFLOW.md: a new workflow applies only when both its front matter and its
//! prompt template load; otherwise the last good one stays in effect.

use std::path::Path;

use crate::config::{LoadOptions, Workflow};
use crate::prompt::PromptTemplate;

/// Why a reload did not apply. The text is the loader's own (the API serves it as the
/// workflow check's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The front matter or the file itself did not load.
    Workflow(String),
    /// The prompt template did not parse.
    Template(String),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::Workflow(e) | ReloadError::Template(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for ReloadError {}

/// Loads the workflow and parses its template; both must succeed for a reload to apply.
pub fn reload(path: &Path, opts: &LoadOptions) -> Result<(Workflow, PromptTemplate), ReloadError> {
    let wf = crate::config::load_workflow(path, opts)
        .map_err(|e| ReloadError::Workflow(e.to_string()))?;
    let t = PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    )
    .map_err(|e| ReloadError::Template(e.to_string()))?;
    Ok((wf, t))
}
