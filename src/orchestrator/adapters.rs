//! Glue from the typed configuration to the adapters: which tracker, which agent, which
//! workspace manager. The only place that maps config structs onto adapter inputs.

use std::sync::Arc;

use crate::agent::{AgentAdapter, AgentError, AgentSettings};
use crate::clock::Clock;
use crate::config::Workflow;
use crate::tracker::{TrackerAdapter, TrackerError, TrackerErrorKind};
use crate::workspace::{HookScripts, WorkspaceManager};

/// Builds the tracker adapter named by `tracker.kind`.
pub fn build_tracker(
    workflow: &Workflow,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn TrackerAdapter>, TrackerError> {
    let cfg = &workflow.config;
    match cfg.tracker.kind.as_str() {
        "file" => {
            let path = cfg.file_tracker_path().ok_or_else(|| {
                TrackerError::new(
                    TrackerErrorKind::Payload,
                    "file",
                    "missing required config key: path",
                )
            })?;
            Ok(Arc::new(crate::tracker::file::FileTracker::new(
                path.to_path_buf(),
                cfg.tracker.active_states.clone(),
                clock,
            )))
        }
        other => Err(TrackerError::new(
            TrackerErrorKind::UnsupportedTrackerKind,
            other,
            format!("tracker kind {other:?} is not supported by this build (supported: file)"),
        )),
    }
}

/// The adapter settings for `agent.kind` and its pass-through block.
pub fn agent_settings(workflow: &Workflow) -> AgentSettings {
    let cfg = &workflow.config;
    AgentSettings {
        kind: cfg.agent.kind.clone(),
        command: cfg.agent.command.clone(),
        turn_timeout_ms: cfg.agent.turn_timeout_ms,
        read_timeout_ms: cfg.agent.read_timeout_ms,
        block: cfg
            .adapter_block(&cfg.agent.kind)
            .cloned()
            .unwrap_or_default(),
        workflow_dir: workflow
            .path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default(),
    }
}

/// Builds the agent adapter named by `agent.kind`.
pub fn build_agent(
    workflow: &Workflow,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn AgentAdapter>, AgentError> {
    crate::agent::adapter_for_with_clock(&agent_settings(workflow), clock)
}

/// The workspace manager for the workflow's root and hooks.
pub fn workspace_manager(workflow: &Workflow) -> WorkspaceManager {
    let cfg = &workflow.config;
    WorkspaceManager::new(
        cfg.workspace.root.clone(),
        HookScripts {
            after_create: cfg.hooks.after_create.clone(),
            before_run: cfg.hooks.before_run.clone(),
            after_run: cfg.hooks.after_run.clone(),
            before_remove: cfg.hooks.before_remove.clone(),
            timeout_ms: cfg.hooks.timeout_ms,
        },
    )
}
