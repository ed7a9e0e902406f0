//! Agent events of running sessions: last-event bookkeeping, token accounting and the
//! per-issue token budget of a live run, and keeping the live session row current.

use crate::orchestrator::core::orchestrator::*;

/// Token figures reach the live session row at most this often (plus at each turn end and
/// each agent spawn), through the writer thread: an interrupted session's spend is kept to
/// within this window without a database write per usage event.
pub(crate) const LIVE_ROW_INTERVAL_MS: i64 = 1_000;

use crate::orchestrator::claim::run_error::{BudgetStop, MoneyStop};
use crate::orchestrator::features::spend::money_budget;

/// Stops a session whose issue's estimated cost, with the session's live price, reaches
/// `agent.max_cost_usd`.
fn stop_at_money_budget(
    e: &mut RunningEntry,
    book: &crate::pricing::RateBook,
    agent_kind: &str,
    ceiling: f64,
) {
    let Some(before) = e
        .facts
        .usage_before
        .filter(|_| e.facts.budget_stop.is_none())
    else {
        return;
    };
    let price = crate::orchestrator::features::spend::session_cost::session_price(
        &e.facts, agent_kind, book,
    );
    let (used, _) = money_budget::live_cost(&e.facts, &before, &price);
    let Some(used_usd) = used.filter(|_| money_budget::reached(used, ceiling)) else {
        return;
    };
    let stop = BudgetStop::Money(MoneyStop {
        used_usd,
        limit_usd: ceiling,
    });
    stop_at_budget(e, stop);
}

/// Records the budget that stops the session, with its figures, and cancels the session.
fn stop_at_budget(e: &mut RunningEntry, stop: BudgetStop) {
    let (used, limit) = match stop {
        BudgetStop::Tokens(t) => (
            format!("used_tokens={}", t.used),
            format!("budget_tokens={}", t.limit),
        ),
        BudgetStop::Money(m) => (
            format!("used_usd={}", m.used_usd),
            format!("budget_usd={}", m.limit_usd),
        ),
    };
    log::warn!(
        issue_id:% = e.facts.issue.id,
        issue_identifier:% = format!("{} {used} {limit}", e.facts.issue.identifier);
        "budget reached, stopping session"
    );
    e.facts.budget_stop = Some(stop);
    e.handles.cancel.cancel(CancelReason::Budget);
}

/// Takes a session start: the session id, the agent's process and its group.
fn take_session_start(e: &mut RunningEntry, session_id: &str, agent_pid: Option<u32>) {
    e.facts.session_id = Some(session_id.to_string());
    crate::sandbox::note_session(&e.facts.issue.id, session_id);
    e.facts.agent_pid = agent_pid;
    // A new process (one per turn for claude-code): a new group to record.
    // Only a process carrying this sortie's token is recorded, so a pid an adapter
    // made up (the mock) never names someone else's group.
    e.facts.agent_group = agent_pid
        .filter(|pid| crate::process_signal::orphans::is_our_agent(*pid))
        .and_then(|pid| crate::process_signal::proc_stat(pid).map(|s| (s.pgrp, s.start_ticks)));
    e.facts.live_row_dirty = true;
    e.facts.live_row_written_at_ms = i64::MIN;
}

/// Takes one token-usage report: the session's, the model's and the agent totals' figures, and
/// the stop at `agent.max_tokens` (0: none) once the issue's runs reach it. The metrics'
/// share is added to `for_metrics`, counted once per message.
fn take_token_usage(
    e: &mut RunningEntry,
    totals: &mut crate::orchestrator::core::state::AgentTotals,
    for_metrics: &mut crate::agent::TokenUsage,
    usage: &crate::agent::TokenUsage,
    model: &Option<String>,
    max_tokens: u64,
) {
    *for_metrics = for_metrics.plus(usage);
    e.facts.tokens = e.facts.tokens.plus(usage);
    e.facts.tokens_measured = true;
    e.facts.turn_had_usage = true;
    e.facts.api_request_count += 1;
    e.facts.live_row_dirty = true;
    if model.is_some() && e.facts.reported_model != *model {
        e.facts.reported_model = model.clone();
    }
    let key = model.as_deref().unwrap_or_default();
    let part = match e.facts.by_model.get_mut(key) {
        Some(part) => part,
        None => e.facts.by_model.entry(key.to_string()).or_default(),
    };
    part.tokens = part.tokens.plus(usage);
    part.requests += 1;
    let t = totals;
    t.input_tokens += usage.input_tokens;
    t.output_tokens += usage.output_tokens;
    t.total_tokens += usage.total_tokens;
    t.cache_read_tokens += usage.cache_read_tokens;
    t.cache_write_tokens += usage.cache_write_tokens;
    let used = e.facts.tokens_used_before + e.facts.tokens.uncached_tokens();
    if max_tokens > 0 && e.facts.budget_stop.is_none() && used >= max_tokens {
        let stop = crate::orchestrator::claim::run_error::TokenStop {
            used,
            limit: max_tokens,
        };
        stop_at_budget(e, BudgetStop::Tokens(stop));
    }
}

/// Queues the session's live row when its figures changed and a turn ended or
/// [`LIVE_ROW_INTERVAL_MS`] passed since the last write.
fn write_live_row_if_due(
    store: &Store,
    workflow: &Workflow,
    e: &mut RunningEntry,
    now: i64,
    turn_ended: bool,
) {
    if e.facts.live_row_dirty
        && (turn_ended
            || now.saturating_sub(e.facts.live_row_written_at_ms) >= LIVE_ROW_INTERVAL_MS)
    {
        e.facts.live_row_dirty = false;
        e.facts.live_row_written_at_ms = now;
        persist::write_live_session(store, e, workflow, now);
    }
}

