//! The rows of the state document (running, retrying, budget_exhausted, parked, held), shared
//! by `GET /api/v1/state` and `GET /api/v1/{identifier}`. Features this build does not have
//! (dispatch rules, stage chains, reactions, prices, SSH) serve the seed's empty or null form.

use serde_json::{Map, Value, json};

use crate::agent::{UsageArrival, UsageAttribution};
use crate::clock::rfc3339_ms;
use crate::domain::Issue;
use crate::orchestrator::dispatch_pass::{HoldReason, SlotScope};
use crate::orchestrator::snapshot::{
    BudgetRow, ConfigView, HeldRow, ParkedRow, RetryRow, RunningRow, Snapshot,
};

use super::wording::{self, BlockerWords};

pub fn ts(ms: i64) -> Value {
    Value::String(rfc3339_ms(ms))
}

pub fn opt_ts(ms: Option<i64>) -> Value {
    ms.map(ts).unwrap_or(Value::Null)
}

fn put_nonempty(m: &mut Map<String, Value>, key: &str, v: &str) {
    if !v.is_empty() {
        m.insert(key.into(), v.into());
    }
}

/// `issue_id`, `issue_identifier` and the tracker fields, each omitted when empty
/// (`issue_labels` always present).
pub fn issue_fields(issue: &Issue) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("issue_id".into(), issue.id.clone().into());
    m.insert("issue_identifier".into(), issue.identifier.clone().into());
    put_nonempty(&mut m, "issue_title", &issue.title);
    put_nonempty(&mut m, "issue_url", &issue.url);
    m.insert("issue_labels".into(), json!(issue.labels));
    put_nonempty(&mut m, "display_identifier", &issue.display_identifier);
    put_nonempty(&mut m, "issue_type", &issue.issue_type);
    put_nonempty(&mut m, "state", &issue.state);
    m
}

fn put_sentences(m: &mut Map<String, Value>, pair: &wording::Pair) {
    m.insert("status_text".into(), pair.short.clone().into());
    m.insert("status_text_full".into(), pair.full.clone().into());
}

/// The issue's completed-session figures from run history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IssueSpend {
    /// Completed sessions (recorded CI results excluded).
    pub sessions: u64,
    pub unmeasured: u64,
    /// Summed tokens without cache reads of the measured sessions.
    pub uncached: u64,
    /// Sessions that recorded a turn no figure covered.
    pub lower_bound: u64,
}

impl IssueSpend {
    /// The figures of several issues in one query; an issue without runs reads all zeros.
    /// `None` when history cannot be read.
    pub fn read_many(
        conn: &crate::store::ReadConn,
        issue_ids: &[&str],
    ) -> Option<std::collections::BTreeMap<String, IssueSpend>> {
        let mut out: std::collections::BTreeMap<String, IssueSpend> = issue_ids
            .iter()
            .map(|id| (id.to_string(), IssueSpend::default()))
            .collect();
        if issue_ids.is_empty() {
            return Some(out);
        }
        let marks = vec!["?"; issue_ids.len()].join(",");
        let sql = format!(
            "SELECT issue_id, COUNT(*),
                    COALESCE(SUM(tokens_measured = 0), 0),
                    COALESCE(SUM(CASE WHEN tokens_measured = 1
                        THEN MAX(total_tokens - cache_read_tokens, 0) ELSE 0 END), 0),
                    COALESCE(SUM(unaccounted_turns > 0), 0)
             FROM run_history WHERE status <> 'ci_failed' AND issue_id IN ({marks})
             GROUP BY issue_id"
        );
        let mut read = || -> rusqlite::Result<()> {
            let mut stmt = conn.connection().prepare(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(issue_ids.iter()), |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    IssueSpend {
                        sessions: r.get::<_, i64>(1)?.max(0) as u64,
                        unmeasured: r.get::<_, i64>(2)?.max(0) as u64,
                        uncached: r.get::<_, i64>(3)?.max(0) as u64,
                        lower_bound: r.get::<_, i64>(4)?.max(0) as u64,
                    },
                ))
            })?;
            for row in rows {
                let (id, spend) = row?;
                out.insert(id, spend);
            }
            Ok(())
        };
        match read() {
            Ok(()) => Some(out),
            Err(e) => {
                log::warn!("issue spend read failed error=\"{e}\"");
                None
            }
        }
    }

    /// Reads the figures in one query; `None` when history cannot be read.
    pub fn read(conn: &crate::store::ReadConn, issue_id: &str) -> Option<IssueSpend> {
        conn.connection()
            .query_row(
                "SELECT COUNT(*),
                        COALESCE(SUM(tokens_measured = 0), 0),
                        COALESCE(SUM(CASE WHEN tokens_measured = 1
                            THEN MAX(total_tokens - cache_read_tokens, 0) ELSE 0 END), 0),
                        COALESCE(SUM(unaccounted_turns > 0), 0)
                 FROM run_history WHERE issue_id = ?1 AND status <> 'ci_failed'",
                [issue_id],
                |r| {
                    Ok(IssueSpend {
                        sessions: r.get::<_, i64>(0)?.max(0) as u64,
                        unmeasured: r.get::<_, i64>(1)?.max(0) as u64,
                        uncached: r.get::<_, i64>(2)?.max(0) as u64,
                        lower_bound: r.get::<_, i64>(3)?.max(0) as u64,
                    })
                },
            )
            .map_err(|e| log::warn!("issue spend read failed issue_id={issue_id} error=\"{e}\""))
            .ok()
    }
}

