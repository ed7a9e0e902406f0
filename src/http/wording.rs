//! The one table of wording: every status sentence, attention sentence and operator-action
//! `outcome_text` the API serves. Sentences state only recorded facts, carry no clock time,
//! date or cost, read "not measured" for a missing figure (never 0), and "at least" for a lower
//! bound. Short sentences end without a period, long ones with one. Masking happens when the
//! response is written, like every served string.

/// A short and a long sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub short: String,
    pub full: String,
}

impl Pair {
    fn new(short: impl Into<String>, full: impl Into<String>) -> Pair {
        Pair {
            short: short.into(),
            full: full.into(),
        }
    }
}

use crate::agent::{AgentErrorKind, CancelReason};
use crate::domain::{
    BudgetReason, OutcomeKind, ParkReason, PollOutcome, RescheduleReason, RetryTrigger, SpendWindow,
};
use crate::orchestrator::msg::ErrorCode;
use crate::orchestrator::run_error::{RetryError, RunError};

/// What a sentence reads when it cannot be rendered.
pub const NOT_AVAILABLE: &str = "Status not available";

/// A relative duration: `45s`, `5m`, `4m 30s`, `2h`, `2h 5m`, `3d`. Never negative.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 if s % 60 == 0 => format!("{}m", s / 60),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 if (s % 3600) / 60 == 0 => format!("{}h", s / 3600),
        3600..=86_399 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d", s / 86_400),
    }
}

/// An estimated cost, `at least $X` when it is a lower bound, `not known` when unpriced.
fn estimated(used: Option<f64>, complete: bool) -> String {
    match used {
        Some(u) if complete => usd(u),
        Some(u) => format!("at least {}", usd(u)),
        None => "not known".to_string(),
    }
}

/// A money budget hold's sentences: the issue's estimated cost against its ceiling.
pub fn budget_money(used: Option<f64>, complete: bool, limit: f64) -> Pair {
    Pair::new(
        "Held: money budget reached",
        format!(
            "Held at the money budget of {}. Estimated cost: {}.",
            usd(limit),
            estimated(used, complete)
        ),
    )
}

/// The attention words of a money budget hold.
pub fn attention_money(used: Option<f64>, complete: bool, limit: f64) -> AttentionWords {
    AttentionWords {
        reason: "Money budget reached".to_string(),
        why: format!(
            "The issue's estimated cost, {}, reached its money budget of {}.",
            estimated(used, complete),
            usd(limit)
        ),
        clears: format!(
            "Clears on the next poll tick after `agent.max_cost_usd` is raised above {} or is removed, or after the issue leaves the active tracker states.",
            usd(limit)
        ),
    }
}

/// A token count: `950`, `12.5K`, `500K`, `1.5M`.
pub fn tokens(n: u64) -> String {
    fn scaled(n: u64, unit: u64, suffix: &str) -> String {
        let tenths = n * 10 / unit;
        if tenths.is_multiple_of(10) {
            format!("{}{suffix}", tenths / 10)
        } else {
            format!("{}.{}{suffix}", tenths / 10, tenths % 10)
        }
    }
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => scaled(n, 1_000, "K"),
        _ => scaled(n, 1_000_000, "M"),
    }
}

/// A token figure that may be missing or a lower bound.
pub fn token_figure(n: Option<u64>, complete: bool) -> String {
    match n {
        None => "not measured".into(),
        Some(n) if complete => tokens(n),
        Some(n) => format!("at least {}", tokens(n)),
    }
}

/// A running session.
pub fn running(turn: u32, stage: Option<&str>, waiting_for_output: bool) -> Pair {
    let stage_short = stage.map(|s| format!(" of {s}")).unwrap_or_default();
    let stage_full = stage.map(|s| format!(" on stage {s}")).unwrap_or_default();
    if waiting_for_output && turn > 0 {
        return Pair::new(
            format!("Turn {turn}{stage_short}, waiting for the agent's first output"),
            format!(
                "Running{stage_full}, turn {turn}: the agent has printed nothing for longer than agent.read_timeout_ms; waiting for the agent's first output."
            ),
        );
    }
    if turn == 0 {
        return Pair::new(
            format!("Starting{stage_short}"),
            format!("Running{stage_full}, the first turn is starting."),
        );
    }
    Pair::new(
        format!("Turn {turn}{stage_short}"),
        format!("Running{stage_full}, turn {turn}."),
    )
}

const STALL_STOP: &str =
    "The agent sent no event within the stall timeout, so Sortie stopped the run.";

/// What a failed attempt reads as, before any message the agent supplied.
fn failure_words(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Agent(kind) => match kind {
            AgentErrorKind::AgentNotFound => "Sortie could not start the agent command",
            AgentErrorKind::InvalidWorkspaceCwd => {
                "The agent could not run in the issue's workspace"
            }
            AgentErrorKind::TurnInputRequired => {
                "The agent asked for input, which an unattended run cannot give"
            }
            AgentErrorKind::TurnCancelled => "The agent's turn was cancelled",
            AgentErrorKind::ResponseTimeout => "The agent did not answer within the read timeout",
            AgentErrorKind::TurnTimeout => {
                "The turn ran past the turn timeout, so Sortie stopped the run"
            }
            AgentErrorKind::PortExit => "The agent process exited before the turn ended",
            AgentErrorKind::ResponseError => "The agent answered with an error",
            AgentErrorKind::TurnFailed => "The agent's turn failed",
            AgentErrorKind::AgentAuthFailed => {
                "The agent is not logged in, so Sortie starts no session of its kind until a person logs it in"
            }
        },
        ErrorCode::Workspace => "Sortie could not prepare the issue's workspace",
        ErrorCode::Hook => "The before_run hook failed",
        ErrorCode::PromptRender => "Sortie could not render the prompt for the turn",
        ErrorCode::TrackerRefresh => {
            "Sortie could not read the issue's state from the tracker between turns"
        }
        ErrorCode::SupervisorPanic => "The session's supervisor stopped on an internal error",
        ErrorCode::UsageLimited => {
            "The agent provider refused the session because the account's usage limit is reached"
        }
        ErrorCode::HandoffWithheld => {
            "Sortie withheld the handoff because the run showed no evidence of work"
        }
    }
}

