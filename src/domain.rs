//! Tracker-neutral domain types shared by every layer (no I/O here).

pub mod contract;
pub mod stage;

use serde::{Deserialize, Serialize};

/// A setting an adapter kind cannot run without, found missing or wrong before anything is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    /// Dotted field the problem is about, e.g. `tracker.api_key`.
    pub field: String,
    pub message: String,
}

impl SettingProblem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        SettingProblem {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A comment on an issue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Comment {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub author: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub created_at: String,
}

/// A reference to another issue (parent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IssueRef {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub identifier: String,
}

/// An issue that blocks this one. An empty `state` means "not known to be resolved": it blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BlockerRef {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub identifier: String,
    #[serde(default)]
    pub state: String,
}

/// How much of an issue's blocker list the tracker returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BlockersRead {
    /// `blocked_by` is authoritative (possibly empty).
    #[default]
    Complete,
    /// Not read with the listing: a separate read resolves it.
    Unread,
    /// The tracker marked the list incomplete and nothing can complete it.
    Incomplete,
}

/// The normalized issue every tracker adapter produces, whatever the tracker. The snake_case
/// field names are also the keys of `.issue` in prompt templates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Issue {
    /// Stable internal key (Jira numeric id, GitHub number, file `id`).
    pub id: String,
    /// Human key (`PROJ-123`); also the workspace directory name (sanitized).
    pub identifier: String,
    /// Qualified key when the identifier alone is ambiguous; empty when the identifier is enough.
    #[serde(default)]
    pub display_identifier: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// Original casing kept; compare with [`state_eq`].
    pub state: String,
    /// Lower is more urgent; only true integers count.
    #[serde(default)]
    pub priority: Option<i64>,
    #[serde(default)]
    pub branch_name: String,
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub assignee: String,
    #[serde(default)]
    pub issue_type: String,
    /// Lowercased, tracker order.
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub parent: Option<IssueRef>,
    /// `None` = not fetched; `Some(vec![])` = fetched, none.
    #[serde(default)]
    pub comments: Option<Vec<Comment>>,
    #[serde(default)]
    pub blocked_by: Vec<BlockerRef>,
    /// Whether `blocked_by` is the whole list: trackers whose listing cannot carry blockers
    /// leave it `Unread` for the dispatch pass to read (within its per-pass budget).
    #[serde(skip)]
    pub blockers_read: BlockersRead,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
}

impl Issue {
    /// The orchestrator only dispatches issues that carry these four fields.
    pub fn is_dispatchable_shape(&self) -> bool {
        !self.id.is_empty()
            && !self.identifier.is_empty()
            && !self.title.is_empty()
            && !self.state.is_empty()
    }
}

/// The form states are compared and keyed by: trimmed and lower-cased, so `" To Do "` and
/// `to do` are the same state everywhere (per-state caps, collision checks, matching).
pub fn state_key(s: &str) -> String {
    s.trim().to_lowercase()
}

/// Tracker states compare case-insensitively (after trimming). Two ASCII states (nearly all)
/// compare without allocating: a poll compares every candidate's state this way.
pub fn state_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    state_key(a) == state_key(b)
}

/// The order candidates are dispatched in: priority ascending (none last), then `created_at`
/// oldest first (empty last), then identifier. Trackers that hand out a sorted list use it.
pub fn dispatch_order(a: &Issue, b: &Issue) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let pri = match (a.priority, b.priority) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    let created = match (a.created_at.is_empty(), b.created_at.is_empty()) {
        (false, false) => a.created_at.cmp(&b.created_at),
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        (true, true) => Ordering::Equal,
    };
    pri.then(created)
        .then_with(|| a.identifier.cmp(&b.identifier))
}

/// True when `state` is one of `states` (case-insensitive).
pub fn state_in(state: &str, states: &[String]) -> bool {
    states.iter().any(|s| state_eq(s, state))
}