fn arrival_name(a: Option<UsageArrival>) -> &'static str {
    match a {
        Some(UsageArrival::Incremental) => "incremental",
        Some(UsageArrival::TurnEnd) => "turn_end",
        Some(UsageArrival::None) => "none",
        None => "",
    }
}

fn attribution_name(a: Option<UsageAttribution>) -> &'static str {
    match a {
        Some(UsageAttribution::PerModel) => "per_model",
        Some(UsageAttribution::SessionTotal) => "session_total",
        Some(UsageAttribution::None) => "none",
        None => "",
    }
}

/// The usage arrival of an agent kind (`""` when the kind is not registered).
pub fn usage_arrival_of(kind: &str) -> &'static str {
    arrival_name(crate::registry::caps_for_kind(kind).map(|c| c.usage_arrival))
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
    let measured = reports && r.tokens.is_some();
    RowUsage {
        measured,
        awaited: reports && !measured && r.turns_without_figure == 0,
    }
}

/// A `running[]` entry.
pub fn running_row(
    r: &RunningRow,
    cfg: &ConfigView,
    spend: Option<IssueSpend>,
    now_ms: i64,
) -> Value {
    let mut m = issue_fields(&r.issue);
    let caps = crate::registry::caps_for_kind(&cfg.agent_kind);
    let arrival = caps.map(|c| c.usage_arrival);
    let usage = row_usage(r, &cfg.agent_kind);
    let tokens = r.tokens.filter(|_| usage.measured);
    put_sentences(&mut m, &wording::running(r.turn, None));
    m.insert("dispatch_id".into(), r.dispatch_id.clone().into());
    if let Some(s) = &r.session_id {
        m.insert("session_id".into(), s.clone().into());
    }
    m.insert("turn_count".into(), json!(r.turn));
    m.insert("self_review_active".into(), false.into());
    m.insert("self_review_iteration".into(), 0.into());
    m.insert("last_event".into(), json!(r.last_event_type));
    m.insert(
        "last_message".into(),
        r.last_message.clone().unwrap_or_default().into(),
    );
    m.insert("started_at".into(), ts(r.started_at_ms));
    m.insert("dispatched_at".into(), ts(r.dispatched_at_ms));
    m.insert("last_event_at".into(), opt_ts(r.last_event_at_ms));
    if let Some(p) = &r.workspace_path {
        m.insert("workspace_path".into(), p.clone().into());
    }
    m.insert(
        "tokens".into(),
        match tokens {
            Some(t) => json!({
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "total_tokens": t.total_tokens,
                "cache_read_tokens": t.cache_read_tokens,
                "cache_write_tokens": t.cache_write_tokens,
            }),
            None => json!({
                "input_tokens": null, "output_tokens": null, "total_tokens": null,
                "cache_read_tokens": null, "cache_write_tokens": null,
            }),
        },
    );
    m.insert(
        "uncached_tokens".into(),
        json!(tokens.map(|t| t.uncached_tokens())),
    );
    if arrival != Some(UsageArrival::None)
        && let Some(model) = r.model.as_deref().filter(|s| !s.is_empty())
    {
        m.insert("model_name".into(), model.into());
    }
    m.insert("stage_lineage".into(), Value::Null);
    m.insert("stage_position".into(), Value::Null);
    put_nonempty(&mut m, "workflow_file", &cfg.workflow_file);
    put_nonempty(&mut m, "agent_kind", &cfg.agent_kind);
    let requests_measured = arrival == Some(UsageArrival::Incremental)
        && (r.api_request_count > 0 || (r.turn == 0 && r.tokens.is_none()));
    m.insert(
        "api_request_count".into(),
        if requests_measured {
            json!(r.api_request_count)
        } else {
            Value::Null
        },
    );
    m.insert("tool_time_percent".into(), Value::Null);
    m.insert("api_time_percent".into(), Value::Null);
    m.insert("tokens_measured".into(), usage.measured.into());
    m.insert("usage_arrival".into(), arrival_name(arrival).into());
    m.insert(
        "usage_attribution".into(),
        attribution_name(caps.map(|c| c.usage_attribution)).into(),
    );
    m.insert(
        "tokens_pending".into(),
        (arrival == Some(UsageArrival::TurnEnd) && usage.measured && !r.turn_had_usage).into(),
    );
    m.insert("tokens_awaited".into(), usage.awaited.into());
    m.insert("api_requests_measured".into(), requests_measured.into());
    // Issue-level figures: completed sessions from run history plus this session.
    let session_uncached = tokens.map(|t| t.uncached_tokens()).unwrap_or(0);
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
    m.insert("used_sessions".into(), json!(spend.map(|s| s.sessions)));
    m.insert("budget_sessions".into(), json!(cfg.max_sessions));
    m.insert("issue_tokens_completed".into(), json!(completed));
    m.insert(
        "unmeasured_sessions".into(),
        json!(spend.map(|s| s.unmeasured)),
    );
    m.insert(
        "used_tokens".into(),
        if sum == 0 && !complete {
            Value::Null
        } else {
            json!(sum)
        },
    );
    m.insert("used_tokens_complete".into(), complete.into());
    m.insert("budget_tokens".into(), json!(cfg.max_tokens));
    m.insert("budget_usd".into(), json!(cfg.max_cost_usd));
    // No price table or token_rates in this build: a measured session is unpriced.
    m.insert("estimated_cost_usd".into(), Value::Null);
    m.insert(
        "cost_status".into(),
        if usage.measured {
            "unpriced"
        } else {
            "unmeasured"
        }
        .into(),
    );
    m.insert("issue_estimated_cost_usd".into(), Value::Null);
    m.insert(
        "issue_cost_status".into(),
        if sum == 0 && !complete {
            "unmeasured"
        } else {
            "unpriced"
        }
        .into(),
    );
    match cfg.stall_timeout_ms {
        Some(stall) => {
            let base = r.last_event_at_ms.unwrap_or(r.started_at_ms);
            let quiet_at = base + (stall / 2) as i64;
            m.insert("quiet_at".into(), ts(quiet_at));
            m.insert("stall_at".into(), ts(base + stall as i64));
            if now_ms >= quiet_at {
                let silent = wording::duration(now_ms - base);
                let stops = wording::duration(stall as i64);
                m.insert(
                    "stall_text".into(),
                    format!("No events for {silent}; Sortie stops it after {stops}").into(),
                );
                m.insert(
                    "stall_text_full".into(),
                    format!(
                        "The agent has sent no event for {silent}; Sortie stops the session as stalled after {stops} of silence."
                    )
                    .into(),
                );
            } else {
                m.insert("stall_text".into(), Value::Null);
                m.insert("stall_text_full".into(), Value::Null);
            }
            m.insert("stall_off_text".into(), Value::Null);
        }
        None => {
            m.insert("quiet_at".into(), Value::Null);
            m.insert("stall_at".into(), Value::Null);
            m.insert("stall_text".into(), Value::Null);
            m.insert("stall_text_full".into(), Value::Null);
            m.insert(
                "stall_off_text".into(),
                "Stall detection is off; Sortie will not stop this session as stalled (`agent.stall_timeout_ms`)."
                    .into(),
            );
        }
    }
    Value::Object(m)
}

