//! Prometheus metrics: the catalogue's counters and histograms, recorded by
//! the orchestrator as things happen, and gauges computed from the published snapshot at
//! scrape time. Counters that must never reset (tokens, dispatches, worker exits,
//! runtime, estimated cost, unmeasured sessions) start from the persisted aggregate row, so a restart draws
//! no cliff. No label ever carries an issue id: every label value is either from a fixed set
//! or a capped free-form set (see [`catalogue`] and [`free_label`]).

pub mod catalogue;
mod free_label;
mod registry;
mod spend;

use prometheus::{Counter, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge};

use crate::agent::TokenUsage;
use crate::domain::RunStatus;
use crate::store::AggregateTotals;

use catalogue::*;
use free_label::FreeLabel;
pub use registry::{GaugeValues, elapsed_seconds};
use registry::{Gauges, Reg};
pub use spend::SpendGauge;

/// The `Content-Type` of [`Metrics::render`]'s output (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// All metrics of one daemon. Thread-safe: recording methods take `&self` and may be called
/// from any thread; share it in an `Arc`.
pub struct Metrics {
    reg: Reg,
    gauges: Gauges,
    spend: spend::SpendGauges,
    // Kept across restarts (seeded).
    tokens: IntCounterVec,
    runtime: Counter,
    estimated_cost: Counter,
    dispatches: IntCounterVec,
    worker_exits: IntCounterVec,
    unmeasured: IntCounter,
    // Reset at restart.
    retries: IntCounterVec,
    reconciliations: IntCounterVec,
    poll_cycles: IntCounterVec,
    tracker_requests: IntCounterVec,
    candidate_holds: IntCounterVec,
    rule_matches: IntCounterVec,
    handoffs: IntCounterVec,
    dispatch_transitions: IntCounterVec,
    tracker_comments: IntCounterVec,
    tool_calls: IntCounterVec,
    ci_checks: IntCounterVec,
    ci_escalations: IntCounterVec,
    review_checks: IntCounterVec,
    review_escalations: IntCounterVec,
    self_review_iterations: IntCounterVec,
    self_review_sessions: IntCounterVec,
    self_review_cap: IntCounter,
    events_shed: IntCounter,
    webhook_deliveries: IntCounterVec,
    webhook_body_bytes: IntGauge,
    connections_refused: IntCounterVec,
    /// Mirrors `crate::sandbox::denied_total`, caught up at each scrape under `sandbox_sync`.
    sandbox_denied: IntCounter,
    sandbox_sync: std::sync::Mutex<()>,
    poll_duration: Histogram,
    dispatch_pass_duration: Histogram,
    worker_duration: HistogramVec,
    verification_duration: HistogramVec,
    tool_names: FreeLabel,
    rule_names: FreeLabel,
    commands: FreeLabel,
    verdicts: FreeLabel,
}

