//! A `running[]` row: one live session with its token, budget and stall figures.

use schemars::JsonSchema;
use serde::Serialize;

use crate::agent::{UsageArrival, UsageAttribution};
use crate::orchestrator::self_review::progress::ReviewProgress;
use crate::orchestrator::snapshot::{ConfigView, RunningRow};
pub use crate::pricing::CostStatus;
use crate::pricing::{IssueCostParts, RunPrice};
use crate::store::IssueSpend;

use super::super::wording;
use super::stage::{RouteNames, StageLineageView, StagePosition, Stages, lineage};
use super::tokens::TokensView;
use super::{IssueFields, Null, Sentences, nonempty, opt_ts, ts};

/// How an agent kind reports token usage (`""` when the kind is not registered).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalName {
    Incremental,
    TurnEnd,
    None,
    #[serde(rename = "")]
    Unknown,
}

impl ArrivalName {
    pub fn of(a: Option<UsageArrival>) -> ArrivalName {
        match a {
            Some(UsageArrival::Incremental) => ArrivalName::Incremental,
            Some(UsageArrival::TurnEnd) => ArrivalName::TurnEnd,
            Some(UsageArrival::None) => ArrivalName::None,
            None => ArrivalName::Unknown,
        }
    }
}

/// What a reported figure covers (`""` when the kind is not registered).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AttributionName {
    PerModel,
    SessionTotal,
    None,
    #[serde(rename = "")]
    Unknown,
}

impl AttributionName {
    fn of(a: Option<UsageAttribution>) -> AttributionName {
        match a {
            Some(UsageAttribution::PerModel) => AttributionName::PerModel,
            Some(UsageAttribution::SessionTotal) => AttributionName::SessionTotal,
            Some(UsageAttribution::None) => AttributionName::None,
            None => AttributionName::Unknown,
        }
    }
}

/// The agent kind a session runs: its route's, or the workflow-wide one for a session whose
/// route was not resolved.
pub fn session_kind<'a>(r: &'a RunningRow, cfg: &'a ConfigView) -> &'a str {
    if r.route.agent_kind.is_empty() {
        &cfg.agent_kind
    } else {
        &r.route.agent_kind
    }
}

/// The usage arrival of an agent kind.
pub fn usage_arrival_of(kind: &str) -> ArrivalName {
    ArrivalName::of(crate::registry::caps_for_kind(kind).map(|c| c.usage_arrival))
}

/// The token facts of a running row that other parts (totals, sentences) need too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowUsage {
    pub measured: bool,
    pub awaited: bool,
}

pub fn row_usage(r: &RunningRow, agent_kind: &str) -> RowUsage {
    let arrival = crate::registry::caps_for_kind(agent_kind).map(|c| c.usage_arrival);
    let reports = matches!(
        arrival,
        Some(UsageArrival::Incremental) | Some(UsageArrival::TurnEnd)
    );
    let measured = reports && r.tokens_measured;
    RowUsage {
        measured,
        awaited: reports && !measured && r.turns_without_figure == 0,
    }
}

/// A `running[]` entry.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "RunningRow")]
pub struct RunningView {
    #[serde(flatten)]
    pub issue: IssueFields,
    #[serde(flatten)]
    pub sentences: Sentences,
    pub dispatch_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub turn_count: u32,
    /// True while the current turn has printed nothing for `agent.read_timeout_ms` or longer
    /// (the agent may be starting slowly, or unable to reach its provider).
    pub waiting_for_first_output: bool,
    /// True while the session is in its self-review phase.
    pub self_review_active: bool,
    /// Iterations completed in the current phase; 0 outside it.
    pub self_review_iteration: u32,
    pub last_event: Option<String>,
    pub last_message: String,
    pub started_at: String,
    pub dispatched_at: String,
    pub last_event_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_path: Option<String>,
    /// The SSH host the session runs on; absent for a session on this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_host: Option<String>,
    pub tokens: TokensView,
    pub uncached_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The dispatch rule that routed the session; absent when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    pub stage_lineage: Option<StageLineageView>,
    pub stage_position: Option<StagePosition>,
    /// The model the attempt's resolved settings carry; absent for the runtime's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_kind: Option<String>,
    /// Connections the session's sandbox refused (`worker.sandbox.network: allowlist`) in
    /// this daemon's life; absent while there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_denied_connections: Option<u64>,
    #[serde(flatten)]
    pub reaction: RunReactionView,
    #[serde(flatten)]
    pub usage: UsageView,
    #[serde(flatten)]
    pub spend: IssueFigures,
    #[serde(flatten)]
    pub stall: StallView,
}