/// A `retrying[]` entry.
pub fn retry_row(r: &RetryRow, cfg: &ConfigView, now_ms: i64) -> Value {
    let mut m = issue_fields(&r.issue);
    let error = r.error.as_deref().filter(|e| !e.trim().is_empty());
    put_sentences(
        &mut m,
        &wording::retrying(r.attempt, r.due_at_ms - now_ms, r.trigger.as_str(), error),
    );
    m.insert(
        "dispatched_at".into(),
        if r.dispatched_at_ms > 0 {
            ts(r.dispatched_at_ms)
        } else {
            Value::Null
        },
    );
    m.insert("attempt".into(), json!(r.attempt));
    m.insert("due_at".into(), ts(r.due_at_ms));
    // Served as stored (the reschedule reasons as written); sentences use the plain form.
    m.insert("error".into(), json!(error));
    put_nonempty(&mut m, "trigger", r.trigger.as_str());
    put_nonempty(&mut m, "agent_kind", &cfg.agent_kind);
    m.insert("stage_lineage".into(), Value::Null);
    m.insert("stage_position".into(), Value::Null);
    m.insert("paused".into(), false.into());
    Value::Object(m)
}

/// A `budget_exhausted[]` entry.
pub fn budget_row(b: &BudgetRow, cfg: &ConfigView) -> Value {
    let mut m = issue_fields(&b.issue);
    put_sentences(&mut m, &wording::budget(b.reason.as_str(), b.used, b.limit));
    m.insert("dispatched_at".into(), Value::Null);
    m.insert("reason".into(), b.reason.as_str().into());
    let sessions = b.reason == crate::domain::BudgetReason::Session;
    let tokens = b.reason == crate::domain::BudgetReason::Token;
    m.insert(
        "used_sessions".into(),
        if sessions { json!(b.used) } else { Value::Null },
    );
    m.insert("budget_sessions".into(), json!(cfg.max_sessions));
    m.insert(
        "used_tokens".into(),
        if tokens { json!(b.used) } else { Value::Null },
    );
    m.insert("budget_tokens".into(), json!(cfg.max_tokens));
    m.insert("used_usd".into(), Value::Null);
    m.insert("used_usd_complete".into(), Value::Null);
    m.insert("budget_usd".into(), json!(cfg.max_cost_usd));
    m.insert("unmeasured_sessions".into(), Value::Null);
    m.insert("stopped_in_flight".into(), Value::Null);
    m.insert("exhausted_at".into(), ts(b.since_ms));
    m.insert("stage_lineage".into(), Value::Null);
    m.insert("stage_position".into(), Value::Null);
    put_nonempty(&mut m, "agent_kind", &cfg.agent_kind);
    Value::Object(m)
}

