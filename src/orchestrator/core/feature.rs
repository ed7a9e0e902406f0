//! The one small trait every converted feature implements (`features/<name>/feature.rs`), and
//! the read-only view it decides from. A feature owns its slice of scheduling state; the loop
//! calls it at fixed points (the dispatch pass's gates, the decision points of a tick or a
//! due retry, a session's exit, a workflow load, a publish) and applies the effects it
//! returns (`core/apply.rs`). Each method has a default, so a feature implements only what it
//! needs.

use crate::orchestrator::claim::dispatch_pass::Gate;
use crate::orchestrator::core::effect::Effect;
use crate::orchestrator::core::run_record::SupervisorResult;
use crate::orchestrator::core::snapshot::Snapshot;
use crate::orchestrator::core::state::{RunFacts, State};

/// What a feature may look at: the loop's state, read-only, and the loop's surroundings.
/// Writes are never made through it: a feature returns [`Effect`]s. The store is here for
/// reads a decision rests on (a spend window's recorded spend).
pub struct Cx<'a> {
    pub now_ms: i64,
    pub workflow: &'a crate::config::Workflow,
    pub state: &'a State,
    pub store: &'a crate::store::Store,
    /// The rates in force.
    pub prices: &'a crate::pricing::PriceBoard,
}

impl Cx<'_> {
    /// One poll interval: how long past its end a timed hold still stops poll-tick dispatch.
    pub fn poll_grace_ms(&self) -> i64 {
        i64::try_from(self.workflow.config.polling.interval_ms.max(1)).unwrap_or(i64::MAX)
    }

    /// The `model` of the workflow's agent block: the model new sessions are configured with
    /// (`None`: the runtime's default).
    pub fn configured_model(&self) -> Option<String> {
        let cfg = &self.workflow.config;
        cfg.adapter_block(&cfg.agent.kind)
            .and_then(|b| b.get("model"))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
    }
}

/// Which decision a gate is asked for: a poll tick's dispatch pass, or a due retry's check
/// (a timed hold gives a retry no grace past its end: the refused issue's own retry is due
/// then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    Tick,
    Retry,
}

/// A session that ended, as features see it before its run is recorded.
pub struct ExitView<'a> {
    pub facts: &'a RunFacts,
    pub result: &'a SupervisorResult,
}

/// A feature of the orchestrator: its gate in the dispatch pass, its reactions to the loop's
/// events, and its part of the published snapshot.
pub trait Feature {
    /// The holds this feature puts on the pass's candidates now (`None`: it holds nothing).
    /// The pass asks the features' gates in their declared order (`features::Features`),
    /// and the first hold an issue meets is its reason.
    fn gate(&self, _cx: &Cx<'_>, _pass: PassKind) -> Option<Gate> {
        None
    }

    /// Before each dispatch decision (a poll tick's pass, a due retry's check): bring what
    /// the gate rests on up to date.
    fn on_tick(&mut self, _cx: &Cx<'_>) -> Vec<Effect> {
        Vec::new()
    }

    /// A session ended (called before its run is recorded).
    fn on_exit(&mut self, _exit: &ExitView<'_>, _cx: &Cx<'_>) -> Vec<Effect> {
        Vec::new()
    }

    /// The workflow loaded with a change, or its file was written.
    fn on_reload(&mut self, _cx: &Cx<'_>) -> Vec<Effect> {
        Vec::new()
    }

    /// Its part of a snapshot rebuilt from the whole state.
    fn snapshot(&self, _snap: &mut Snapshot, _now_ms: i64) {}

    /// Its part of a snapshot that follows agent events (only what events change; everything
    /// else is shared with the previous snapshot).
    fn snapshot_running(&self, _snap: &mut Snapshot) {}
}