/// The pull-request reaction a session (or a queued retry) continues: every member is absent
/// when it continues none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RunReactionView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_kind: Option<crate::domain::ReactionKind>,
    /// The `reactions` key of WORKFLOW.md that configures the kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_config_key: Option<String>,
    /// Which try of its reaction the session is; absent for label commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<super::pending_reaction::PullRequestKey>,
}

impl RunReactionView {
    pub fn of(r: Option<&crate::orchestrator::reactions::RunReaction>) -> RunReactionView {
        let Some(r) = r else {
            return RunReactionView::default();
        };
        RunReactionView {
            reaction_kind: Some(r.kind),
            reaction_config_key: Some(r.kind.config_key().to_string()),
            reaction_attempt: r.attempt,
            pull_request: Some(super::pending_reaction::PullRequestKey::of(&r.pr)),
        }
    }
}

/// How the session's usage is reported.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UsageView {
    pub api_request_count: Option<u64>,
    /// Requests per model (`""` for figures that named none); absent while requests are not
    /// measured, for a kind whose figures are not per model, and while empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_by_model: Option<std::collections::BTreeMap<String, u64>>,
    pub tool_time_percent: Null,
    pub api_time_percent: Null,
    pub tokens_measured: bool,
    pub usage_arrival: ArrivalName,
    pub usage_attribution: AttributionName,
    pub tokens_pending: bool,
    pub tokens_awaited: bool,
    pub api_requests_measured: bool,
}

/// Issue-level figures: completed sessions from run history plus this session.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct IssueFigures {
    pub used_sessions: Option<u64>,
    pub budget_sessions: Option<u64>,
    pub issue_tokens_completed: Option<u64>,
    pub unmeasured_sessions: Option<u64>,
    pub used_tokens: Option<u64>,
    pub used_tokens_complete: bool,
    pub budget_tokens: Option<u64>,
    pub budget_usd: Option<f64>,
    /// The session's spend so far priced under the rates in force; non-null exactly when
    /// `cost_status` is `estimated` or `partial`.
    pub estimated_cost_usd: Option<f64>,
    pub cost_status: CostStatus,
    /// The costs recorded with the issue's completed sessions plus this session's estimate.
    pub issue_estimated_cost_usd: Option<f64>,
    pub issue_cost_status: CostStatus,
}

/// When the session reads as quiet and when it is stopped as stalled, with the sentences.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StallView {
    pub quiet_at: Option<String>,
    pub stall_at: Option<String>,
    pub stall_text: Option<String>,
    pub stall_text_full: Option<String>,
    /// Set exactly when stall detection is off.
    pub stall_off_text: Option<String>,
}