/// A word of one of the wire vocabularies that is not in it (read back from SQLite or a
/// request): names the vocabulary and the word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownWord {
    pub vocabulary: &'static str,
    pub word: String,
}

impl std::fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown {} {:?}", self.vocabulary, self.word)
    }
}

impl std::error::Error for UnknownWord {}

/// Declares a closed vocabulary whose words are stored in SQLite and served by the API: the
/// enum, its one `as_str` (the wire text), `FromStr` for reading it back, `Display`, serde and
/// the JSON Schema (a string enum) through the same text, so the text is spelled exactly once.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Every word's text, in declaration order (metric label sets, schema enums).
            pub const WORDS: &'static [&'static str] = &[$($text),+];

            /// The text stored and served for this word.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownWord;

            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|w| w.as_str() == s)
                    .ok_or_else(|| UnknownWord {
                        vocabulary: stringify!($name),
                        word: s.to_string(),
                    })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string", "enum": [$($text),+]})
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

vocabulary! {
    /// What queued a retry (`retry_entries.retry_trigger`, the API's retry `trigger`).
    RetryTrigger {
        /// The session ended normally and the issue is still active.
        Continuation = "continuation",
        /// The run failed with a retryable error (or its agent could not be spawned).
        Error = "error",
        /// The agent sent no event within the stall timeout.
        Stall = "stall",
        /// A due retry could not start and went back in the queue.
        Timer = "timer",
        /// The provider refused the run because its usage limit was reached; the retry is due
        /// at the reset, or at the end of the ordinary failure backoff when that is later.
        UsageLimit = "usage_limit",
        /// A retry that fixes a failed CI check. This build does not schedule it; kept so a
        /// row another Sortie build wrote still reads back.
        CiFix = "ci_fix",
    }
}

vocabulary! {
    /// Why a due retry went back in the queue; stored as the retry's error text, and the API
    /// words each one in plain language.
    RescheduleReason {
        NoSlots = "no available orchestrator slots",
        WorkerStillRunning = "worker still running",
        IssueFetchFailed = "retry issue fetch failed",
        /// The database is not taking writes (or a budget read failed): nothing is dispatched.
        DatabaseFailing = "database not writable",
        /// Named by the API's wording; this build's trackers never produce it.
        NoStateLabel = "issue without a state label",
        /// Every SSH host is at its session limit.
        NoSshHosts = "no available SSH hosts",
        /// Another claimed issue has the same identifier (one workspace per identifier).
        IdentifierInUse = "identifier in use by another issue",
        /// The agent kind is held by a usage limit that has not reset yet; the retry is due at
        /// the reset.
        UsageLimit = "agent usage limit not reset",
        /// A spend window holds dispatch; the retry checks again after its failure backoff,
        /// or at the window's reset when that comes first.
        SpendCeiling = "spend ceiling reached",
        /// A reaction's retry whose issue a blocker in a non-terminal state holds.
        ReactionPausedByBlocker = "reaction retry paused by an open blocking issue",
        /// A reaction's retry whose issue is neither active nor in the handoff state.
        ReactionPausedByState = "reaction retry paused by issue state",
        /// The adapter of the retry's agent kind failed to start.
        AgentKindUnavailable = "retry agent kind unavailable",
        /// The agent settings in force for the retry fail an error-severity check.
        AgentSettingsRefused = "retry agent settings refused",
    }
}

impl RescheduleReason {
    /// Whether putting a retry back for this reason advances its attempt (and so its backoff):
    /// waiting on the previous run's end or on a state label is not a new try; every reason
    /// the API's table lists otherwise is. The reasons it does not list (this build's own:
    /// database, identifier, usage limit, spend ceiling) keep the attempt, as they always did.
    pub const fn advances_attempt(self) -> bool {
        match self {
            RescheduleReason::WorkerStillRunning
            | RescheduleReason::NoStateLabel
            | RescheduleReason::DatabaseFailing
            | RescheduleReason::IdentifierInUse
            | RescheduleReason::UsageLimit
            | RescheduleReason::SpendCeiling => false,
            RescheduleReason::IssueFetchFailed
            | RescheduleReason::ReactionPausedByBlocker
            | RescheduleReason::ReactionPausedByState
            | RescheduleReason::NoSlots
            | RescheduleReason::NoSshHosts
            | RescheduleReason::AgentKindUnavailable
            | RescheduleReason::AgentSettingsRefused => true,
        }
    }
}