/// Whether a failure's message says nothing the sentence does not: empty, the code itself,
/// Sortie's own cancellation text, or the sentence again.
fn only_repeats(code: ErrorCode, words: &str, message: &str) -> bool {
    let norm = |t: &str| t.trim().trim_end_matches('.').to_lowercase();
    let m = norm(message);
    m.is_empty()
        || m == code.as_str()
        || m == norm(words)
        || (matches!(
            code,
            ErrorCode::Agent(AgentErrorKind::TurnCancelled | AgentErrorKind::TurnTimeout)
        ) && m.starts_with("turn cancelled:"))
        || (code == ErrorCode::UsageLimited && m.ends_with("usage limit reached"))
}

/// Ends a sentence with one stop, unless it already ends with one.
fn ended(t: &str) -> String {
    let t = t.trim_end();
    if t.ends_with(['.', '!', '?']) {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

fn cancelled_words(reason: CancelReason, turns_completed: Option<u32>) -> String {
    match reason {
        CancelReason::Stall => STALL_STOP.into(),
        CancelReason::TurnTimeout => {
            "The turn ran past the turn timeout, so Sortie stopped the run.".into()
        }
        CancelReason::Shutdown => match turns_completed {
            Some(done) => format!(
                "Sortie stopped the session before the agent finished turn {}.",
                done.saturating_add(1)
            ),
            None => "Sortie stopped the session before the agent finished its turn.".into(),
        },
        CancelReason::Reconcile => {
            "The issue reached a terminal or inactive state, so Sortie stopped the run.".into()
        }
        CancelReason::Budget => {
            "Sortie stopped the run because the issue reached its token limit.".into()
        }
        CancelReason::User => "Sortie stopped the run on request.".into(),
        CancelReason::Signal => "The agent was killed by a signal that Sortie did not send.".into(),
    }
}

/// The plain sentence of a typed run error; `turns_completed` is the run's, when known.
fn run_error_words(e: &RunError, turns_completed: Option<u32>) -> String {
    match e {
        RunError::Failed { code, message } => {
            let words = failure_words(*code);
            if only_repeats(*code, words, message) {
                ended(words)
            } else {
                ended(&format!("{words}: {}", message.trim()))
            }
        }
        RunError::Cancelled(reason) => cancelled_words(*reason, turns_completed),
        RunError::TokenBudget(t) => format!(
            "Sortie stopped the run because the issue used {} tokens, reaching its limit of {}.",
            tokens(t.used),
            tokens(t.limit)
        ),
        RunError::MoneyBudget(m) => format!(
            "Sortie stopped the run because the issue's estimated cost, {}, reached its limit of {}.",
            usd(m.used_usd),
            usd(m.limit_usd)
        ),
    }
}

/// A run row's `error`: the plain sentence of the stored error, with any message the agent
/// supplied after a colon; a text that is no known kind is served as stored.
pub fn run_error(stored: &str, turns_completed: Option<u32>) -> String {
    match RunError::parse(stored) {
        Some(e) => run_error_words(&e, turns_completed),
        None => stored.to_string(),
    }
}

/// A retry row's `error` (and the issue's `last_error`): the plain sentence of the run before
/// it, as that run's row reads; a reschedule reason is served as written.
pub fn retry_error(stored: &str) -> String {
    match RetryError::parse(stored) {
        Some(RetryError::WorkerExited(e)) => run_error_words(&e, None),
        Some(RetryError::Stall) => STALL_STOP.into(),
        Some(RetryError::Reschedule(r)) => r.as_str().into(),
        None => stored.to_string(),
    }
}

/// The plain form of a reschedule reason inside a retry's sentences.
fn reschedule_words(reason: RescheduleReason) -> &'static str {
    match reason {
        RescheduleReason::NoSlots => "no agent slot was free",
        RescheduleReason::WorkerStillRunning => "the previous run had not finished stopping",
        RescheduleReason::IssueFetchFailed => "the issue could not be read from the tracker",
        RescheduleReason::DatabaseFailing => "the database was not taking writes",
        RescheduleReason::NoStateLabel => "the tracker returned no state for the issue",
        RescheduleReason::NoSshHosts => "every SSH host was at its session limit",
        RescheduleReason::IdentifierInUse => {
            "another issue with the same identifier was running or queued"
        }
        RescheduleReason::UsageLimit => "the agent's usage limit had not reset yet",
        RescheduleReason::SpendCeiling => "a spend ceiling held dispatch",
        RescheduleReason::ReactionPausedByBlocker => {
            "an open blocking issue paused the reaction's retry"
        }
        RescheduleReason::ReactionPausedByState => "the issue's state paused the reaction's retry",
        RescheduleReason::AgentKindUnavailable => "the retry's agent kind could not be started",
        RescheduleReason::AgentSettingsRefused => "the retry's agent settings failed a check",
    }
}

/// A queued retry: `attempt` is the attempt it dispatches, `due_in_ms` from the snapshot time.
pub fn retrying(attempt: u32, due_in_ms: i64, trigger: &str, error: Option<&str>) -> Pair {
    let when = if due_in_ms <= 0 {
        "due now".to_string()
    } else {
        format!("in {}", duration(due_in_ms))
    };
    let head = format!("Retry {attempt} {when}");
    let trigger = trigger.parse::<RetryTrigger>().ok();
    let error = error.filter(|e| !e.trim().is_empty());
    let parsed = error.and_then(RetryError::parse);
    match (trigger, error) {
        (Some(RetryTrigger::Timer), Some(e)) => {
            let reason = match &parsed {
                Some(RetryError::Reschedule(r)) => reschedule_words(*r).to_string(),
                _ => retry_error(e).trim_end_matches('.').to_string(),
            };
            Pair::new(
                format!("{head}: {reason}"),
                format!("The retry came due and was not dispatched: {reason}. {head}."),
            )
        }
        (Some(RetryTrigger::Continuation), _) => Pair::new(
            format!("Continuation {when}"),
            format!("The session ended normally and continues with attempt {attempt} {when}."),
        ),
        (Some(RetryTrigger::Stall), _) => Pair::new(
            format!("{head} after a stall"),
            format!("{STALL_STOP} {head}."),
        ),
        (Some(RetryTrigger::UsageLimit), _) => Pair::new(
            format!("{head} after a usage limit"),
            format!(
                "The agent provider refused the session because the account's usage limit is reached, so the retry waits for the reset. {head}."
            ),
        ),
        (Some(RetryTrigger::Error) | None, Some(e)) => {
            // The sentence the retry's `error` serves is quoted whole; a text of no known
            // kind is named as the previous run's failure.
            let full = match parsed {
                Some(RetryError::WorkerExited(_) | RetryError::Stall) => {
                    format!("{} {head}.", retry_error(e))
                }
                Some(RetryError::Reschedule(r)) => {
                    format!("The retry was put back: {}. {head}.", reschedule_words(r))
                }
                None => format!(
                    "The previous run failed: {}. {head}.",
                    e.trim_end_matches('.')
                ),
            };
            Pair::new(format!("{head} after an error"), full)
        }
        (Some(RetryTrigger::Timer | RetryTrigger::Error | RetryTrigger::CiFix) | None, _) => {
            Pair::new(head.clone(), format!("{head}."))
        }
    }
}

/// A budget hold; `reason` is a [`BudgetReason`] word.
pub fn budget(reason: &str, used: u64, limit: u64) -> Pair {
    let Ok(reason) = reason.parse::<BudgetReason>() else {
        return Pair::new(NOT_AVAILABLE, format!("{NOT_AVAILABLE}."));
    };
    match reason {
        BudgetReason::Session => Pair::new(
            "Held: session budget reached",
            format!("Held at the session budget of {limit}. Sessions used: {used}."),
        ),
        BudgetReason::Token => Pair::new(
            "Held: token budget reached",
            format!(
                "Held at the token budget of {}. Tokens used: {}.",
                tokens(limit),
                tokens(used)
            ),
        ),
        BudgetReason::Money => Pair::new(
            "Held: money budget reached",
            "Held at the money budget (`agent.max_cost_usd`).",
        ),
    }
}

/// A parked issue; `reason` is a [`ParkReason`] word.
pub fn parked(reason: &str, label: &str) -> Pair {
    parked_words(reason.parse().ok(), label)
}

fn parked_words(reason: Option<ParkReason>, label: &str) -> Pair {
    match reason {
        Some(ParkReason::AgentBlocked) => Pair::new(
            "Parked: the agent needs a person",
            format!(
                "Parked: the agent stopped because it cannot go on without a person. Parking label: `{label}`."
            ),
        ),
        Some(ParkReason::HandoffAbsence) => Pair::new(
            "Parked: no evidence of work",
            format!("Parked: runs kept ending without evidence of work. Parking label: `{label}`."),
        ),
        None => Pair::new("Parked", format!("Parked. Parking label: `{label}`.")),
    }
}

/// One blocker as a hold names it.
pub struct BlockerWords<'a> {
    pub identifier: &'a str,
    pub state: &'a str,
}