/// A `parked[]` entry.
pub fn parked_row(p: &ParkedRow, cfg: &ConfigView) -> Value {
    let mut m = issue_fields(&p.issue);
    put_sentences(&mut m, &wording::parked(p.reason.as_str(), &p.label));
    // The park serves the state it observed, not a later read.
    m.remove("state");
    put_nonempty(&mut m, "state", &p.parked_state);
    put_nonempty(&mut m, "parked_state", &p.parked_state);
    if let Some(Value::Array(labels)) = m.get_mut("issue_labels") {
        labels.retain(|l| l.as_str() != Some(p.label.as_str()));
    }
    m.insert("dispatched_at".into(), Value::Null);
    m.insert("reason".into(), p.reason.as_str().into());
    m.insert("label".into(), p.label.clone().into());
    m.insert("label_applied".into(), p.label_applied.into());
    m.insert("parked_at".into(), ts(p.parked_at_ms));
    m.insert("stage_position".into(), Value::Null);
    put_nonempty(&mut m, "agent_kind", &cfg.agent_kind);
    Value::Object(m)
}

/// The hold object and the row's long sentence.
pub fn hold_object(reason: &HoldReason, since_ms: i64) -> (Value, String) {
    let (blockers, slot, words) = match reason {
        HoldReason::BlockedBy(bs) => {
            let list: Vec<Value> = bs
                .iter()
                .map(|b| {
                    let mut m = Map::new();
                    m.insert("issue_id".into(), b.id.clone().into());
                    m.insert("issue_identifier".into(), b.identifier.clone().into());
                    put_nonempty(&mut m, "state", &b.state);
                    Value::Object(m)
                })
                .collect();
            let names: Vec<BlockerWords<'_>> = bs
                .iter()
                .map(|b| BlockerWords {
                    identifier: &b.identifier,
                    state: &b.state,
                })
                .collect();
            (Value::Array(list), Value::Null, wording::blocked_by(&names))
        }
        HoldReason::AgentSlotsFull { scope, used, limit } => {
            let mut m = Map::new();
            let state = match scope {
                SlotScope::Global => {
                    m.insert("scope".into(), "global".into());
                    None
                }
                SlotScope::State(s) => {
                    m.insert("scope".into(), "state".into());
                    m.insert("state".into(), s.clone().into());
                    Some(s.as_str())
                }
            };
            m.insert("used".into(), json!(used));
            m.insert("limit".into(), json!(limit));
            (
                Value::Null,
                Value::Object(m),
                wording::slots_full(state, *used, *limit),
            )
        }
    };
    let (reason_text, release_text, full) = words;
    (
        json!({
            "reason": reason.code(),
            "held_since": rfc3339_ms(since_ms),
            "blockers": blockers,
            "slot": slot,
            "resets_at": null,
            "reason_text": reason_text,
            "release_text": release_text,
        }),
        full,
    )
}