vocabulary! {
    /// Which per-issue budget holds an issue.
    BudgetReason {
        Session = "session_budget",
        Token = "token_budget",
        /// `agent.max_cost_usd`: the issue's estimated cost reached its ceiling.
        Money = "money_budget",
    }
}

vocabulary! {
    /// Why an issue is parked until a person acts (`parked_issues.reason`).
    ParkReason {
        /// The agent declared itself blocked.
        AgentBlocked = "agent_blocked",
        /// Runs kept ending without evidence of work.
        HandoffAbsence = "handoff_absence",
    }
}

vocabulary! {
    /// An instance-wide spend window: the UTC calendar day, the UTC week from Monday, the UTC
    /// calendar month (the members of the state document's `spend_ceiling`).
    SpendWindow {
        Daily = "daily",
        Weekly = "weekly",
        Monthly = "monthly",
    }
}

vocabulary! {
    /// The hold reason of a spend window that holds dispatch (`hold.reason`, and the
    /// `spend_ceiling_reached` item's `evidence.reason`).
    SpendCeilingReason {
        Daily = "daily_spend_ceiling",
        Weekly = "weekly_spend_ceiling",
        Monthly = "monthly_spend_ceiling",
    }
}

vocabulary! {
    /// Why a dispatch pass held an issue back: the API's `hold.reason`, the `reason` label of
    /// `sortie_candidate_holds_total`. A new hold is one line here plus, for a converted
    /// feature, the `FeatureHold` its gate returns (else a variant of the orchestrator's
    /// `HoldReason`); the metric label set and the OpenAPI enum follow from it.
    HoldCode {
        BlockedBy = "blocked_by",
        BlockersUnresolved = "blockers_unresolved",
        BlockersNotRead = "blockers_not_read",
        BlockersIncomplete = "blockers_incomplete",
        AgentSlotsFull = "agent_slots_full",
        SshHostsFull = "ssh_hosts_full",
        WorkspaceLocked = "workspace_locked",
        IdentifierInUse = "identifier_in_use",
        UsageLimit = "usage_limit",
        AgentAuthFailed = "agent_auth_failed",
        DailySpendCeiling = "daily_spend_ceiling",
        WeeklySpendCeiling = "weekly_spend_ceiling",
        MonthlySpendCeiling = "monthly_spend_ceiling",
        StageHopUnconfirmed = "stage_hop_unconfirmed",
        ParkCommentsUnread = "park_comments_unread",
        FailureHeld = "failure_held",
    }
}

impl From<SpendCeilingReason> for HoldCode {
    fn from(r: SpendCeilingReason) -> Self {
        match r {
            SpendCeilingReason::Daily => HoldCode::DailySpendCeiling,
            SpendCeilingReason::Weekly => HoldCode::WeeklySpendCeiling,
            SpendCeilingReason::Monthly => HoldCode::MonthlySpendCeiling,
        }
    }
}

impl SpendWindow {
    /// The hold reason this window gives the issues it holds.
    pub const fn hold_reason(self) -> SpendCeilingReason {
        match self {
            SpendWindow::Daily => SpendCeilingReason::Daily,
            SpendWindow::Weekly => SpendCeilingReason::Weekly,
            SpendWindow::Monthly => SpendCeilingReason::Monthly,
        }
    }