/// The hold of a held issue: `(reason_text, release_text, status_text_full)`.
pub fn blocked_by(blockers: &[BlockerWords<'_>]) -> (String, String, String) {
    let names: Vec<String> = blockers
        .iter()
        .map(|b| {
            if b.state.is_empty() {
                format!("{} (no state)", b.identifier)
            } else {
                format!("{} ({})", b.identifier, b.state)
            }
        })
        .collect();
    let reason = format!("Blocked by {}", names.join(", "));
    let (release, tail) = if blockers.len() == 1 {
        (
            "Released when the blocker reaches a terminal state.",
            "Sortie dispatches the issue once the blocker reaches a terminal state.",
        )
    } else {
        (
            "Released when every blocker reaches a terminal state.",
            "Sortie dispatches the issue once every blocker reaches a terminal state.",
        )
    };
    let full = format!("{reason}. {tail}");
    (reason, release.to_string(), full)
}

/// A full agent slot limit: `state` is `Some` for a per-state limit. `used` is the sessions
/// running against the limit in the snapshot served: below `limit`, a session ended after the
/// pass and the next poll finds the slot free, so the sentences say so instead of calling the
/// slots taken beside a running list that shows them free.
pub fn slots_full(state: Option<&str>, used: usize, limit: usize) -> (String, String, String) {
    let slots = match state {
        None => format!("All {limit} agent slots"),
        Some(s) => format!("All {limit} agent slots for {s}"),
    };
    if used < limit {
        let reason = format!("{slots} were in use at the last poll");
        let release = "Released at the next poll: a slot is free now.".to_string();
        let full = format!(
            "{reason}. A slot is free now, so Sortie dispatches the issue at the next poll."
        );
        return (reason, release, full);
    }
    let reason = format!("{slots} are in use");
    let release = "Released when a running session ends and frees a slot.".to_string();
    let full = format!("{reason}. Sortie dispatches the issue when a slot frees up.");
    (reason, release, full)
}

/// The daemon-wide cap shared by several workflows is full, or this workflow is at its fair
/// share of it while another workflow waits.
pub fn daemon_slots_full(used: usize, limit: usize) -> (String, String, String) {
    let reason = if used < limit {
        format!(
            "This workflow is at its fair share of the {limit} agent slots its daemon's workflows share"
        )
    } else {
        format!("All {limit} agent slots this daemon's workflows share are in use")
    };
    let release =
        "Released when a session of any workflow ends and the slot falls to this one.".to_string();
    let full = format!(
        "{reason}. Sortie dispatches the issue when a shared slot frees up and no workflow with fewer sessions is waiting for it."
    );
    (reason, release, full)
}

/// The blocker read of the issue failed, or an earlier failure ended the pass's reads.
pub fn blockers_unresolved() -> (String, String, String) {
    let reason = "Blockers could not be read".to_string();
    let release = "Released when a later poll reads the blockers and none is open.".to_string();
    let full = format!(
        "{reason}. Sortie dispatches no issue on a blocker list it did not read, and reads it again on the next poll."
    );
    (reason, release, full)
}

/// The pass's blocker-read budget ran out before it reached the issue.
pub fn blockers_not_read() -> (String, String, String) {
    let reason = "Blockers not read yet".to_string();
    let release = "Released when a later poll reads the blockers and none is open.".to_string();
    let full = format!(
        "{reason}. Each poll reads the blockers of a few issues in turn and had spent its reads before it reached this one."
    );
    (reason, release, full)
}

/// The tracker marked the blocker list incomplete.
pub fn blockers_incomplete() -> (String, String, String) {
    let reason = "The tracker returned an incomplete blocker list".to_string();
    let release =
        "Released when the tracker returns the whole blocker list and no blocker is open."
            .to_string();
    let full = format!("{reason}. Sortie dispatches no issue on a partial blocker list.");
    (reason, release, full)
}

/// An issue a stage hop moved from `source` to `target` (adding `label`) that no run has
/// picked up yet. The pair is the same whether or not a pass holds the issue: the row's hold
/// carries its own sentences.
pub fn between_stages(source: &str, target: &str, label: &str) -> Pair {
    Pair::new(
        format!("Between stages: {source} to {target}"),
        format!(
            "Moved from stage {source} to stage {target}, and Sortie added `{label}`; {target} starts when a poll tick reads that label on the issue."
        ),
    )
}

/// The next outcome of an issue between stages: `(condition, text)`.
pub fn between_stages_next(target: &str, label: &str) -> (String, String) {
    (
        format!("When a poll tick reads `{label}` on the issue"),
        format!("Stage {target} starts in a new session."),
    )
}

/// A park was released and the read of the comments the next run receives failed.
pub fn park_comments_unread() -> (String, String, String) {
    let reason = "Comments of the released park could not be read".to_string();
    let release = "Released when the next poll reads the issue's comments.".to_string();
    let full = format!(
        "{reason}. The next run receives the comments a person left, so Sortie reads them before it dispatches."
    );
    (reason, release, full)
}

/// Every SSH host is at its per-host session limit (or out of service).
pub fn ssh_hosts_full() -> (String, String, String) {
    let reason = "Every SSH host runs as many sessions as it may".to_string();
    let release = "Released when a session on an SSH host ends and frees room.".to_string();
    let full = format!("{reason}. Sortie dispatches the issue when a host has room.");
    (reason, release, full)
}

/// A hold on a workspace whose lock another session or process holds.
pub fn workspace_locked(holder_pid: Option<u32>) -> (String, String, String) {
    let reason = match holder_pid {
        Some(pid) => format!("Workspace is locked by process {pid}"),
        None => "Workspace is locked by another process".to_string(),
    };
    let release = "Released when that process releases the workspace lock.".to_string();
    let full = format!(
        "{reason}. Sortie never runs two sessions in one workspace and dispatches the issue once the lock is free."
    );
    (reason, release, full)
}

/// Another claimed issue has the same identifier, so the same workspace directory.
pub fn identifier_in_use(by_issue_id: &str) -> (String, String, String) {
    let reason = format!("Issue {by_issue_id} with the same identifier is running or queued");
    let release =
        "Released when that issue's claim ends; both would share one workspace directory."
            .to_string();
    let full = format!(
        "{reason}. Its workspace is named after the identifier, so Sortie dispatches this issue when the other one's claim ends."
    );
    (reason, release, full)
}

/// A usage limit holds the agent kind; `on_model` is `Some` for a hold on one configured
/// model (`Some(None)`: the runtime's default model).
pub fn usage_limit(agent_kind: &str, on_model: Option<Option<&str>>) -> (String, String, String) {
    let reason = match on_model {
        None => format!("Usage limit of {agent_kind} reached"),
        Some(Some(model)) => format!("Usage limit of {agent_kind} on {model} reached"),
        Some(None) => format!("Usage limit of {agent_kind} on its default model reached"),
    };
    let release =
        "Released one poll interval after the usage limit resets; the refused issue's own retry runs at the reset."
            .to_string();
    let full = format!(
        "{reason}. Sortie starts no session of {agent_kind} until the limit resets and dispatches the issue on a poll tick after that."
    );
    (reason, release, full)
}

/// The agent kind's login failed, so every dispatch of it is held.
pub fn agent_auth_failed(agent_kind: &str) -> (String, String, String) {
    let reason = format!("{agent_kind} is not logged in");
    let release = format!(
        "Released when the workflow file is saved or reloaded with a change, or when a session of {agent_kind} completes a turn."
    );
    let full = format!(
        "{reason}. Sortie starts no session of {agent_kind} until a person logs its CLI in and saves the workflow file."
    );
    (reason, release, full)
}

/// What a failure hold says its cause is: the class's description, else the repeated code.
fn failure_cause_words(cause: &str, runs: u32) -> String {
    match crate::agent::failure_class::FailureClass::from_code(cause) {
        Some(class) => class.describe().to_string(),
        None if cause == "stall" => {
            format!("{runs} runs in a row stalled (no agent event within agent.stall_timeout_ms)")
        }
        None => format!("{runs} runs in a row failed with {cause}"),
    }
}

/// What a person does about a failure hold's cause.
fn failure_cause_action(cause: &str) -> &'static str {
    match crate::agent::failure_class::FailureClass::from_code(cause) {
        Some(class) => class.what_to_do(),
        None => "read the agent's words and the run history, fix what makes the runs fail",
    }
}

