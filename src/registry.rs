//! The adapter kinds this build runs: one list of descriptors per family (trackers, forges,
//! agents), each descriptor exported by its adapter module and carrying what the rest of the
//! daemon knows about the kind: its name, its contract test, and the family's facts (a
//! tracker's default states, the optional keys it reads, how it signs webhook deliveries).
//! Config (defaults, pass-through blocks, preflight), the orchestrator, the HTTP route and
//! metric labels for webhooks, `validate` and the CLI ask this module about kinds, so adding
//! an adapter means writing its module, one line here and one contract instantiation.
//!
//! It sits above `tracker`, `scm` and `agent` (it names their adapter modules) and below `config`
//! (which consults it while loading a workflow).

use std::sync::Arc;

use crate::agent::{
    self, AdapterCaps, AgentAdapter, AgentDescriptor, AgentError, AgentErrorKind, AgentSettings,
};
use crate::clock::{Clock, SystemClock};
use crate::domain::contract::Contract;
use crate::scm::{self, ScmAdapter, ScmDescriptor, ScmError, ScmErrorKind, ScmSettings};
pub use crate::tracker::DefaultStates;
use crate::tracker::webhook::{Signature, WebhookScheme};
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

/// What every family's descriptor tells the registry, so lookups, "not supported" messages
/// and the contract checks are written once.
pub trait Descriptor: 'static {
    /// How messages name a member of the family (`tracker kind`).
    const FAMILY: &'static str;
    /// The name the workflow writes.
    fn kind(&self) -> &'static str;
    /// Where the kind's contract tests run.
    fn contract(&self) -> Contract;
}

impl Descriptor for TrackerDescriptor {
    const FAMILY: &'static str = "tracker kind";
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn contract(&self) -> Contract {
        self.contract
    }
}

impl Descriptor for AgentDescriptor {
    const FAMILY: &'static str = "agent kind";
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn contract(&self) -> Contract {
        self.contract
    }
}

impl Descriptor for ScmDescriptor {
    const FAMILY: &'static str = "source control provider";
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn contract(&self) -> Contract {
        self.contract
    }
}

/// The descriptor named `kind` in a family's list.
pub fn find<D: Descriptor>(list: &'static [D], kind: &str) -> Option<&'static D> {
    list.iter().find(|d| d.kind() == kind)
}

/// Why `kind` cannot be used, naming the family's kinds that can.
pub fn unsupported<D: Descriptor>(list: &[D], kind: &str) -> String {
    let supported: Vec<&str> = list.iter().map(Descriptor::kind).collect();
    format!(
        "{} {kind:?} is not supported by this build (supported: {})",
        D::FAMILY,
        supported.join(", ")
    )
}

/// The descriptor of a tracker kind; `None` when this build has no such adapter.
pub fn tracker(kind: &str) -> Option<&'static TrackerDescriptor> {
    find(TRACKERS, kind)
}

/// The descriptor of a source control provider; `None` when this build has no such adapter.
pub fn scm(kind: &str) -> Option<&'static ScmDescriptor> {
    find(SCMS, kind)
}

/// The descriptor of an agent kind; `None` when this build has no such adapter.
pub fn agent(kind: &str) -> Option<&'static AgentDescriptor> {
    find(AGENTS, kind)
}

/// Why a source control provider cannot be used, naming the ones that can.
pub fn unsupported_scm(kind: &str) -> String {
    unsupported(SCMS, kind)
}

/// Why a tracker kind cannot be used, naming the kinds that can.
pub fn unsupported_tracker(kind: &str) -> String {
    unsupported(TRACKERS, kind)
}

/// Why an agent kind cannot be used, naming the kinds that can.
pub fn unsupported_agent(kind: &str) -> String {
    unsupported(AGENTS, kind)
}

/// Builds the forge adapter named by `settings.kind`: [`ScmErrorKind::Unsupported`] for a
/// provider this build lacks, [`ScmErrorKind::Settings`] for settings it cannot be built from.
pub fn build_scm(
    settings: &ScmSettings,
    clock: Arc<dyn Clock>,
) -> Result<Box<dyn ScmAdapter>, ScmError> {
    match scm(&settings.kind) {
        Some(d) => (d.build)(settings, clock),
        None => Err(ScmError {
            kind: ScmErrorKind::Unsupported,
            message: unsupported_scm(&settings.kind),
        }),
    }
}