impl RunningView {
    /// `price` is the session's live price, `None` when it was not priced; `review` its
    /// self-review progress (`Snapshot::self_review_of`).
    pub fn build(
        r: &RunningRow,
        review: ReviewProgress,
        cfg: &ConfigView,
        spend: Option<IssueSpend>,
        price: Option<&RunPrice>,
        now_ms: i64,
        stages: &Stages<'_>,
    ) -> RunningView {
        let kind = session_kind(r, cfg);
        let caps = crate::registry::caps_for_kind(kind);
        let arrival = caps.map(|c| c.usage_arrival);
        let usage = row_usage(r, kind);
        let names = RouteNames::of(&r.route, cfg);
        let position = stages.of_route(&r.route, &r.issue.id);
        let tokens = r.measured_tokens().filter(|_| usage.measured);
        let requests_measured = arrival == Some(UsageArrival::Incremental)
            && (r.api_request_count > 0 || (r.turn == 0 && !r.tokens_measured));
        let per_model = caps.map(|c| c.usage_attribution) == Some(UsageAttribution::PerModel);
        let requests_by_model =
            (requests_measured && per_model && !r.by_model.is_empty()).then(|| {
                r.by_model
                    .iter()
                    .map(|(model, part)| (model.clone(), part.requests))
                    .collect()
            });
        let waiting = review.waiting_for_first_output(r, cfg.read_timeout_ms, now_ms);
        RunningView {
            issue: IssueFields::of(&r.issue),
            // A running row names its stage only while it has a position.
            sentences: wording::running(
                r.turn,
                position.as_ref().map(|p| p.current.as_str()),
                waiting,
            )
            .into(),
            waiting_for_first_output: waiting,
            dispatch_id: r.dispatch_id.clone(),
            session_id: r.session_id.clone(),
            ssh_host: r.ssh_host.clone(),
            turn_count: r.turn,
            self_review_active: review.iteration.is_some(),
            self_review_iteration: review.iteration.unwrap_or(0),
            last_event: r.last_event_type.clone(),
            last_message: r.last_message.clone().unwrap_or_default(),
            started_at: ts(r.started_at_ms),
            dispatched_at: ts(r.dispatched_at_ms),
            last_event_at: opt_ts(r.last_event_at_ms),
            workspace_path: r.workspace_path.as_ref().map(|p| p.display().to_string()),
            tokens: TokensView::measured(tokens.map(|t| {
                [
                    t.input_tokens,
                    t.output_tokens,
                    t.total_tokens,
                    t.cache_read_tokens,
                    t.cache_write_tokens,
                ]
                .map(|n| n as i64)
            })),
            uncached_tokens: tokens.map(|t| t.uncached_tokens() as i64),
            model_name: r
                .reported_model
                .as_deref()
                .filter(|_| arrival != Some(UsageArrival::None))
                .and_then(nonempty),
            rule_name: names.rule_name,
            stage_lineage: lineage(&r.route),
            stage_position: position,
            configured_model: names.configured_model,
            workflow_file: nonempty(&cfg.workflow_file),
            agent_kind: names.agent_kind,
            sandbox_denied_connections: Some(crate::sandbox::denied_for(&r.issue.id, r.attempt))
                .filter(|n| *n > 0),
            reaction: RunReactionView::of(r.reaction.as_ref()),
            usage: UsageView {
                api_request_count: requests_measured.then_some(r.api_request_count),
                requests_by_model,
                tool_time_percent: Null,
                api_time_percent: Null,
                tokens_measured: usage.measured,
                usage_arrival: ArrivalName::of(arrival),
                usage_attribution: AttributionName::of(caps.map(|c| c.usage_attribution)),
                tokens_pending: arrival == Some(UsageArrival::TurnEnd)
                    && usage.measured
                    && !r.turn_had_usage,
                tokens_awaited: usage.awaited,
                api_requests_measured: requests_measured,
            },
            spend: IssueFigures::build(r, cfg, spend, price, usage),
            stall: StallView::build(r, review, cfg, now_ms),
        }
    }
}