const FAILURE_RELEASE: &str = "Released when a person acknowledges its attention item or asks to retry it now, when the workflow file is saved or reloaded with a change, or when the issue leaves the active tracker states.";

/// A `failure_held` hold's sentences (reason, release, full).
pub fn failure_held(cause: &str, runs: u32) -> (String, String, String) {
    let reason = format!("Held: {}", failure_cause_words(cause, runs));
    let full = format!(
        "{reason}. Sortie does not retry it until a person acts: {}.",
        failure_cause_action(cause)
    );
    (reason, FAILURE_RELEASE.to_string(), full)
}

/// The attention sentences of a failure hold; `said` is the agent's own words (masked).
pub fn attention_failure_held(cause: &str, runs: u32, said: &str) -> AttentionWords {
    let runs_text = if runs == 1 {
        "Its run".to_string()
    } else {
        format!("Its last {runs} runs")
    };
    let failed = if cause == "stall" {
        "stalled (no agent event within agent.stall_timeout_ms)".to_string()
    } else {
        format!("failed with {cause}")
    };
    let said = if said.trim().is_empty() {
        String::new()
    } else {
        format!(" The agent said: \u{201c}{}\u{201d}", said.trim())
    };
    AttentionWords {
        reason: format!("Held: {}", failure_cause_words(cause, runs)),
        why: format!(
            "{runs_text} {failed}, which a retry will not fix, so Sortie holds the issue.{said} To do: {}, then acknowledge this item or retry the issue now.",
            failure_cause_action(cause)
        ),
        clears: "Clears when a person acknowledges this item or asks to retry the issue now, when the workflow file is saved or reloaded with a change, or when the issue leaves the active tracker states.".to_string(),
    }
}