    /// The setting that raises the window's ceiling.
    pub const fn config_key(self) -> &'static str {
        match self {
            SpendWindow::Daily => "agent.max_daily_cost_usd",
            SpendWindow::Weekly => "agent.max_weekly_cost_usd",
            SpendWindow::Monthly => "agent.max_monthly_cost_usd",
        }
    }
}

vocabulary! {
    /// A pull-request reaction kind (a `pending_reactions` row's `kind`, a retry's
    /// `reaction_kind`), in the reference's sort order for rows of one issue.
    ReactionKind {
        /// CI checks failing on the pull request's head.
        Ci = "ci",
        /// Actionable review comments from people.
        Review = "review",
        /// Actionable review comments from the configured bot accounts.
        BotReview = "bot-review",
        /// Merge the pull request once it is mergeable (and CI passes, if required).
        Merge = "merge",
        /// The pull request conflicts with its base.
        MergeConflict = "merge-conflict",
        /// A person added the review label.
        LabelReview = "label-review",
        /// A person added the fix label.
        LabelFix = "label-fix",
        /// The pull request merged: move the issue to its target state.
        MergeCompletion = "merge-completion",
    }
}

impl ReactionKind {
    /// The key under `reactions` in WORKFLOW.md that configures the kind.
    pub const fn config_key(self) -> &'static str {
        match self {
            ReactionKind::Ci => "ci_failure",
            ReactionKind::Review => "review_comments",
            ReactionKind::BotReview => "bot_review",
            ReactionKind::Merge => "auto_merge",
            ReactionKind::MergeConflict => "merge_conflicts",
            ReactionKind::LabelReview | ReactionKind::LabelFix => "label_commands",
            ReactionKind::MergeCompletion => "merge_completion",
        }
    }

    /// Whether the kind dispatches agent runs (fix, rebase or label sessions).
    pub const fn dispatches_runs(self) -> bool {
        !matches!(self, ReactionKind::Merge | ReactionKind::MergeCompletion)
    }

    /// Whether the kind can escalate (label commands never do).
    pub const fn escalates(self) -> bool {
        !matches!(self, ReactionKind::LabelReview | ReactionKind::LabelFix)
    }
}

vocabulary! {
    /// Why a pending reaction waits for its next check (`pending_reactions[].wait`).
    ReactionWait {
        PollInterval = "poll_interval",
        Debounce = "debounce",
        Backoff = "backoff",
        RetrySlot = "retry_slot",
        Triage = "triage",
    }
}

vocabulary! {
    /// Why a reaction's standing escalation began (`escalation_trigger`).
    EscalationTrigger {
        BudgetExhausted = "budget_exhausted",
        Triage = "triage",
        Refused = "refused",
        MissingMergeCommit = "missing_merge_commit",
    }
}

vocabulary! {
    /// How a reaction escalates (`reactions.<key>.escalation`); unset reads `none`.
    EscalationMode {
        Label = "label",
        Comment = "comment",
        None = "none",
    }
}

vocabulary! {
    /// A CI verdict over a pull request head's check runs (`last_check.status`).
    CiStatus {
        Passing = "passing",
        Pending = "pending",
        Failing = "failing",
    }
}

vocabulary! {
    /// How an issue's latest work ended (`issue_outcomes.kind`).
    OutcomeKind {
        HandedOff = "handed_off",
        Terminal = "terminal",
        Merged = "merged",
    }
}

vocabulary! {
    /// The status of a finished run (`run_history.status`).
    RunStatus {
        Succeeded = "succeeded",
        Failed = "failed",
        Cancelled = "cancelled",
        /// A recorded CI result, not an agent session.
        CiFailed = "ci_failed",
        NeedsPerson = "needs_person",
        BudgetStopped = "budget_stopped",
        /// The provider refused the session for a usage limit, with a reset time, before the
        /// agent produced output.
        UsageLimited = "usage_limited",
    }
}

