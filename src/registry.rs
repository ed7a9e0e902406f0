//! The adapter kinds this build runs: one list of tracker descriptors and one of agent
//! descriptors, each exported by its adapter module. Config (defaults, pass-through blocks,
//! preflight), the orchestrator, `validate` and the CLI ask this module about kinds, so adding
//! an adapter means writing its module and one line here.
//!
//! It sits above `tracker`, `scm` and `agent` (it names their adapter modules) and below `config`
//! (which consults it while loading a workflow).

use std::sync::Arc;

use crate::agent::{
    self, AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentSettings,
};
use crate::clock::{Clock, SystemClock};
use crate::scm::{self, ScmAdapter, ScmDescriptor, ScmSettings};
use crate::tracker::{
    self, TrackerAdapter, TrackerDescriptor, TrackerError, TrackerErrorKind, TrackerSettings,
};

/// Every tracker kind this build can run.
pub const TRACKERS: &[TrackerDescriptor] = &[
    tracker::file::DESCRIPTOR,
    tracker::gitea::DESCRIPTOR,
    tracker::github::DESCRIPTOR,
    tracker::gitlab::DESCRIPTOR,
    tracker::jira::DESCRIPTOR,
    tracker::linear::DESCRIPTOR,
];

/// Every agent kind this build can run.
pub const AGENTS: &[AgentDescriptor] = &[
    agent::acp::DESCRIPTOR,
    agent::claude::DESCRIPTOR,
    agent::codex::DESCRIPTOR,
    agent::copilot::DESCRIPTOR,
    agent::acp::kiro::DESCRIPTOR,
    agent::mock::DESCRIPTOR,
    agent::opencode::DESCRIPTOR,
];

/// Every source control (forge) provider this build can run pull-request reactions on.
pub const SCMS: &[ScmDescriptor] = &[
    scm::gitea::DESCRIPTOR,
    scm::github::DESCRIPTOR,
    scm::gitlab::DESCRIPTOR,
];

/// `agent.kind` when the workflow names none.
pub const DEFAULT_AGENT_KIND: &str = agent::claude::KIND;

/// The descriptor of a tracker kind; `None` when this build has no such adapter.
pub fn tracker(kind: &str) -> Option<&'static TrackerDescriptor> {
    TRACKERS.iter().find(|d| d.kind == kind)
}

/// The descriptor of a source control provider; `None` when this build has no such adapter.
pub fn scm(kind: &str) -> Option<&'static ScmDescriptor> {
    SCMS.iter().find(|d| d.kind == kind)
}

/// Why a source control provider cannot be used, naming the ones that can.
pub fn unsupported_scm(kind: &str) -> String {
    format!(
        "source control provider {kind:?} is not supported by this build (supported: {})",
        supported(SCMS.iter().map(|d| d.kind))
    )
}

/// Builds the forge adapter named by `settings.kind`.
pub fn build_scm(
    settings: &ScmSettings,
    clock: Arc<dyn Clock>,
) -> Result<Box<dyn ScmAdapter>, String> {
    match scm(&settings.kind) {
        Some(d) => (d.build)(settings, clock),
        None => Err(unsupported_scm(&settings.kind)),
    }
}

/// The states a tracker kind assumes when the workflow sets none.
#[derive(Debug, Clone, Copy)]
pub struct DefaultStates {
    pub active: &'static [&'static str],
    pub terminal: &'static [&'static str],
}

/// Whether tracker kind `kind` reads the optional `tracker.<key>` (`api_version`,
/// `user_agent`), so configuration can warn about one written for a kind that ignores it.
pub fn tracker_reads_key(kind: &str, key: &str) -> bool {
    kind == tracker::jira::KIND && matches!(key, "api_version" | "user_agent")
}

/// A kind's default states, so the orchestrator's dispatch and cleanup rules see the same
/// lists as the adapter; `None` for kinds without defaults.
pub fn default_tracker_states(kind: &str) -> Option<DefaultStates> {
    match kind {
        tracker::github::KIND => Some(DefaultStates {
            active: tracker::github::DEFAULT_ACTIVE,
            terminal: tracker::github::DEFAULT_TERMINAL,
        }),
        tracker::gitlab::KIND => Some(DefaultStates {
            active: tracker::gitlab::DEFAULT_ACTIVE,
            terminal: tracker::gitlab::DEFAULT_TERMINAL,
        }),
        tracker::gitea::KIND => Some(DefaultStates {
            active: tracker::gitea::DEFAULT_ACTIVE,
            terminal: tracker::gitea::DEFAULT_TERMINAL,
        }),
        tracker::jira::KIND => Some(DefaultStates {
            active: tracker::jira::DEFAULT_ACTIVE,
            terminal: &[],
        }),
        tracker::linear::KIND => Some(DefaultStates {
            active: tracker::linear::DEFAULT_ACTIVE,
            terminal: tracker::linear::DEFAULT_TERMINAL,
        }),
        _ => None,
    }
}