/// The three attention sentences of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionWords {
    pub reason: String,
    pub why: String,
    pub clears: String,
}

pub fn attention_parked(reason: ParkReason, label: &str, parked_state: &str) -> AttentionWords {
    let why = match reason {
        ParkReason::AgentBlocked => format!(
            "The agent stopped because it cannot go on without a person, so Sortie parked the issue under the label `{label}`."
        ),
        ParkReason::HandoffAbsence => format!(
            "Runs kept ending without evidence of work, so Sortie parked the issue under the label `{label}`."
        ),
    };
    let moved = if parked_state.is_empty() {
        "or the issue moved to another tracker state".to_string()
    } else {
        format!("or the issue moved out of {parked_state}")
    };
    AttentionWords {
        reason: parked_words(Some(reason), label).short,
        why,
        clears: format!("Clears when a poll tick finds `{label}` removed from the issue, {moved}."),
    }
}

pub fn attention_budget(reason: BudgetReason, used: u64, limit: u64) -> AttentionWords {
    let (phrase, why, key, limit_words) = match reason {
        BudgetReason::Token => (
            "Token budget reached",
            format!(
                "The issue has used {} tokens of its budget of {}.",
                tokens(used),
                tokens(limit)
            ),
            "agent.max_tokens",
            tokens(limit),
        ),
        BudgetReason::Money => (
            "Money budget reached",
            "The issue's estimated cost reached its money budget.".to_string(),
            "agent.max_cost_usd",
            "its current value".to_string(),
        ),
        BudgetReason::Session => (
            "Session budget reached",
            format!("The issue has used {used} sessions of its budget of {limit}."),
            "agent.max_sessions",
            limit.to_string(),
        ),
    };
    AttentionWords {
        reason: phrase.to_string(),
        why,
        clears: format!(
            "Clears on the next poll tick after `{key}` is raised above {limit_words} or is removed, or after the issue leaves the active tracker states."
        ),
    }
}

pub fn attention_workflow(file: &str, error: &str) -> AttentionWords {
    AttentionWords {
        reason: format!("{file} failed to load"),
        why: format!(
            "{file} failed to load ({error}), so poll ticks dispatch nothing until it loads, and the configuration that last loaded stays in effect."
        ),
        clears: format!(
            "Clears when {file} loads again, which Sortie tries each time the file is saved and on every poll tick."
        ),
    }
}

pub fn attention_notification(name: &str, kind: &str, error: &str) -> AttentionWords {
    AttentionWords {
        reason: format!("Notifications to {name} are not delivered"),
        why: format!(
            "The {kind} destination {name} did not take a notice after its retries ({error}). Later notices are still tried, each with its retries; runs and their records go on unaffected, but the people watching {name} do not hear about them."
        ),
        clears: format!(
            "Clears when a notice to {name} is delivered. Check its url under notifications.destinations (a Slack incoming webhook can be revoked), that the endpoint accepts POSTs from this host, and, for a webhook that rejects the X-Sortie-Signature, that its secret matches."
        ),
    }
}

pub fn attention_notification_disabled(name: &str, kind: &str, why: &str) -> AttentionWords {
    AttentionWords {
        reason: format!("Notifications to {name} are switched off"),
        why: format!(
            "The {kind} destination {name} sends nothing: {why}. Runs go on unaffected, but the people watching {name} do not hear about them."
        ),
        clears: format!(
            "Clears when the workflow is reloaded with {name}'s url and secret resolved: set the variable they name in sortie's environment (or the workflow's .env file) and save the workflow, or remove {name} from notifications.destinations."
        ),
    }
}

pub fn attention_preflight(error: &str) -> AttentionWords {
    AttentionWords {
        reason: "Dispatch preflight failed".into(),
        why: format!(
            "The dispatch preflight failed ({error}), so poll ticks dispatch nothing until it passes."
        ),
        clears: "Clears when the dispatch preflight passes on a later poll tick.".into(),
    }
}

pub fn attention_database(error: &str) -> AttentionWords {
    AttentionWords {
        reason: "Database not writable".into(),
        why: format!(
            "The database check failed ({error}), so Sortie dispatches nothing new and hands off no issue until its run is recorded; running sessions go on and failed writes are kept and retried in order."
        ),
        clears: "Clears on the poll tick after every kept write is stored and the database check passes.".into(),
    }
}

/// An agent kind whose login failed; `error` is the agent's message, masked.
pub fn attention_agent_auth(agent_kind: &str, error: &str) -> AttentionWords {
    AttentionWords {
        reason: format!("{agent_kind} is not logged in"),
        why: format!(
            "A session of {agent_kind} failed to authenticate ({error}), so poll ticks dispatch nothing to it; log the agent's CLI in on this machine (its login command, or its API key in Sortie's environment)."
        ),
        clears: format!(
            "Clears when the workflow file is saved or reloaded with a change, or when a session of {agent_kind} completes a turn."
        ),
    }
}

/// A US-dollar figure: two decimals, four below one cent so a small spend is not read as
/// zero (`$41.27`, `$0.05`, `$0.0040`).
pub fn usd(amount: f64) -> String {
    let a = if amount.is_finite() {
        amount.max(0.0)
    } else {
        0.0
    };
    if a > 0.0 && a < 0.01 {
        format!("${a:.4}")
    } else {
        format!("${a:.2}")
    }
}

/// The window's name in a sentence, and its ceiling's adjective.
fn spend_window_words(window: SpendWindow) -> (&'static str, &'static str) {
    match window {
        SpendWindow::Daily => ("today (UTC)", "daily"),
        SpendWindow::Weekly => ("this week (UTC, from Monday)", "weekly"),
        SpendWindow::Monthly => ("this month (UTC)", "monthly"),
    }
}