/// Adds the event to the session's ring; a turn-ending event carries the run's totals so far
/// (null while unmeasured).
fn keep_event(e: &mut RunningEntry, mut event: crate::agent::AgentEvent) {
    if event.kind.is_terminal() {
        event.run_usage = e.facts.tokens_measured.then_some(e.facts.tokens);
    }
    // Copies the ring only when a published snapshot still holds it.
    Arc::make_mut(&mut e.facts.events).push_owned(event);
}

/// Replaces `slot`'s text with `text`, reusing its buffer (the last event's type and message
/// change with nearly every event).
fn set_text(slot: &mut Option<String>, text: &str) {
    match slot {
        Some(s) if s == text => {}
        Some(s) => {
            s.clear();
            s.push_str(text);
        }
        None => *slot = Some(text.to_string()),
    }
}

impl Orchestrator {
    pub(crate) fn on_agent_event(&mut self, dispatch_id: &str, event: crate::agent::AgentEvent) {
        let mut usage = crate::agent::TokenUsage::default();
        let now = self.clock.now_ms();
        self.take_agent_event(dispatch_id, event, now, &mut usage);
        self.metrics.token_usage(&usage);
    }

    /// A burst of one dispatch's events, in order, taken at one time; the token metrics move
    /// once for all.
    pub(crate) fn on_agent_events(
        &mut self,
        dispatch_id: &str,
        events: Vec<crate::agent::AgentEvent>,
    ) {
        let mut usage = crate::agent::TokenUsage::default();
        let now = self.clock.now_ms();
        for event in events {
            self.take_agent_event(dispatch_id, event, now, &mut usage);
        }
        self.metrics.token_usage(&usage);
    }

    fn take_agent_event(
        &mut self,
        dispatch_id: &str,
        event: crate::agent::AgentEvent,
        now: i64,
        for_metrics: &mut crate::agent::TokenUsage,
    ) {
        let max_tokens = self.workflow.config.agent.max_tokens.unwrap_or(0);
        let Some(issue_id) = self.state.dispatch_index.get(dispatch_id) else {
            return;
        };
        let Some(e) = self.state.running.get_mut(issue_id) else {
            return;
        };
        e.facts.last_event_at_ms = Some(event.at_ms);
        let turn_completed = matches!(event.kind, AgentEventKind::TurnCompleted { .. });
        set_text(&mut e.facts.last_event_type, event.kind.type_name());
        let msg = event.kind.message();
        if !msg.trim().is_empty() {
            set_text(&mut e.facts.last_message, &crate::mask::mask_cow(msg));
        }
        match &event.kind {
            AgentEventKind::SessionStarted {
                session_id,
                agent_pid,
            } => take_session_start(e, session_id, *agent_pid),
            AgentEventKind::ToolResult {
                tool_name,
                tool_error,
                ..
            } => {
                self.metrics.tool_call(
                    tool_name.as_deref().unwrap_or("unknown"),
                    if *tool_error { "error" } else { "success" },
                );
            }
            AgentEventKind::TokenUsage { usage, model, .. } => take_token_usage(
                e,
                &mut self.state.totals,
                for_metrics,
                usage,
                model,
                max_tokens,
            ),
            AgentEventKind::VendorAmount {
                unit,
                model,
                amount,
            } => {
                *e.facts
                    .vendor_amounts
                    .entry((unit.clone(), model.clone()))
                    .or_default() += amount;
            }
            AgentEventKind::RateLimits { windows } => {
                self.features.agent_holds.record_rate_limits(
                    self.agent.kind(),
                    windows,
                    event.at_ms,
                );
            }
            // A turn's events reach this thread in order, its figures before its end, so the
            // end settles the turn and the next one starts unfigured. (`TurnStarted` comes from
            // the supervisor on another path and can overtake the previous turn's end.)
            k if k.is_terminal() => {
                if !e.facts.turn_had_usage {
                    e.facts.turns_without_figure += 1;
                }
                e.facts.turn_had_usage = false;
            }
            _ => {}
        }
        if matches!(
            event.kind,
            AgentEventKind::TokenUsage { .. } | AgentEventKind::VendorAmount { .. }
        ) && let Some(ceiling) = money_budget::ceiling(self.workflow.config.agent.max_cost_usd)
        {
            stop_at_money_budget(
                e,
                &self.prices.current(),
                &self.workflow.config.agent.kind,
                ceiling,
            );
        }
        write_live_row_if_due(
            &self.store,
            &self.workflow,
            e,
            now,
            event.kind.is_terminal(),
        );
        keep_event(e, event);
        if turn_completed {
            let kind = persist::route_kind(&e.facts.route, &self.workflow).to_string();
            self.lift_auth_hold_after_success(&kind);
        }
    }

    /// Queues the live rows whose figures changed and were not written for
    /// [`LIVE_ROW_INTERVAL_MS`] (timer path); true if any was.
    pub(crate) fn flush_live_rows(&mut self) -> bool {
        let now = self.clock.now_ms();
        let mut any = false;
        for e in self.state.running.values_mut() {
            if e.facts.live_row_dirty
                && now.saturating_sub(e.facts.live_row_written_at_ms) >= LIVE_ROW_INTERVAL_MS
            {
                e.facts.live_row_dirty = false;
                e.facts.live_row_written_at_ms = now;
                persist::write_live_session(&self.store, e, &self.workflow, now);
                any = true;
            }
        }
        any
    }
}
