//! Live reload of WORKFLOW.md: a new workflow applies only when both its front matter and its
//! prompt template load; otherwise the last good one stays in effect.

use std::path::Path;

use crate::config::{LoadOptions, Workflow};
use crate::prompt::PromptTemplate;

/// Loads the workflow and parses its template; both must succeed for a reload to apply.
pub fn reload(path: &Path, opts: &LoadOptions) -> Result<(Workflow, PromptTemplate), String> {
    let wf = crate::config::load_workflow(path, opts).map_err(|e| e.to_string())?;
    let t = PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    )
    .map_err(|e| e.to_string())?;
    Ok((wf, t))
}