impl IssueFigures {
    fn build(
        r: &RunningRow,
        cfg: &ConfigView,
        spend: Option<IssueSpend>,
        price: Option<&RunPrice>,
        usage: RowUsage,
    ) -> IssueFigures {
        let session_uncached = r
            .measured_tokens()
            .filter(|_| usage.measured)
            .map(|t| t.uncached_tokens())
            .unwrap_or(0);
        // Completed sessions that were all unmeasured or lower bounds have no figure.
        let completed = spend.and_then(|s| {
            if s.uncached == 0 && (s.unmeasured > 0 || s.lower_bound > 0) {
                None
            } else {
                Some(s.uncached)
            }
        });
        let complete = spend.is_some_and(|s| s.unmeasured == 0 && s.lower_bound == 0)
            && usage.measured
            && r.turns_without_figure == 0;
        let sum = spend.map(|s| s.uncached).unwrap_or(0) + session_uncached;
        let unmeasured = sum == 0 && !complete;
        let (cost, status) = match price {
            _ if !usage.measured => (None, CostStatus::Unmeasured),
            Some(p) => (p.cost_usd, p.status),
            None => (None, CostStatus::Unpriced),
        };
        let mut issue = IssueCostParts {
            tokens_complete: complete,
            tokens_known: !unmeasured,
            ..IssueCostParts::default()
        };
        if let Some(s) = spend {
            s.cost.add_to(&mut issue);
        }
        issue.add(
            status,
            cost,
            session_uncached > 0 || r.tokens.output_tokens > 0,
        );
        let (issue_cost, issue_status) = issue.total();
        IssueFigures {
            used_sessions: spend.map(|s| s.sessions),
            budget_sessions: cfg.max_sessions,
            issue_tokens_completed: completed,
            unmeasured_sessions: spend.map(|s| s.unmeasured),
            used_tokens: (!unmeasured).then_some(sum),
            used_tokens_complete: complete,
            budget_tokens: cfg.max_tokens,
            budget_usd: cfg.max_cost_usd,
            estimated_cost_usd: cost,
            cost_status: status,
            issue_estimated_cost_usd: issue_cost,
            issue_cost_status: issue_status,
        }
    }
}