/// Whether tracker kind `kind` reads the optional `tracker.<key>` (`api_version`,
/// `user_agent`), so configuration can warn about one written for a kind that ignores it.
pub fn tracker_reads_key(kind: &str, key: &str) -> bool {
    tracker(kind).is_some_and(|d| d.reads_keys.contains(&key))
}

/// Every optional kind-specific `tracker.<key>` some registered kind reads (the descriptors'
/// `reads_keys`), once each in registry order: the keys configuration accepts under `tracker`
/// beside the common ones.
pub fn tracker_kind_keys() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for key in TRACKERS.iter().flat_map(|d| d.reads_keys) {
        if !out.contains(key) {
            out.push(key);
        }
    }
    out
}

/// A kind's default states, so the orchestrator's dispatch and cleanup rules see the same
/// lists as the adapter; `None` for kinds without defaults.
pub fn default_tracker_states(kind: &str) -> Option<DefaultStates> {
    tracker(kind).and_then(|d| d.default_states)
}

/// Caps of an agent kind by name, without building an adapter; `None` for an unregistered kind.
pub fn caps_for_kind(kind: &str) -> Option<AdapterCaps> {
    agent(kind).map(|d| d.caps)
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

/// A tracker kind that accepts webhook deliveries, with its signing scheme.
#[derive(Debug, Clone, Copy)]
pub struct Webhook {
    /// The tracker kind; the path segment of `POST /api/v1/webhooks/<kind>`.
    pub kind: &'static str,
    pub scheme: WebhookScheme,
}

/// Every kind whose webhook deliveries the HTTP route accepts, in [`TRACKERS`] order.
pub const WEBHOOKS: &[Webhook] = &WEBHOOK_TABLE;

/// [`WEBHOOKS`]' kinds: the `kind` label values of the webhook metrics.
pub const WEBHOOK_KINDS: &[&str] = &WEBHOOK_KIND_TABLE;

const WEBHOOK_COUNT: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < TRACKERS.len() {
        if TRACKERS[i].webhook.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
};

const WEBHOOK_TABLE: [Webhook; WEBHOOK_COUNT] = {
    const NONE: Webhook = Webhook {
        kind: "",
        scheme: WebhookScheme {
            signature_header: "",
            signature: Signature::Token,
            delivery_header: "",
            event_header: "",
            timestamp: None,
            issue: |_| None,
        },
    };
    let mut out = [NONE; WEBHOOK_COUNT];
    let (mut i, mut n) = (0, 0);
    while i < TRACKERS.len() {
        if let Some(scheme) = TRACKERS[i].webhook {
            out[n] = Webhook {
                kind: TRACKERS[i].kind,
                scheme,
            };
            n += 1;
        }
        i += 1;
    }
    out
};

const WEBHOOK_KIND_TABLE: [&str; WEBHOOK_COUNT] = {
    let mut out = [""; WEBHOOK_COUNT];
    let mut i = 0;
    while i < WEBHOOK_COUNT {
        out[i] = WEBHOOK_TABLE[i].kind;
        i += 1;
    }
    out
};

/// The webhook kind named by a path segment; `None` for a kind without webhooks.
pub fn webhook(kind: &str) -> Option<&'static Webhook> {
    WEBHOOKS.iter().find(|w| w.kind == kind)
}

/// The webhook kinds as prose: `a, b or c`.
pub fn webhook_kinds_text() -> String {
    match WEBHOOK_KINDS.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
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
        assert_eq!(e.as_ref().map(|e| e.kind), Some(ScmErrorKind::Unsupported));
        assert_eq!(e.map(|e| e.message), Some(unsupported_scm("bitbucket")));
        let no_token = build_scm(&settings("github", " "), Arc::new(SystemClock)).err();
        assert_eq!(
            no_token.as_ref().map(|e| e.kind),
            Some(ScmErrorKind::Settings)
        );
        assert!(no_token.is_some_and(|e| e.message.contains("api_key")));
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