impl Metrics {
    /// Metrics whose restart-surviving counters start from `seed` (the persisted aggregates).
    pub fn new(seed: &AggregateTotals) -> Metrics {
        let reg = Reg::default();
        let m = Metrics {
            gauges: Gauges::register(&reg),
            spend: spend::SpendGauges::register(&reg),
            tokens: reg.counter_vec(
                "sortie_tokens_total",
                "Tokens consumed by agent sessions, by token class.",
                "type",
                TOKEN_TYPES,
            ),
            runtime: reg.float_counter(
                "sortie_agent_runtime_seconds_total",
                "Agent session wall time in seconds, added when a session ends.",
            ),
            estimated_cost: reg.float_counter(
                "sortie_estimated_cost_usd_total",
                "Estimated cost in US dollars of ended sessions, as recorded with each run.",
            ),
            dispatches: reg.counter_vec(
                "sortie_dispatches_total",
                "Dispatch attempts, by outcome.",
                "outcome",
                DISPATCH_OUTCOMES,
            ),
            worker_exits: reg.counter_vec(
                "sortie_worker_exits_total",
                "Agent session ends, by exit type.",
                "exit_type",
                EXIT_TYPES,
            ),
            unmeasured: reg.counter(
                "sortie_unmeasured_sessions_total",
                "Ended sessions whose token usage the agent never reported.",
            ),
            retries: reg.counter_vec(
                "sortie_retries_total",
                "Retry schedules, by trigger.",
                "trigger",
                RETRY_TRIGGERS,
            ),
            reconciliations: reg.counter_vec(
                "sortie_reconciliation_actions_total",
                "Per-issue reconciliation outcomes, by action.",
                "action",
                RECONCILE_ACTIONS,
            ),
            poll_cycles: reg.counter_vec(
                "sortie_poll_cycles_total",
                "Poll ticks, by result (skipped = dispatch preflight failed).",
                "result",
                POLL_RESULTS,
            ),
            tracker_requests: reg.counter_vec2(
                "sortie_tracker_requests_total",
                "Issue tracker requests, by operation and result.",
                ("operation", TRACKER_OPERATIONS),
                ("result", SUCCESS_ERROR),
            ),
            candidate_holds: reg.counter_vec(
                "sortie_candidate_holds_total",
                "Candidates a dispatch pass held back, by hold reason (one per candidate per pass).",
                "reason",
                HOLD_REASONS,
            ),
            rule_matches: reg.counter_vec2(
                "sortie_dispatch_rule_match_total",
                "Dispatch routing resolutions, one per dispatched issue, by resolution layer (rule, default, fallback) and rule.",
                ("layer", RULE_MATCH_LAYERS),
                ("rule", &[]),
            ),
            handoffs: reg.counter_vec(
                "sortie_handoff_transitions_total",
                "Handoff transitions after a successful run, by result.",
                "result",
                SUCCESS_ERROR_SKIPPED,
            ),
            dispatch_transitions: reg.counter_vec(
                "sortie_dispatch_transitions_total",
                "In-progress transitions at dispatch, by result (skipped = already in state).",
                "result",
                SUCCESS_ERROR_SKIPPED,
            ),
            tracker_comments: reg.counter_vec2(
                "sortie_tracker_comments_total",
                "Tracker comment attempts, by lifecycle point and result.",
                ("lifecycle", COMMENT_LIFECYCLES),
                ("result", SUCCESS_ERROR),
            ),
            tool_calls: reg.counter_vec2(
                "sortie_tool_calls_total",
                "Agent tool calls, by tool and result.",
                ("tool", &[]),
                ("result", SUCCESS_ERROR),
            ),
            ci_checks: reg.counter_vec(
                "sortie_ci_status_checks_total",
                "CI status checks made by CI reactions, by result.",
                "result",
                CI_RESULTS,
            ),
            ci_escalations: reg.counter_vec(
                "sortie_ci_escalations_total",
                "CI failure escalations, by action.",
                "action",
                ESCALATION_ACTIONS,
            ),
            review_checks: reg.counter_vec(
                "sortie_review_checks_total",
                "Review comment checks, by result.",
                "result",
                REVIEW_RESULTS,
            ),
            review_escalations: reg.counter_vec(
                "sortie_review_escalations_total",
                "Review escalations, by action.",
                "action",
                ESCALATION_ACTIONS,
            ),
            self_review_iterations: reg.counter_vec(
                "sortie_self_review_iterations_total",
                "Self-review iterations, by verdict.",
                "verdict",
                SELF_REVIEW_VERDICTS,
            ),
            self_review_sessions: reg.counter_vec(
                "sortie_self_review_sessions_total",
                "Self-review sessions, by final verdict.",
                "final_verdict",
                &[],
            ),
            self_review_cap: reg.counter(
                "sortie_self_review_cap_reached_total",
                "Self-review sessions that hit the iteration cap without a pass.",
            ),
            events_shed: reg.counter(
                "sortie_agent_events_shed_total",
                "Agent events dropped under backpressure (text and tool chatter only; usage and turn ends are never dropped).",
            ),
            webhook_deliveries: reg.counter_vec2(
                "sortie_webhook_deliveries_total",
                "Webhook deliveries received, by kind and outcome (accepted ones asked for a poll).",
                ("kind", WEBHOOK_KINDS),
                ("outcome", WEBHOOK_OUTCOMES),
            ),
            webhook_body_bytes: reg.int_gauge(
                "sortie_webhook_body_bytes",
                "Bytes reserved for webhook delivery bodies being read or answered now (their memory budget in use).",
            ),
            connections_refused: reg.counter_vec(
                "sortie_http_connections_refused_total",
                "Connections the HTTP server refused by itself (503), by reason.",
                "reason",
                CONNECTION_REFUSALS,
            ),
            sandbox_denied: reg.counter(
                "sortie_sandbox_denied_connections_total",
                "Connections the sandbox's allowlist proxy refused (network: allowlist).",
            ),
            sandbox_sync: std::sync::Mutex::new(()),
            poll_duration: reg.histogram(
                "sortie_poll_duration_seconds",
                "Poll tick duration in seconds.",
                poll_buckets(),
            ),
            dispatch_pass_duration: reg.histogram(
                "sortie_dispatch_pass_duration_seconds",
                "Orchestrator time applying one poll's candidate reads (holds, parks, the dispatch pass), in seconds.",
                dispatch_pass_buckets(),
            ),
            worker_duration: reg.histogram_vec(
                "sortie_worker_duration_seconds",
                "Agent session duration from spawn to exit in seconds, by exit type.",
                "exit_type",
                worker_buckets(),
            ),
            verification_duration: reg.histogram_vec(
                "sortie_self_review_verification_duration_seconds",
                "Self-review verification command duration in seconds, by command.",
                "command",
                worker_buckets(),
            ),
            tool_names: FreeLabel::default(),
            rule_names: FreeLabel::default(),
            commands: FreeLabel::default(),
            verdicts: FreeLabel::default(),
            reg,
        };
        if let Some(h) = crate::store::write_latency::histogram() {
            m.reg.take(h.clone());
        }
        m.seed(seed);
        m
    }