/// When a window resets, as a release names it (no clock time: the sentences carry none).
fn spend_reset_words(window: SpendWindow) -> &'static str {
    match window {
        SpendWindow::Daily => "when the UTC day ends",
        SpendWindow::Weekly => "when the UTC week ends",
        SpendWindow::Monthly => "when the UTC month ends",
    }
}

/// The short phrase of a window that reached its ceiling (hold and attention item alike).
fn spend_ceiling_reason(window: SpendWindow) -> &'static str {
    match window {
        SpendWindow::Daily => "Daily spend ceiling reached",
        SpendWindow::Weekly => "Weekly spend ceiling reached",
        SpendWindow::Monthly => "Monthly spend ceiling reached",
    }
}

/// A spend window holds dispatch: `(reason_text, release_text, status_text_full)`.
pub fn spend_ceiling_hold(window: SpendWindow) -> (String, String, String) {
    let reason = spend_ceiling_reason(window).to_string();
    let release = format!(
        "Released {}, or on the next poll tick after `{}` is raised above the window's spend or is removed.",
        spend_reset_words(window),
        window.config_key()
    );
    let full = format!(
        "{reason}. Sortie starts no new agent session until every spend window that holds dispatch clears; running sessions go on."
    );
    (reason, release, full)
}

/// A spend window whose spend reached its ceiling; `complete` is false when `used_usd` is a
/// lower bound.
pub fn attention_spend_ceiling(
    window: SpendWindow,
    used_usd: f64,
    complete: bool,
    budget_usd: f64,
) -> AttentionWords {
    let (period, adjective) = spend_window_words(window);
    let used = if complete {
        usd(used_usd)
    } else {
        format!("at least {}", usd(used_usd))
    };
    AttentionWords {
        reason: spend_ceiling_reason(window).to_string(),
        why: format!(
            "The estimated spend {period} is {used}, reaching the {adjective} ceiling of {}, so poll ticks and retries start no new agent session; running sessions go on.",
            usd(budget_usd)
        ),
        clears: format!(
            "Clears {}, or on the next poll tick after `{}` is raised above the window's spend or is removed.",
            spend_reset_words(window),
            window.config_key()
        ),
    }
}

/// `health.poll.summary_text`. A failing check always ends with when the last successful poll
/// was; `last_success_ago_ms` is `None` when none has succeeded since Sortie started.
/// What the poll summary adds while a poll's reads are out for a while (`waiting_ms`, from 5 s
/// on) or ticks were skipped for them: the tracker is slow, not failing yet.
pub fn poll_waiting(waiting_ms: Option<i64>, ticks_skipped: u64) -> String {
    let skipped = match ticks_skipped {
        0 => String::new(),
        1 => " 1 poll tick was skipped while reads were out.".into(),
        n => format!(" {n} poll ticks were skipped while reads were out."),
    };
    match waiting_ms.filter(|ms| *ms >= 5_000) {
        Some(ms) => format!(
            " The tracker has not answered the current poll for {}.{skipped}",
            duration(ms)
        ),
        None => skipped,
    }
}

pub fn poll_summary(
    outcome: Option<&str>,
    failures_in_row: u32,
    last_success_ago_ms: Option<i64>,
) -> String {
    let Some(outcome) = outcome else {
        return "Sortie has not polled the tracker yet.".into();
    };
    // The API serves a successful poll's outcome as `succeeded`.
    let outcome = match outcome {
        "succeeded" => Some(PollOutcome::Ok),
        other => other.parse::<PollOutcome>().ok(),
    };
    let stop = match outcome {
        Some(PollOutcome::Ok) => {
            return "The latest poll read the tracker without an error.".into();
        }
        Some(PollOutcome::PreflightFailed) => {
            "The latest poll stopped at the dispatch preflight before reading the tracker"
        }
        Some(PollOutcome::TrackerFailed) | None => "The latest poll could not read the tracker",
    };
    let row = if failures_in_row > 1 {
        format!(" ({failures_in_row} polls in a row failed)")
    } else {
        String::new()
    };
    let tail = match last_success_ago_ms {
        Some(ms) => format!("; the last successful poll was {} ago", duration(ms)),
        None => "; no poll has succeeded since Sortie started".into(),
    };
    format!("{stop}{row}{tail}.")
}

/// How an issue that only run history knows ended; `outcome_kind` is an [`OutcomeKind`] word.
pub fn history(outcome_kind: Option<&str>, state: &str) -> Pair {
    match outcome_kind.and_then(|k| k.parse::<OutcomeKind>().ok()) {
        Some(OutcomeKind::HandedOff) => Pair::new(
            format!("Handed off to {state}"),
            format!("Handed off: Sortie moved the issue to {state}."),
        ),
        Some(OutcomeKind::Terminal) => Pair::new(
            format!("Ended in {state}"),
            format!("Ended: the issue reached the terminal state {state}."),
        ),
        Some(OutcomeKind::Merged) => Pair::new("Merged", "Ended merged: the pull request merged."),
        None => Pair::new(
            "Not active; no ending recorded",
            "Not active; no ending recorded.",
        ),
    }
}

pub const REFRESH_QUEUED: &str = "Tracker poll and reconciliation queued.";
pub const REFRESH_COALESCED: &str =
    "A tracker poll and reconciliation was already queued; this request joined it.";
pub const NOTHING_QUEUED_DRAINING: &str = "Nothing queued: Sortie is shutting down.";
pub const NOTHING_ACKNOWLEDGED_DRAINING: &str = "Nothing acknowledged: Sortie is shutting down.";

/// A retry-now request released an issue from its failure hold.
pub fn failure_hold_released(key: &str) -> String {
    format!("{key} is released from its failure hold; the next poll tick dispatches it.")
}

pub fn retry_due_now(attempt: u32, key: &str) -> String {
    format!("Retry {attempt} of {key} is due now.")
}