impl StallView {
    fn build(r: &RunningRow, review: ReviewProgress, cfg: &ConfigView, now_ms: i64) -> StallView {
        let Some(stall) = cfg.stall_timeout_ms else {
            return StallView {
                quiet_at: None,
                stall_at: None,
                stall_text: None,
                stall_text_full: None,
                stall_off_text: Some(
                    "Stall detection is off; Sortie will not stop this session as stalled (`agent.stall_timeout_ms`)."
                        .into(),
                ),
            };
        };
        // The stall clock restarts at the first turn after self-review's own checks.
        let base = review.stall_base_ms(r);
        let quiet_at = base + (stall / 2) as i64;
        let (text, full) = if now_ms >= quiet_at {
            let silent = wording::duration(now_ms - base);
            let stops = wording::duration(stall as i64);
            (
                Some(format!(
                    "No events for {silent}; Sortie stops it after {stops}"
                )),
                Some(format!(
                    "The agent has sent no event for {silent}; Sortie stops the session as stalled after {stops} of silence."
                )),
            )
        } else {
            (None, None)
        };
        StallView {
            quiet_at: Some(ts(quiet_at)),
            stall_at: Some(ts(base + stall as i64)),
            stall_text: text,
            stall_text_full: full,
            stall_off_text: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::TokenUsage;
    use crate::domain::Issue;
    use serde_json::Value;

    fn row(tokens: Option<TokenUsage>, turn: u32, without_figure: u32) -> RunningRow {
        RunningRow {
            issue: Issue {
                id: "1".into(),
                identifier: "T-1".into(),
                ..Default::default()
            },
            dispatch_id: "ABC".into(),
            attempt: 0,
            started_at_ms: 0,
            turn_started_at_ms: 0,
            dispatched_at_ms: 0,
            last_event_at_ms: None,
            last_event_type: None,
            last_message: None,
            session_id: None,
            ssh_host: None,
            agent_pid: None,
            turn,
            tokens: tokens.unwrap_or_default(),
            tokens_measured: tokens.is_some(),
            api_request_count: u64::from(tokens.is_some()),
            turn_had_usage: tokens.is_some(),
            turns_without_figure: without_figure,
            reported_model: Some("m".into()),
            by_model: Default::default(),
            vendor_amounts: Default::default(),
            pending_cleanup: false,
            budget_stop: None,
            tokens_used_before: 0,
            usage_before: None,
            events: Default::default(),
            workspace_path: None,
            agent_group: None,
            live_row_written_at_ms: 0,
            live_row_dirty: false,
            cause: crate::orchestrator::state::DispatchCause::PollTick,
            reaction: None,
            review_metadata: None,
            route: Default::default(),
            hop_first: false,
        }
    }

    fn cfg() -> ConfigView {
        ConfigView {
            agent_kind: "mock".into(),
            max_sessions: Some(5),
            ..Default::default()
        }
    }

    fn running_row(r: &RunningRow, c: &ConfigView, s: Option<IssueSpend>, now: i64) -> Value {
        let hops = Default::default();
        let stages = Stages {
            dispatch: &c.dispatch,
            hop_counts: &hops,
        };
        let review = Default::default();
        super::super::to_value(&RunningView::build(r, review, c, s, None, now, &stages))
    }

    #[test]
    fn a_reaction_continuation_serves_its_reaction_members_and_others_none() {
        let keys = [
            "reaction_kind",
            "reaction_config_key",
            "reaction_attempt",
            "pull_request",
        ];
        let v = running_row(&row(None, 1, 0), &cfg(), None, 0);
        for k in keys {
            assert!(v.get(k).is_none(), "{k}");
        }
        let mut r = row(None, 1, 0);
        let pr = crate::scm::PullRequestRef {
            owner: "acme".into(),
            repo: "web".into(),
            number: 936,
        };
        r.reaction = Some(crate::orchestrator::reactions::RunReaction {
            kind: crate::domain::ReactionKind::Ci,
            attempt: Some(1),
            pr: pr.clone(),
        });
        let v = running_row(&r, &cfg(), None, 0);
        let got: serde_json::Map<String, Value> = keys
            .iter()
            .filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.clone())))
            .collect();
        assert_eq!(
            Value::Object(got),
            serde_json::json!({"reaction_kind": "ci", "reaction_config_key": "ci_failure", "reaction_attempt": 1, "pull_request": {"number": 936, "repository": "acme/web"}})
        );
        // A label command counts nothing: no attempt.
        r.reaction = Some(crate::orchestrator::reactions::RunReaction {
            kind: crate::domain::ReactionKind::LabelFix,
            attempt: None,
            pr,
        });
        let v = running_row(&r, &cfg(), None, 0);
        assert_eq!(v["reaction_config_key"], "label_commands");
        assert!(v.get("reaction_attempt").is_none());
        assert_eq!(v["pull_request"]["number"], 936);
    }

    #[test]
    fn unmeasured_row_serves_nulls_not_zeros() {
        let v = running_row(&row(None, 1, 0), &cfg(), None, 0);
        for k in [
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        ] {
            assert_eq!(v["tokens"][k], Value::Null, "{k}");
        }
        assert_eq!(v["uncached_tokens"], Value::Null);
        assert_eq!(v["tokens_measured"], false);
        assert_eq!(v["tokens_awaited"], true);
        assert_eq!(v["used_tokens"], Value::Null);
        assert_eq!(v["used_tokens_complete"], false);
        assert_eq!(v["used_sessions"], Value::Null);
        assert_eq!(v["cost_status"], "unmeasured");
        assert_eq!(v["api_request_count"], Value::Null);
        assert_eq!(v["api_requests_measured"], false);
        assert_eq!(v["budget_sessions"], 5);
        assert_eq!(v["budget_tokens"], Value::Null);
    }

    #[test]
    fn measured_row_adds_history_spend() {
        let t = TokenUsage::new(1000, 200, 300, 0);
        let spend = IssueSpend {
            sessions: 2,
            unmeasured: 0,
            uncached: 5000,
            lower_bound: 0,
            cost: Default::default(),
        };
        let v = running_row(&row(Some(t), 2, 0), &cfg(), Some(spend), 0);
        assert_eq!(v["tokens"]["total_tokens"], 1200);
        assert_eq!(v["uncached_tokens"], 900);
        assert_eq!(v["used_tokens"], 5900);
        assert_eq!(v["used_tokens_complete"], true);
        assert_eq!(v["issue_tokens_completed"], 5000);
        assert_eq!(v["used_sessions"], 2);
        assert_eq!(v["usage_arrival"], "incremental");
        assert_eq!(v["usage_attribution"], "per_model");
        assert_eq!(v["api_requests_measured"], true);
        assert_eq!(v["model_name"], "m");
        assert_eq!(v["cost_status"], "unpriced");
    }

    #[test]
    fn requests_by_model_only_while_requests_are_measured() {
        let t = TokenUsage::new(10, 0, 0, 0);
        let mut r = row(Some(t), 1, 0);
        let v = running_row(&r, &cfg(), None, 0);
        assert!(v.get("requests_by_model").is_none(), "empty breakdown");
        r.by_model.insert(
            "m".into(),
            crate::orchestrator::state::ModelSpend {
                tokens: t,
                requests: 1,
            },
        );
        let v = running_row(&r, &cfg(), None, 0);
        assert_eq!(v["requests_by_model"], serde_json::json!({"m": 1}));
        r.api_request_count = 0;
        let v = running_row(&r, &cfg(), None, 0);
        assert_eq!(v["api_requests_measured"], false);
        assert!(v.get("requests_by_model").is_none());
    }

    #[test]
    fn lower_bound_history_is_not_complete() {
        let t = TokenUsage::new(10, 0, 0, 0);
        let spend = IssueSpend {
            sessions: 1,
            unmeasured: 1,
            uncached: 0,
            lower_bound: 0,
            cost: Default::default(),
        };
        let v = running_row(&row(Some(t), 1, 0), &cfg(), Some(spend), 0);
        assert_eq!(v["issue_tokens_completed"], Value::Null);
        assert_eq!(v["used_tokens"], 10);
        assert_eq!(v["used_tokens_complete"], false);
    }

    #[test]
    fn stall_off_sentence_iff_no_quiet_at() {
        let v = running_row(&row(None, 1, 0), &cfg(), None, 0);
        assert_eq!(v["quiet_at"], Value::Null);
        assert!(v["stall_off_text"].is_string());
        let mut c = cfg();
        c.stall_timeout_ms = Some(300_000);
        let v = running_row(&row(None, 1, 0), &c, None, 200_000);
        assert_eq!(v["stall_off_text"], Value::Null);
        assert_eq!(
            v["stall_text"],
            "No events for 3m 20s; Sortie stops it after 5m"
        );
    }

    #[test]
    fn the_stall_clock_waits_out_self_review_checks_and_restarts_at_the_next_turn() {
        use crate::orchestrator::self_review::SelfReviewPhase;
        use crate::orchestrator::self_review::feature::SelfReviewFeature;
        let mut facts = row(None, 1, 0);
        let mut review = SelfReviewFeature::default();
        let id = facts.dispatch_id.clone();
        assert_eq!(review.progress(&id).stall_reference_ms(&facts), Some(0));
        review.report(&id, SelfReviewPhase::Started);
        review.report(&id, SelfReviewPhase::Checking);
        assert_eq!(
            review.progress(&id).stall_reference_ms(&facts),
            None,
            "no stall while sortie checks"
        );
        facts.turn_started(2, 90_000);
        review.turn_started(&id, 90_000);
        assert_eq!(
            review.progress(&id).stall_reference_ms(&facts),
            Some(90_000)
        );
        let (c, hops) = (cfg(), Default::default());
        let stages = Stages {
            dispatch: &c.dispatch,
            hop_counts: &hops,
        };
        let progress = review.progress(&id);
        let served = RunningView::build(&facts, progress, &c, None, None, 90_000, &stages);
        assert_eq!(
            (
                served.turn_count,
                served.self_review_active,
                served.self_review_iteration
            ),
            (2, true, 0)
        );
        review.report(&id, SelfReviewPhase::Iteration(1));
        assert_eq!(review.progress(&id).iteration, Some(1));
        let done = review.report(&id, SelfReviewPhase::Done(None));
        assert_eq!(review.progress(&id).iteration, None);
        assert!(
            matches!(
                done.as_slice(),
                [crate::orchestrator::core::effect::Effect::ReviewMetadata {
                    dispatch_id,
                    metadata: None
                }] if *dispatch_id == id
            ),
            "{done:?}"
        );
    }
}