/// A `held[]` entry.
pub fn held_row(h: &HeldRow) -> Value {
    let mut m = issue_fields(&h.issue);
    let (hold, full) = hold_object(&h.reason, h.since_ms);
    let short = hold
        .get("reason_text")
        .and_then(Value::as_str)
        .unwrap_or(wording::NOT_AVAILABLE)
        .to_string();
    m.insert("hold".into(), hold);
    m.insert("status_text".into(), short.into());
    m.insert("status_text_full".into(), full.into());
    Value::Object(m)
}

/// Rows sorted by issue identifier then id (the seed's order for parked, budget, held).
pub fn sort_by_issue(rows: &mut [Value]) {
    let key = |v: &Value| {
        (
            v.get("issue_identifier")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            v.get("issue_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        )
    };
    rows.sort_by_key(key);
}

/// The rows of one issue across the lists, for the state document's `active` list and the
/// issue detail.
pub struct IssueRows<'a> {
    pub running: Option<&'a RunningRow>,
    pub retry: Option<&'a RetryRow>,
    pub budget: Option<&'a BudgetRow>,
    pub parked: Option<&'a ParkedRow>,
}

impl<'a> IssueRows<'a> {
    pub fn find(snap: &'a Snapshot, issue_id: &str) -> IssueRows<'a> {
        IssueRows {
            running: snap.running.iter().find(|r| r.issue.id == issue_id),
            retry: snap.retrying.iter().find(|r| r.issue.id == issue_id),
            budget: snap
                .budget_exhausted
                .iter()
                .find(|r| r.issue.id == issue_id),
            parked: snap.parked.iter().find(|r| r.issue.id == issue_id),
        }
    }

    /// The status by the seed's precedence, `None` when no live list holds the issue.
    pub fn status(&self) -> Option<&'static str> {
        if self.running.is_some() {
            Some("running")
        } else if self.retry.is_some() {
            Some("retrying")
        } else if self.budget.is_some() {
            Some("budget_exhausted")
        } else if self.parked.is_some() {
            Some("parked")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::TokenUsage;

    fn row(tokens: Option<TokenUsage>, turn: u32, without_figure: u32) -> RunningRow {
        RunningRow {
            issue: Issue {
                id: "1".into(),
                identifier: "T-1".into(),
                ..Default::default()
            },
            dispatch_id: "ABC".into(),
            attempt: 0,
            turn,
            max_turns: 3,
            started_at_ms: 0,
            dispatched_at_ms: 0,
            last_event_at_ms: None,
            last_event_type: None,
            last_message: None,
            session_id: None,
            tokens,
            api_request_count: u64::from(tokens.is_some()),
            model: Some("m".into()),
            stall_at_ms: None,
            recent_events: vec![],
            workspace_path: None,
            turns_without_figure: without_figure,
            turn_had_usage: tokens.is_some(),
        }
    }

    fn cfg() -> ConfigView {
        ConfigView {
            agent_kind: "mock".into(),
            max_sessions: Some(5),
            ..Default::default()
        }
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
    fn lower_bound_history_is_not_complete() {
        let t = TokenUsage::new(10, 0, 0, 0);
        let spend = IssueSpend {
            sessions: 1,
            unmeasured: 1,
            uncached: 0,
            lower_bound: 0,
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
}