    fn seed(&self, seed: &AggregateTotals) {
        let n = |v: i64| v.max(0) as u64;
        self.tokens
            .with_label_values(&["input"])
            .inc_by(n(seed.input_tokens));
        self.tokens
            .with_label_values(&["output"])
            .inc_by(n(seed.output_tokens));
        self.tokens
            .with_label_values(&["cache_read"])
            .inc_by(n(seed.cache_read_tokens));
        self.tokens
            .with_label_values(&["cache_write"])
            .inc_by(n(seed.cache_write_tokens));
        // The aggregate row counts dispatches that produced a run, i.e. successful ones.
        self.dispatches
            .with_label_values(&["success"])
            .inc_by(n(seed.dispatches));
        if seed.seconds_running.is_finite() && seed.seconds_running > 0.0 {
            self.runtime.inc_by(seed.seconds_running);
        }
        self.unmeasured.inc_by(n(seed.unmeasured_sessions));
        self.estimated_cost(seed.estimated_cost_usd);
        for (status, count) in &seed.exits {
            self.worker_exits
                .with_label_values(&[exit_type(status)])
                .inc_by(n(*count));
        }
    }

    // ---- restart-surviving counters ----------------------------------------------------

    /// A dispatch attempt: `success` when the worker was spawned, `error` when spawning failed.
    pub fn dispatch(&self, outcome: &str) {
        self.dispatches
            .with_label_values(&[bounded(outcome, DISPATCH_OUTCOMES)])
            .inc();
    }

    /// A session ended with run status `status`; `duration_secs` is spawn → exit. Adds to the
    /// exit counter, the runtime counter and the duration histogram.
    pub fn worker_exit(&self, status: RunStatus, duration_secs: f64) {
        let t = exit_type_of(status);
        self.worker_exits.with_label_values(&[t]).inc();
        if duration_secs.is_finite() && duration_secs >= 0.0 {
            self.runtime.inc_by(duration_secs);
            self.worker_duration
                .with_label_values(&[t])
                .observe(duration_secs);
        }
    }

