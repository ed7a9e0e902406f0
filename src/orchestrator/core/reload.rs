//! Live reload of WORKFLOW.md: a new workflow applies only when its front matter and its
//! prompt template load and, when tracker or agent settings changed, their adapters build;
//! otherwise the last good one stays in effect. Running sessions keep the adapters they were
//! dispatched with; new dispatches get the rebuilt ones.

use std::path::Path;
use std::sync::Arc;

use crate::agent::AgentAdapter;
use crate::clock::Clock;
use crate::config::{LoadOptions, Workflow};
use crate::prompt::PromptTemplate;
use crate::tracker::TrackerAdapter;

/// Why a reload did not apply. The text is the loader's own (the API serves it as the
/// workflow check's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The front matter or the file itself did not load.
    Workflow(String),
    /// The prompt template did not parse or does not render for the representative issue.
    Template(String),
    /// The tracker or agent adapter of the new settings could not be built.
    Adapter(String),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::Workflow(e) | ReloadError::Template(e) | ReloadError::Adapter(e) => {
                f.write_str(e)
            }
        }
    }
}

impl std::error::Error for ReloadError {}

/// Loads the workflow, parses its template and renders it against the representative issue;
/// all must succeed for a reload to apply.
pub fn reload(path: &Path, opts: &LoadOptions) -> Result<(Workflow, PromptTemplate), ReloadError> {
    let wf = crate::config::load_workflow(path, opts)
        .map_err(|e| ReloadError::Workflow(e.to_string()))?;
    let t = PromptTemplate::parse(
        &wf.prompt_template,
        &wf.path.display().to_string(),
        wf.prompt_line_offset,
    )
    .map_err(|e| ReloadError::Template(e.to_string()))?;
    // As at startup (`sortie validate`): a prompt that fails on the representative issue
    // (a misspelled key) would fail every dispatch, so it does not replace the last good one.
    t.check_render()
        .map_err(|e| ReloadError::Template(e.to_string()))?;
    Ok((wf, t))
}

/// Adapters rebuilt for a reloaded workflow; `None` where the settings did not change.
#[derive(Default)]
pub struct RebuiltAdapters {
    pub tracker: Option<Arc<dyn TrackerAdapter>>,
    pub agent: Option<Arc<dyn AgentAdapter>>,
}

/// Builds, through the registry, the tracker and agent adapters of `new` whose settings differ
/// from `old`'s. Either failing refuses the whole reload.
pub fn rebuild_adapters(
    old: &Workflow,
    new: &Workflow,
    clock: Arc<dyn Clock>,
) -> Result<RebuiltAdapters, ReloadError> {
    let mut out = RebuiltAdapters::default();
    if new.config.tracker_settings() != old.config.tracker_settings() {
        let t = super::adapters::build_tracker(new, clock.clone())
            .map_err(|e| ReloadError::Adapter(format!("tracker: {e}")))?;
        out.tracker = Some(t);
    }
    if super::adapters::agent_settings(new) != super::adapters::agent_settings(old) {
        let a = super::adapters::build_agent(new, clock)
            .map_err(|e| ReloadError::Adapter(format!("agent: {e}")))?;
        out.agent = Some(a);
    }
    Ok(out)
}