/// `key` is `None` for an item about the process.
pub fn acknowledged(already: bool, key: Option<&str>, reason_text: &str) -> String {
    let verb = if already {
        "Already acknowledged"
    } else {
        "Acknowledged"
    };
    match key {
        Some(k) => {
            format!("{verb} {k} ({reason_text}). It comes back only if a new cause appears.")
        }
        None => format!("{verb}: {reason_text}. It comes back only if a new cause appears."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_words_state_the_cost_against_the_ceiling_at_least_when_a_lower_bound() {
        let full = budget_money(Some(12.4), true, 10.0).full;
        assert_eq!(
            full,
            "Held at the money budget of $10.00. Estimated cost: $12.40."
        );
        let w = attention_money(Some(12.4), false, 10.0);
        assert_eq!(
            w.why,
            "The issue's estimated cost, at least $12.40, reached its money budget of $10.00."
        );
        let stored = RunError::MoneyBudget(crate::orchestrator::run_error::MoneyStop {
            used_usd: 12.4,
            limit_usd: 10.0,
        })
        .stored();
        assert_eq!(
            run_error(&stored, None),
            "Sortie stopped the run because the issue's estimated cost, $12.40, reached its limit of $10.00."
        );
    }

    #[test]
    fn durations_round_down_and_never_go_negative() {
        assert_eq!(duration(-5), "0s");
        assert_eq!(duration(55_000), "55s");
        assert_eq!(duration(300_000), "5m");
        assert_eq!(duration(270_999), "4m 30s");
        assert_eq!(duration(7_200_000), "2h");
        assert_eq!(duration(7_500_000), "2h 5m");
        assert_eq!(duration(3 * 86_400_000), "3d");
    }

    #[test]
    fn token_counts_are_compact() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(500_000), "500K");
        assert_eq!(tokens(12_500), "12.5K");
        assert_eq!(tokens(1_500_000), "1.5M");
        assert_eq!(token_figure(None, false), "not measured");
        assert_eq!(token_figure(Some(0), false), "at least 0");
        assert_eq!(token_figure(Some(2_000), true), "2K");
    }

    #[test]
    fn between_stages_words_name_both_stages_and_the_label() {
        let p = between_stages("specify", "implement", "stage-implement");
        assert_eq!(p.short, "Between stages: specify to implement");
        assert_eq!(
            p.full,
            "Moved from stage specify to stage implement, and Sortie added `stage-implement`; implement starts when a poll tick reads that label on the issue."
        );
        assert_eq!(
            between_stages_next("implement", "stage-implement"),
            (
                "When a poll tick reads `stage-implement` on the issue".to_string(),
                "Stage implement starts in a new session.".to_string()
            )
        );
    }

    #[test]
    fn running_row() {
        assert_eq!(
            running(7, None, false),
            Pair::new("Turn 7", "Running, turn 7.")
        );
        assert_eq!(
            running(0, None, false).full,
            "Running, the first turn is starting."
        );
        assert_eq!(
            running(2, Some("implement"), false).short,
            "Turn 2 of implement"
        );
        assert_eq!(
            running(1, None, true).short,
            "Turn 1, waiting for the agent's first output"
        );
        assert_eq!(
            running(0, None, true).short,
            "Starting",
            "before the first turn starts"
        );
    }

    #[test]
    fn retry_rows() {
        assert_eq!(
            retrying(3, 300_000, "timer", Some("no available orchestrator slots")),
            Pair::new(
                "Retry 3 in 5m: no agent slot was free",
                "The retry came due and was not dispatched: no agent slot was free. Retry 3 in 5m."
            )
        );
        assert_eq!(
            retrying(2, 10_000, "error", Some("agent exited")).full,
            "The previous run failed: agent exited. Retry 2 in 10s."
        );
        assert_eq!(
            retrying(1, -1, "continuation", None).short,
            "Continuation due now"
        );
        assert_eq!(retrying(4, 0, "", None).full, "Retry 4 due now.");
        assert_eq!(
            retrying(
                1,
                60_000,
                "usage_limit",
                Some("worker exited: usage_limited: x")
            )
            .short,
            "Retry 1 in 1m after a usage limit"
        );
    }

    #[test]
    fn agent_kind_holds_name_the_kind_and_what_releases_them() {
        let (reason, release, full) = usage_limit("claude-code", None);
        assert_eq!(reason, "Usage limit of claude-code reached");
        assert!(release.ends_with('.') && !reason.ends_with('.'));
        assert!(full.starts_with("Usage limit of claude-code reached. "));
        assert_eq!(
            usage_limit("claude-code", Some(Some("opus"))).0,
            "Usage limit of claude-code on opus reached"
        );
        assert_eq!(
            usage_limit("claude-code", Some(None)).0,
            "Usage limit of claude-code on its default model reached"
        );
        let (reason, release, _) = agent_auth_failed("claude-code");
        assert_eq!(reason, "claude-code is not logged in");
        assert!(release.contains("workflow file is saved"));
        let words = attention_agent_auth("claude-code", "not logged in");
        assert!(words.why.contains("log the agent's CLI in"));
        assert_eq!(
            run_error("usage_limited: usage limit reached", None),
            "The agent provider refused the session because the account's usage limit is reached."
        );
    }

    #[test]
    fn run_errors_read_as_plain_sentences() {
        assert_eq!(
            run_error("cancelled: stall", Some(0)),
            "The agent sent no event within the stall timeout, so Sortie stopped the run."
        );
        assert_eq!(
            run_error("cancelled: budget: used_tokens=155 max_tokens=100", Some(0)),
            "Sortie stopped the run because the issue used 155 tokens, reaching its limit of 100."
        );
        assert_eq!(
            run_error(
                "cancelled: budget: used_tokens=1500000 max_tokens=1000000",
                None
            ),
            "Sortie stopped the run because the issue used 1.5M tokens, reaching its limit of 1M."
        );
        assert_eq!(
            run_error("cancelled: shutdown", Some(0)),
            "Sortie stopped the session before the agent finished turn 1."
        );
        assert_eq!(
            run_error("cancelled: reconcile", Some(2)),
            "The issue reached a terminal or inactive state, so Sortie stopped the run."
        );
        assert_eq!(
            run_error("turn_failed: error_during_execution: it broke", Some(0)),
            "The agent's turn failed: error_during_execution: it broke."
        );
        assert_eq!(
            run_error("turn_timeout: turn cancelled: turn_timeout", Some(0)),
            "The turn ran past the turn timeout, so Sortie stopped the run."
        );
        assert_eq!(
            run_error("hook_failed: ", None),
            "The before_run hook failed."
        );
        assert_eq!(
            run_error("interrupted: sortie restarted", Some(0)),
            "interrupted: sortie restarted"
        );
        assert_eq!(
            retry_error("worker exited: port_exit: non-zero exit (code 3)"),
            "The agent process exited before the turn ended: non-zero exit (code 3)."
        );
        assert_eq!(
            retry_error("stall timeout exceeded"),
            "The agent sent no event within the stall timeout, so Sortie stopped the run."
        );
        assert_eq!(
            retry_error("no available orchestrator slots"),
            "no available orchestrator slots"
        );
        assert_eq!(
            retrying(2, 10_000, "error", Some("worker exited: turn_failed: boom")).full,
            "The agent's turn failed: boom. Retry 2 in 10s."
        );
    }

    #[test]
    fn budget_rows() {
        assert_eq!(
            budget("session_budget", 3, 3),
            Pair::new(
                "Held: session budget reached",
                "Held at the session budget of 3. Sessions used: 3."
            )
        );
        assert_eq!(
            budget("token_budget", 512_000, 500_000).full,
            "Held at the token budget of 500K. Tokens used: 512K."
        );
    }

    #[test]
    fn parked_rows() {
        assert_eq!(
            parked("agent_blocked", "needs-human"),
            Pair::new(
                "Parked: the agent needs a person",
                "Parked: the agent stopped because it cannot go on without a person. Parking label: `needs-human`."
            )
        );
        assert_eq!(
            parked("handoff_absence", "x").short,
            "Parked: no evidence of work"
        );
    }

    #[test]
    fn held_rows() {
        let (r, rel, full) = blocked_by(&[BlockerWords {
            identifier: "MT-655",
            state: "In Progress",
        }]);
        assert_eq!(r, "Blocked by MT-655 (In Progress)");
        assert_eq!(rel, "Released when the blocker reaches a terminal state.");
        assert_eq!(
            full,
            "Blocked by MT-655 (In Progress). Sortie dispatches the issue once the blocker reaches a terminal state."
        );
        let (r, _, _) = slots_full(None, 2, 2);
        assert_eq!(r, "All 2 agent slots are in use");
        let (r, _, _) = slots_full(Some("To Do"), 1, 1);
        assert_eq!(r, "All 1 agent slots for To Do are in use");
        // A session ended after the pass: the served running list shows a free slot.
        let (r, rel, full) = slots_full(None, 1, 2);
        assert_eq!(r, "All 2 agent slots were in use at the last poll");
        assert_eq!(rel, "Released at the next poll: a slot is free now.");
        assert!(
            full.ends_with("Sortie dispatches the issue at the next poll."),
            "{full}"
        );
    }

    #[test]
    fn attention_sentences() {
        let w = attention_parked(ParkReason::AgentBlocked, "needs-human", "In Progress");
        assert_eq!(w.reason, "Parked: the agent needs a person");
        assert_eq!(
            w.why,
            "The agent stopped because it cannot go on without a person, so Sortie parked the issue under the label `needs-human`."
        );
        assert_eq!(
            w.clears,
            "Clears when a poll tick finds `needs-human` removed from the issue, or the issue moved out of In Progress."
        );
        let w = attention_budget(BudgetReason::Session, 3, 3);
        assert_eq!(w.reason, "Session budget reached");
        assert_eq!(w.why, "The issue has used 3 sessions of its budget of 3.");
        assert_eq!(
            w.clears,
            "Clears on the next poll tick after `agent.max_sessions` is raised above 3 or is removed, or after the issue leaves the active tracker states."
        );
        let w = attention_workflow("WORKFLOW.md", "config: bad");
        assert_eq!(w.reason, "WORKFLOW.md failed to load");
        assert_eq!(
            w.why,
            "WORKFLOW.md failed to load (config: bad), so poll ticks dispatch nothing until it loads, and the configuration that last loaded stays in effect."
        );
        assert_eq!(attention_preflight("x").reason, "Dispatch preflight failed");
    }

    #[test]
    fn poll_summary_sentences() {
        assert_eq!(
            poll_summary(None, 0, None),
            "Sortie has not polled the tracker yet."
        );
        assert_eq!(
            poll_summary(Some("ok"), 0, None),
            "The latest poll read the tracker without an error."
        );
        assert_eq!(
            poll_summary(Some("preflight_failed"), 1, Some(32_000)),
            "The latest poll stopped at the dispatch preflight before reading the tracker; the last successful poll was 32s ago."
        );
        assert_eq!(
            poll_summary(Some("tracker_failed"), 2, None),
            "The latest poll could not read the tracker (2 polls in a row failed); no poll has succeeded since Sortie started."
        );
    }

    #[test]
    fn a_slow_tracker_shows_in_the_poll_summary() {
        assert_eq!(poll_waiting(None, 0), "");
        assert_eq!(poll_waiting(Some(1_000), 0), "");
        assert_eq!(
            poll_waiting(Some(42_000), 2),
            " The tracker has not answered the current poll for 42s. 2 poll ticks were skipped while reads were out."
        );
        assert_eq!(
            poll_waiting(None, 1),
            " 1 poll tick was skipped while reads were out."
        );
    }

    #[test]
    fn history_and_outcome_texts() {
        assert_eq!(
            history(Some("handed_off"), "Human Review"),
            Pair::new(
                "Handed off to Human Review",
                "Handed off: Sortie moved the issue to Human Review."
            )
        );
        assert_eq!(history(None, "").full, "Not active; no ending recorded.");
        assert_eq!(retry_due_now(3, "MT-650"), "Retry 3 of MT-650 is due now.");
        assert_eq!(
            acknowledged(false, Some("MT-652"), "Parked: the agent needs a person"),
            "Acknowledged MT-652 (Parked: the agent needs a person). It comes back only if a new cause appears."
        );
        assert_eq!(
            acknowledged(true, None, "Dispatch preflight failed"),
            "Already acknowledged: Dispatch preflight failed. It comes back only if a new cause appears."
        );
    }
}
