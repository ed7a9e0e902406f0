//! Glue from a loaded workflow to the adapters: the tracker and agent its kinds name (built
//! through `crate::registry`) and the workspace manager.

use std::sync::Arc;

use crate::agent::{AgentAdapter, AgentError, AgentSettings};
use crate::clock::Clock;
use crate::config::Workflow;
use crate::registry;
use crate::tracker::{TrackerAdapter, TrackerError};
use crate::workspace::{HookScripts, WorkspaceManager};

/// Builds the tracker adapter named by `tracker.kind`.
pub fn build_tracker(
    workflow: &Workflow,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn TrackerAdapter>, TrackerError> {
    registry::build_tracker(&workflow.config.tracker_settings(), clock)
}

/// The adapter settings for `agent.kind` and its pass-through block; relative paths in the
/// block resolve against the workflow file's directory.
pub fn agent_settings(workflow: &Workflow) -> AgentSettings {
    let dir = workflow
        .path
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    workflow.config.agent_settings(&dir)
}

/// Builds the agent adapter named by `agent.kind`.
pub fn build_agent(
    workflow: &Workflow,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn AgentAdapter>, AgentError> {
    registry::adapter_for_with_clock(&agent_settings(workflow), clock)
}

/// The workspace manager for the workflow's root and hooks.
pub fn workspace_manager(workflow: &Workflow) -> WorkspaceManager {
    let cfg = &workflow.config;
    WorkspaceManager::new(
        cfg.workspace.root.clone(),
        HookScripts {
            // With worker.kubernetes the hook prepares the pod's workspace (an init container).
            after_create: cfg
                .hooks
                .after_create
                .clone()
                .filter(|_| cfg.worker.kubernetes.is_none()),
            before_run: cfg.hooks.before_run.clone(),
            after_run: cfg.hooks.after_run.clone(),
            before_remove: cfg.hooks.before_remove.clone(),
            timeout_ms: cfg.hooks.timeout_ms,
        },
    )
    .with_sandbox(
        (cfg.worker.sandbox.enabled() && cfg.worker.sandbox.hooks)
            .then(|| Arc::new(cfg.worker.sandbox.clone())),
    )
    .with_also_remove(workspace_claim_removal(cfg))
}

/// With `worker.kubernetes.workspace: pvc`, a removed workspace's claim goes with it (on the
/// thread that removes the workspace, waiting for the Jobs still using the claim).
fn workspace_claim_removal(
    cfg: &crate::config::ServiceConfig,
) -> Option<crate::workspace::AlsoRemove> {
    let k = cfg.worker.kubernetes.as_ref()?;
    if k.settings.workspace != crate::kube::WorkspaceVolume::Pvc {
        return None;
    }
    let settings = k.settings.clone();
    Some(crate::workspace::AlsoRemove(Arc::new(
        move |issue_id: &str, key: &str| match crate::kube::claims::remove(&settings, key) {
            Ok(true) => log::info!(
                issue_id:% = issue_id,
                issue_identifier:% = key,
                namespace:% = settings.namespace;
                "workspace claim deleted"
            ),
            Ok(false) => {}
            Err(e) => log::warn!(
                issue_id:% = issue_id,
                issue_identifier:% = key,
                namespace:% = settings.namespace,
                error:% = e.to_string();
                "workspace claim not deleted"
            ),
        },
    )))
}

/// Builds the forge adapter reactions use, when a provider applies. A provider that cannot be
/// built (validation normally catches it) is logged, and no reaction runs.
pub fn build_scm(
    workflow: &Workflow,
    clock: Arc<dyn Clock>,
) -> Option<Arc<dyn crate::scm::ScmAdapter>> {
    let settings = workflow.config.scm_settings()?;
    match registry::build_scm(&settings, clock) {
        Ok(scm) => Some(Arc::from(scm)),
        Err(e) => {
            log::error!(error:% = e; "pull request reactions are off");
            None
        }
    }
}
