//! The tracker calls an exit step makes (a park's label and state read, a declaration's write,
//! the state read that decides a hand-off, a stage hop's labels), made on a `work` thread
//! while the issue stays claimed as `settling`, then applied on `orch`
//! ([`Orchestrator::settle_exit`]).

use crate::orchestrator::claim::exit_step::{ContinueStep, ExitStep, decide_continue};
use crate::orchestrator::core::orchestrator::*;
use crate::orchestrator::features::stages::hop::{HopPlan, HopWrite};
use crate::tracker::TrackerResult;

/// The calls of one exit step, decided on `orch`.
#[derive(Debug, Clone)]
pub(crate) enum ExitCalls {
    /// A park: the label, then the issue's state now (what the park holds against).
    Park { label: String },
    /// A declaration. With `hop` (a `no-change-needed` run whose rule has a next stage) the
    /// state is read and an issue still active hops; without a hop made, `state` is written.
    Declared {
        state: Option<String>,
        hop: Option<HopPlan>,
    },
    /// No declaration: the state is read and [`decide_continue`] picks release, hand-off (the
    /// stage hop, else the handoff write) or continuation.
    Continue { hop: Option<HopPlan> },
}

/// What the calls answered.
#[derive(Debug)]
pub(crate) enum ExitAnswers {
    Park {
        label: TrackerResult<()>,
        /// The issue's state; `Err` with why when it could not be read.
        state: Result<String, StateUnread>,
    },
    Declared {
        hop: Option<HopWrite>,
        transition: Option<TrackerResult<()>>,
    },
    Continue {
        step: ContinueStep,
        hop: Option<HopWrite>,
        transition: Option<TrackerResult<()>>,
    },
}

/// Why the issue's state after an exit is not known.
#[derive(Debug)]
pub(crate) enum StateUnread {
    /// The tracker does not list the issue.
    NotFound,
    /// The read failed.
    Read(crate::tracker::TrackerError),
    /// The exit's calls could not be made; says why.
    NotMade(String),
}

impl std::fmt::Display for StateUnread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateUnread::NotFound => f.write_str("not found in the tracker"),
            StateUnread::Read(e) => write!(f, "{e}"),
            StateUnread::NotMade(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for StateUnread {}

/// The issue's state now; `Err` says why it is not known.
fn state_now(tracker: &dyn TrackerAdapter, issue: &Issue) -> Result<String, StateUnread> {
    match tracker.fetch_issue_states_by_ids(std::slice::from_ref(&issue.id)) {
        Ok(states) => states.get(&issue.id).cloned().ok_or(StateUnread::NotFound),
        Err(e) => Err(StateUnread::Read(e)),
    }
}

impl ExitCalls {
    /// The calls `step` needs; `None` for a step that needs none.
    pub(crate) fn for_step(step: &ExitStep, hop: impl FnOnce() -> Option<HopPlan>) -> Option<Self> {
        match step {
            ExitStep::Park { label, .. } => Some(ExitCalls::Park {
                label: label.clone(),
            }),
            ExitStep::Declared { state, no_change } => Some(ExitCalls::Declared {
                state: state.clone(),
                hop: if *no_change { hop() } else { None },
            }),
            ExitStep::Continue { .. } => Some(ExitCalls::Continue { hop: hop() }),
            _ => None,
        }
    }

    /// Makes the calls, in the order the step needs them (off `orch`).
    pub(crate) fn run(
        &self,
        tracker: &dyn TrackerAdapter,
        cfg: &crate::config::TrackerConfig,
        issue: &Issue,
    ) -> ExitAnswers {
        match self {
            ExitCalls::Park { label } => ExitAnswers::Park {
                label: tracker.add_label(&issue.id, label),
                state: state_now(tracker, issue),
            },
            ExitCalls::Declared { state, hop } => {
                // A failed read counts as active, as the supervisor last saw it.
                let active = |s: Result<String, StateUnread>| match s {
                    Ok(s) => {
                        state_in(&s, &cfg.active_states) && !state_in(&s, &cfg.terminal_states)
                    }
                    Err(_) => true,
                };
                let hop = hop
                    .as_ref()
                    .filter(|_| active(state_now(tracker, issue)))
                    .map(|h| h.write(tracker, issue));
                let hopped = matches!(hop, Some(HopWrite::Made { .. }));
                let transition = state
                    .as_deref()
                    .filter(|_| !hopped)
                    .map(|s| tracker.transition_issue(&issue.id, s));
                ExitAnswers::Declared { hop, transition }
            }
            ExitCalls::Continue { hop } => {
                let current = state_now(tracker, issue).ok();
                let step = decide_continue(current.as_deref(), cfg);
                let (mut hop_write, mut transition) = (None, None);
                if let ContinueStep::HandOff { state } = &step {
                    hop_write = hop.as_ref().map(|h| h.write(tracker, issue));
                    if !matches!(hop_write, Some(HopWrite::Made { .. })) {
                        transition = Some(tracker.transition_issue(&issue.id, state));
                    }
                }
                ExitAnswers::Continue {
                    step,
                    hop: hop_write,
                    transition,
                }
            }
        }
    }
}

impl Orchestrator {
    /// Makes an exit's tracker calls off `orch`; the issue stays claimed (`settling`) until
    /// [`Orchestrator::settle_exit`] applies the answers.
    pub(crate) fn settle_off_thread(
        &mut self,
        entry: RunningEntry,
        result: SupervisorResult,
        step: ExitStep,
        calls: ExitCalls,
    ) {
        let issue = entry.facts.issue.clone();
        let tracker = self.tracker.clone();
        let cfg = self.workflow.config.tracker.clone();
        let id = issue.id.clone();
        let label = crate::orchestrator::core::io_pool::JobLabel::new(
            "exit tracker calls",
            issue.identifier.clone(),
        );
        self.state.settling.insert(
            id.clone(),
            crate::orchestrator::core::state::Settling {
                entry,
                result,
                step,
                since_ms: self.clock.now_ms(),
            },
        );
        let kind = tracker.kind().to_string();
        self.spawn_io(
            crate::orchestrator::core::io::Lane::Work,
            label,
            move || calls.run(tracker.as_ref(), &cfg, &issue),
            move |o: &mut Orchestrator, answers| o.settle_exit(&id, answers, &kind),
        );
    }
}

/// The answers of calls that could not be made (`why`): nothing written, nothing read.
pub(crate) fn failed_answers(step: &ExitStep, tracker_kind: &str, why: &str) -> ExitAnswers {
    let error = || {
        crate::tracker::TrackerError::new(
            crate::tracker::TrackerErrorKind::Api,
            tracker_kind,
            why.to_string(),
        )
    };
    match step {
        ExitStep::Park { .. } => ExitAnswers::Park {
            label: Err(error()),
            state: Err(StateUnread::NotMade(why.to_string())),
        },
        ExitStep::Declared { state, .. } => ExitAnswers::Declared {
            hop: None,
            transition: state.as_ref().map(|_| Err(error())),
        },
        _ => ExitAnswers::Continue {
            step: ContinueStep::Continue,
            hop: None,
            transition: None,
        },
    }
}
