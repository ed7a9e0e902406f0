//! Agent events of running sessions: last-event bookkeeping, token accounting and the
//! per-issue token budget of a live run.

use super::*;

impl Orchestrator {
    pub(super) fn on_agent_event(&mut self, dispatch_id: &str, event: crate::agent::AgentEvent) {
        let max_tokens = self.workflow.config.agent.max_tokens.unwrap_or(0);
        let Some(issue_id) = self.state.dispatch_index.get(dispatch_id).cloned() else {
            return;
        };
        let Some(e) = self.state.running.get_mut(&issue_id) else {
            return;
        };
        e.facts.last_event_at_ms = Some(event.at_ms);
        e.facts.last_event_type = Some(event.kind.type_name().to_string());
        let msg = event.kind.message();
        if !msg.trim().is_empty() {
            e.facts.last_message = Some(crate::mask::mask(msg));
        }
        match &event.kind {
            AgentEventKind::SessionStarted {
                session_id,
                agent_pid,
            } => {
                e.facts.session_id = Some(session_id.clone());
                e.facts.agent_pid = *agent_pid;
            }
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
            AgentEventKind::TokenUsage { usage, model, .. } => {
                self.metrics.token_usage(usage);
                e.facts.tokens = e.facts.tokens.plus(usage);
                e.facts.tokens_measured = true;
                e.facts.turn_had_usage = true;
                e.facts.api_request_count += 1;
                if model.is_some() {
                    e.facts.reported_model = model.clone();
                }
                let t = &mut self.state.totals;
                t.input_tokens += usage.input_tokens;
                t.output_tokens += usage.output_tokens;
                t.total_tokens += usage.total_tokens;
                t.cache_read_tokens += usage.cache_read_tokens;
                t.cache_write_tokens += usage.cache_write_tokens;
                let used_before = e.facts.tokens_used_before;
                if max_tokens > 0
                    && !e.facts.budget_stopped
                    && used_before + e.facts.tokens.uncached_tokens() >= max_tokens
                {
                    e.facts.budget_stopped = true;
                    log::warn!(
                        "token budget reached, stopping session issue_id={} issue_identifier={} used_tokens={} budget_tokens={}",
                        e.facts.issue.id,
                        e.facts.issue.identifier,
                        used_before + e.facts.tokens.uncached_tokens(),
                        max_tokens
                    );
                    e.handles.cancel.cancel(CancelReason::Budget);
                }
            }
            k if k.is_terminal() && !e.facts.turn_had_usage => {
                e.facts.turns_without_figure += 1;
            }
            _ => {}
        }
        if matches!(event.kind, AgentEventKind::TokenUsage { .. }) {
            persist::write_live_session(&self.store, e, self.clock.now_ms());
        }
        let Some(e) = self.state.running.get_mut(&issue_id) else {
            return;
        };
        let mut event = event;
        if event.kind.is_terminal() {
            // Turn-ending events carry the run's totals so far (null while unmeasured).
            event.run_usage = e.facts.tokens_measured.then_some(e.facts.tokens);
        }
        e.facts.events.push(&event);
    }
}