vocabulary! {
    /// How the latest poll tick ended.
    PollOutcome {
        Ok = "ok",
        /// The dispatch preflight failed, so the tracker was not read.
        PreflightFailed = "preflight_failed",
        TrackerFailed = "tracker_failed",
    }
}

vocabulary! {
    /// Why a run has no token figure (`run_history.unmeasured_cause`).
    UnmeasuredCause {
        /// The agent reported amounts and no token figure.
        AmountsOnly = "amounts_only",
        /// The run did not succeed and ended without a usage report.
        EndedEarly = "ended_early",
        /// The run succeeded and its agent sent no usage.
        NoUsage = "no_usage",
        /// The run was recorded before the cause was kept.
        Unknown = "unknown",
    }
}

impl RunStatus {
    /// Why a run of this status that received no usage report has no token figure.
    pub const fn unmeasured_cause(self) -> UnmeasuredCause {
        match self {
            RunStatus::Succeeded => UnmeasuredCause::NoUsage,
            RunStatus::Failed
            | RunStatus::Cancelled
            | RunStatus::CiFailed
            | RunStatus::NeedsPerson
            | RunStatus::BudgetStopped
            | RunStatus::UsageLimited => UnmeasuredCause::EndedEarly,
        }
    }

    /// Whether the run was an agent session: a recorded CI result is not, so budgets and the
    /// session counters leave it out.
    pub const fn is_session(self) -> bool {
        match self {
            RunStatus::CiFailed => false,
            RunStatus::Succeeded
            | RunStatus::Failed
            | RunStatus::Cancelled
            | RunStatus::NeedsPerson
            | RunStatus::BudgetStopped
            | RunStatus::UsageLimited => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_compare_case_insensitively() {
        assert!(state_eq("In Progress", "in progress "));
        assert_eq!(state_key(" To Do "), "to do");
        assert!(state_in("DONE", &["Done".to_string()]));
        assert!(!state_in("Done", &[]));
    }

    #[test]
    fn reschedule_reasons_are_the_api_table_words_with_its_attempt_rule() {
        use RescheduleReason as R;
        let table = [
            (R::WorkerStillRunning, "worker still running", false),
            (R::NoStateLabel, "issue without a state label", false),
            (R::IssueFetchFailed, "retry issue fetch failed", true),
            (
                R::ReactionPausedByBlocker,
                "reaction retry paused by an open blocking issue",
                true,
            ),
            (
                R::ReactionPausedByState,
                "reaction retry paused by issue state",
                true,
            ),
            (R::NoSlots, "no available orchestrator slots", true),
            (R::NoSshHosts, "no available SSH hosts", true),
            (
                R::AgentKindUnavailable,
                "retry agent kind unavailable",
                true,
            ),
            (
                R::AgentSettingsRefused,
                "retry agent settings refused",
                true,
            ),
        ];
        for (reason, word, advances) in table {
            assert_eq!(reason.as_str(), word);
            assert_eq!(word.parse::<R>(), Ok(reason));
            assert_eq!(reason.advances_attempt(), advances, "{word}");
        }
    }

    #[test]
    fn vocabulary_words_round_trip_and_unknown_words_are_typed_errors() {
        for t in RetryTrigger::ALL {
            assert_eq!(t.as_str().parse::<RetryTrigger>(), Ok(*t));
        }
        assert_eq!(RunStatus::BudgetStopped.as_str(), "budget_stopped");
        assert_eq!(
            serde_json::to_string(&ParkReason::AgentBlocked)
                .ok()
                .as_deref(),
            Some("\"agent_blocked\"")
        );
        let schema = schemars::schema_for!(BudgetReason);
        assert_eq!(
            schema.get("enum"),
            Some(&serde_json::json!([
                "session_budget",
                "token_budget",
                "money_budget"
            ]))
        );
        let e = "nope".parse::<OutcomeKind>();
        assert_eq!(
            e,
            Err(UnknownWord {
                vocabulary: "OutcomeKind",
                word: "nope".into()
            })
        );
    }
}