    /// The estimated cost recorded with an ended session's run.
    pub fn estimated_cost(&self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            self.estimated_cost.inc_by(usd);
        }
    }

    /// A session ended without the agent ever reporting token usage.
    pub fn unmeasured_session(&self) {
        self.unmeasured.inc();
    }

    /// A webhook delivery of `kind` ended with `outcome` (see `WEBHOOK_OUTCOMES`).
    pub fn webhook_delivery(&self, kind: &str, outcome: &str) {
        self.webhook_deliveries
            .with_label_values(&[
                bounded(kind, WEBHOOK_KINDS),
                bounded(outcome, WEBHOOK_OUTCOMES),
            ])
            .inc();
    }

    /// The bytes webhook bodies hold now (set at scrape time).
    pub fn set_webhook_body_bytes(&self, bytes: usize) {
        self.webhook_body_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The HTTP server refused a connection for `reason` (see `CONNECTION_REFUSALS`).
    pub fn connection_refused(&self, reason: &str) {
        self.connections_refused
            .with_label_values(&[bounded(reason, CONNECTION_REFUSALS)])
            .inc();
    }

    /// `n` agent events a session's forwarder dropped under backpressure.
    pub fn events_shed(&self, n: u64) {
        self.events_shed.inc_by(n);
    }

    /// `n` tokens of class `class` (`input`, `output`, `cache_read`, `cache_write`).
    pub fn tokens(&self, class: &str, n: u64) {
        if n > 0 {
            self.tokens
                .with_label_values(&[bounded(class, TOKEN_TYPES)])
                .inc_by(n);
        }
    }

    /// One token-usage delta reported by an agent, split by class.
    pub fn token_usage(&self, usage: &TokenUsage) {
        self.tokens("input", usage.input_tokens);
        self.tokens("output", usage.output_tokens);
        self.tokens("cache_read", usage.cache_read_tokens);
        self.tokens("cache_write", usage.cache_write_tokens);
    }

    // ---- counters that reset at restart ------------------------------------------------

    /// One poll tick: `result` is `success`, `error` (tracker failed) or `skipped`
    /// (preflight failed).
    pub fn poll(&self, duration_secs: f64, result: &str) {
        self.poll_cycles
            .with_label_values(&[bounded(result, POLL_RESULTS)])
            .inc();
        if duration_secs.is_finite() && duration_secs >= 0.0 {
            self.poll_duration.observe(duration_secs);
        }
    }

    /// The orchestrator's part of one poll tick: applying the candidate reads, the dispatch
    /// pass included (the tracker reads themselves run off the orchestrator thread).
    pub fn dispatch_pass(&self, duration_secs: f64) {
        if duration_secs.is_finite() && duration_secs >= 0.0 {
            self.dispatch_pass_duration.observe(duration_secs);
        }
    }

    /// A poll tick skipped because the previous poll's tracker reads were still out: counted
    /// as a `skipped` poll cycle, with no duration (no poll ran).
    pub fn poll_skipped(&self) {
        self.poll_cycles.with_label_values(&["skipped"]).inc();
    }

    /// A retry was scheduled; `trigger` is a [`RetryTrigger`](crate::domain::RetryTrigger)
    /// word, anything else counts as `other`.
    pub fn retry(&self, trigger: &str) {
        self.retries
            .with_label_values(&[bounded(trigger, RETRY_TRIGGERS)])
            .inc();
    }

    /// A per-issue reconciliation outcome (`stop`, `cleanup`, `keep`, `sweep_cleanup`).
    pub fn reconciliation(&self, action: &str) {
        self.reconciliations
            .with_label_values(&[bounded(action, RECONCILE_ACTIONS)])
            .inc();
    }

    /// A tracker request (`fetch_candidates`, `fetch_issue`, `transition`, …), `success` or
    /// `error`.
    pub fn tracker_request(&self, operation: &str, result: &str) {
        self.tracker_requests
            .with_label_values(&[
                bounded(operation, TRACKER_OPERATIONS),
                bounded(result, SUCCESS_ERROR),
            ])
            .inc();
    }

    /// A candidate the dispatch pass held; `reason` is the hold's `reason` code.
    pub fn candidate_hold(&self, reason: &str) {
        self.candidate_holds
            .with_label_values(&[bounded(reason, HOLD_REASONS)])
            .inc();
    }

    /// A dispatch's routing resolution: `rule_name` is the selection's rule, `"default"` for
    /// the `dispatch.default` block, `""` for the workflow-wide agent (layer `fallback`, rule
    /// `<none>`). Rule names come from the workflow; a capped set keeps reloads from growing
    /// the series without bound.
    pub fn dispatch_rule_match(&self, rule_name: &str) {
        let (layer, rule) = match rule_name {
            "" => ("fallback", "<none>".to_string()),
            crate::config::dispatch::DEFAULT_RULE_NAME => ("default", rule_name.to_string()),
            name => ("rule", self.rule_names.admit(name)),
        };
        self.rule_matches
            .with_label_values(&[layer, rule.as_str()])
            .inc();
    }

    /// The handoff transition after a run (`success`, `error`, `skipped`).
    pub fn handoff(&self, result: &str) {
        self.handoffs
            .with_label_values(&[bounded(result, SUCCESS_ERROR_SKIPPED)])
            .inc();
    }

    /// The in-progress transition at dispatch (`success`, `error`, `skipped`).
    pub fn dispatch_transition(&self, result: &str) {
        self.dispatch_transitions
            .with_label_values(&[bounded(result, SUCCESS_ERROR_SKIPPED)])
            .inc();
    }

    /// A tracker comment attempt (`dispatch`, `completion`, `failure`; `success`/`error`).
    pub fn tracker_comment(&self, lifecycle: &str, result: &str) {
        self.tracker_comments
            .with_label_values(&[
                bounded(lifecycle, COMMENT_LIFECYCLES),
                bounded(result, SUCCESS_ERROR),
            ])
            .inc();
    }

    /// An agent tool call; `tool` is free-form (capped), `result` `success` or `error`.
    pub fn tool_call(&self, tool: &str, result: &str) {
        let tool = self.tool_names.admit(tool);
        self.tool_calls
            .with_label_values(&[tool.as_str(), bounded(result, SUCCESS_ERROR)])
            .inc();
    }

    /// A CI status check (`passing`, `pending`, `failing`, `error`).
    pub fn ci_status_check(&self, result: &str) {
        self.ci_checks
            .with_label_values(&[bounded(result, CI_RESULTS)])
            .inc();
    }

    /// A CI escalation (`label`, `comment`, `error`).
    pub fn ci_escalation(&self, action: &str) {
        self.ci_escalations
            .with_label_values(&[bounded(action, ESCALATION_ACTIONS)])
            .inc();
    }

    /// A review check (`dispatched`, `error`, `skipped`).
    pub fn review_check(&self, result: &str) {
        self.review_checks
            .with_label_values(&[bounded(result, REVIEW_RESULTS)])
            .inc();
    }

    /// A review escalation (`label`, `comment`, `error`).
    pub fn review_escalation(&self, action: &str) {
        self.review_escalations
            .with_label_values(&[bounded(action, ESCALATION_ACTIONS)])
            .inc();
    }

    /// One self-review iteration (`pass`, `iterate`, `none`).
    pub fn self_review_iteration(&self, verdict: &str) {
        self.self_review_iterations
            .with_label_values(&[bounded(verdict, SELF_REVIEW_VERDICTS)])
            .inc();
    }

    /// One finished self-review session and its final verdict (free-form, capped).
    pub fn self_review_session(&self, final_verdict: &str) {
        let v = self.verdicts.admit(final_verdict);
        self.self_review_sessions
            .with_label_values(&[v.as_str()])
            .inc();
    }

    /// A self-review session hit its iteration cap without a pass.
    pub fn self_review_cap_reached(&self) {
        self.self_review_cap.inc();
    }

    /// One self-review verification command run (label: its first 64 characters, capped).
    pub fn self_review_verification(&self, command: &str, duration_secs: f64) {
        let c = self.commands.admit(command);
        if duration_secs.is_finite() && duration_secs >= 0.0 {
            self.verification_duration
                .with_label_values(&[c.as_str()])
                .observe(duration_secs);
        }
    }

    // ---- exposition --------------------------------------------------------------------

    /// The whole exposition, with the gauges set to `gauges` (taken at scrape time).
    /// Sets the spend window gauges from the published snapshot, before a render: a window
    /// that is not listed (its ceiling is off) has no series.
    pub fn set_spend(&self, windows: &[SpendGauge]) {
        self.spend.set(windows);
    }

    pub fn render(&self, gauges: &GaugeValues) -> String {
        self.gauges.set(gauges);
        if let Ok(_one) = self.sandbox_sync.lock() {
            let total = crate::sandbox::denied_total();
            self.sandbox_denied
                .inc_by(total.saturating_sub(self.sandbox_denied.get()));
        }
        self.reg.encode()
    }
}

#[cfg(test)]
mod tests;