/// The descriptor of an agent kind; `None` when this build has no such adapter.
pub fn agent(kind: &str) -> Option<&'static AgentDescriptor> {
    AGENTS.iter().find(|d| d.kind == kind)
}

/// Caps of an agent kind by name, without building an adapter; `None` for an unregistered kind.
pub fn caps_for_kind(kind: &str) -> Option<AdapterCaps> {
    agent(kind).map(|d| d.caps)
}

fn supported<'a>(kinds: impl Iterator<Item = &'a str>) -> String {
    kinds.collect::<Vec<_>>().join(", ")
}

/// Why a tracker kind cannot be used, naming the kinds that can.
pub fn unsupported_tracker(kind: &str) -> String {
    format!(
        "tracker kind {kind:?} is not supported by this build (supported: {})",
        supported(TRACKERS.iter().map(|d| d.kind))
    )
}

/// Why an agent kind cannot be used, naming the kinds that can.
pub fn unsupported_agent(kind: &str) -> String {
    format!(
        "agent kind {kind:?} is not supported by this build (supported: {})",
        supported(AGENTS.iter().map(|d| d.kind))
    )
}

/// Builds the tracker adapter named by `settings.kind`.
pub fn build_tracker(
    settings: &TrackerSettings,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn TrackerAdapter>, TrackerError> {
    match tracker(&settings.kind) {
        // Every kind's calls run under one read budget each (`tracker::bounded`).
        Some(d) => (d.build)(settings, clock).map(|t| crate::tracker::bounded::wrap(t, settings)),
        None => Err(TrackerError::new(
            TrackerErrorKind::UnsupportedTrackerKind,
            &settings.kind,
            unsupported_tracker(&settings.kind),
        )),
    }
}

/// The agent adapter for a configured kind, on the system clock.
pub fn adapter_for(settings: &AgentSettings) -> Result<Arc<dyn AgentAdapter>, AgentError> {
    adapter_for_with_clock(settings, Arc::new(SystemClock))
}

/// The agent adapter for a configured kind, with event timestamps from `clock`.
pub fn adapter_for_with_clock(
    settings: &AgentSettings,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn AgentAdapter>, AgentError> {
    let kind = settings.kind.as_str();
    if let Some(d) = agent(kind) {
        return (d.build)(settings, clock);
    }
    Err(AgentError::new(
        AgentErrorKind::AgentNotFound,
        unsupported_agent(kind),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_unique_and_the_default_is_registered() {
        let mut trackers: Vec<_> = TRACKERS.iter().map(|d| d.kind).collect();
        trackers.sort_unstable();
        trackers.dedup();
        assert_eq!(trackers.len(), TRACKERS.len());
        let mut agents: Vec<_> = AGENTS.iter().map(|d| d.kind).collect();
        agents.sort_unstable();
        agents.dedup();
        assert_eq!(agents.len(), AGENTS.len());
        assert!(agent(DEFAULT_AGENT_KIND).is_some());
        let mut scms: Vec<_> = SCMS.iter().map(|d| d.kind).collect();
        scms.dedup();
        assert_eq!(scms.len(), SCMS.len());
    }

    #[test]
    fn source_control_providers_are_looked_up_by_kind() {
        assert_eq!(
            unsupported_scm("bitbucket"),
            "source control provider \"bitbucket\" is not supported by this build (supported: gitea, github, gitlab)"
        );
        let settings = |kind: &str, token: &str| ScmSettings {
            kind: kind.into(),
            token: token.into(),
            ..ScmSettings::default()
        };
        let e = build_scm(&settings("bitbucket", "t"), Arc::new(SystemClock)).err();
        assert_eq!(e, Some(unsupported_scm("bitbucket")));
        let no_token = build_scm(&settings("github", " "), Arc::new(SystemClock)).err();
        assert!(no_token.is_some_and(|e| e.contains("api_key")));
        let built = build_scm(&settings("github", "reg-test-token"), Arc::new(SystemClock));
        assert_eq!(built.map(|a| a.kind()).ok(), Some("github"));
    }

    #[test]
    fn unknown_kinds_name_the_supported_ones() {
        assert_eq!(
            unsupported_tracker("redmine"),
            "tracker kind \"redmine\" is not supported by this build (supported: file, gitea, github, gitlab, jira, linear)"
        );
        assert_eq!(
            unsupported_agent("aider"),
            "agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)"
        );
        let e = build_tracker(
            &TrackerSettings {
                kind: "redmine".into(),
                ..TrackerSettings::default()
            },
            Arc::new(SystemClock),
        )
        .err()
        .map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::UnsupportedTrackerKind));
    }
}
