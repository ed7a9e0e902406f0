//! The state document's `config` member: the workflow in force, without credentials.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use crate::orchestrator::snapshot::ConfigView;

use super::running::{ArrivalName, usage_arrival_of};

mod dispatch;
mod reactions;

pub use dispatch::DispatchConfigView;
pub use reactions::ReactionsView;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TrackerConfigView {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub active_states: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_change_state: Option<String>,
    pub terminal_states: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PollingConfigView {
    pub interval_ms: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct AgentConfigView {
    pub kind: String,
    /// `none` also for a kind that is not registered.
    pub usage_arrival: ArrivalName,
    /// The agent command new dispatches run (a reload applies it; running sessions keep the
    /// one they started with), with secrets masked; null: the kind's default binary.
    pub command: Option<String>,
    pub max_turns: u32,
    pub stall_timeout_ms: Option<u64>,
    pub max_retry_backoff_ms: u64,
    pub max_sessions: Option<u64>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_concurrent_agents: u32,
    pub max_concurrent_agents_by_state: BTreeMap<String, u32>,
}

/// `config.worker`: the SSH hosts as written (names only, never options or keys).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkerConfigView {
    pub ssh_hosts: Vec<String>,
    pub max_concurrent_agents_per_host: Option<u32>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Config")]
pub struct ConfigDoc {
    pub tracker: TrackerConfigView,
    pub polling: PollingConfigView,
    pub agent: AgentConfigView,
    pub worker: WorkerConfigView,
    pub dispatch: DispatchConfigView,
    pub reactions: ReactionsView,
    /// One member per `token_rates` entry in force, keyed as written; null when there is none.
    pub token_rates: Option<BTreeMap<String, TokenRateEntryView>>,
}

/// One `token_rates` entry as configured (an unset or rejected rate is null, never the rate
/// that substitutes for it).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TokenRateEntryView {
    pub input_per_mtok: Option<f64>,
    pub output_per_mtok: Option<f64>,
    pub cache_read_per_mtok: Option<f64>,
    pub cache_write_per_mtok: Option<f64>,
    pub complete: bool,
    pub per_kind: bool,
}

fn token_rates_view(
    t: &crate::pricing::TokenRates,
) -> Option<BTreeMap<String, TokenRateEntryView>> {
    let entries: BTreeMap<String, TokenRateEntryView> = t
        .entries
        .iter()
        .map(|(k, e)| {
            let view = TokenRateEntryView {
                input_per_mtok: e.rates.input_per_mtok,
                output_per_mtok: e.rates.output_per_mtok,
                cache_read_per_mtok: e.rates.cache_read_per_mtok,
                cache_write_per_mtok: e.rates.cache_write_per_mtok,
                complete: e.complete(),
                per_kind: e.per_kind,
            };
            (k.clone(), view)
        })
        .collect();
    (!entries.is_empty()).then_some(entries)
}

impl ConfigDoc {
    pub fn build(c: &ConfigView) -> ConfigDoc {
        let state = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        ConfigDoc {
            tracker: TrackerConfigView {
                kind: c.tracker_kind.clone(),
                project: c.tracker_project.clone(),
                active_states: c.active_states.clone(),
                in_progress_state: state(&c.in_progress_state),
                handoff_state: state(&c.handoff_state),
                no_change_state: state(&c.no_change_state),
                terminal_states: c.terminal_states.clone(),
            },
            polling: PollingConfigView {
                interval_ms: c.poll_interval_ms,
            },
            agent: AgentConfigView {
                kind: c.agent_kind.clone(),
                usage_arrival: match usage_arrival_of(&c.agent_kind) {
                    ArrivalName::Unknown => ArrivalName::None,
                    a => a,
                },
                command: c.agent_command.clone(),
                max_turns: c.max_turns,
                stall_timeout_ms: c.stall_timeout_ms,
                max_retry_backoff_ms: c.max_retry_backoff_ms,
                max_sessions: c.max_sessions,
                max_tokens: c.max_tokens,
                max_cost_usd: c.max_cost_usd,
                max_concurrent_agents: c.max_concurrent_agents,
                max_concurrent_agents_by_state: c.max_concurrent_agents_by_state.clone(),
            },
            worker: WorkerConfigView {
                ssh_hosts: c.ssh_hosts.clone(),
                max_concurrent_agents_per_host: c.max_concurrent_agents_per_host,
            },
            dispatch: DispatchConfigView::build(&c.dispatch, &c.agent_kind),
            reactions: ReactionsView::build(&c.reactions),
            token_rates: token_rates_view(&c.token_rates),
        }
    }
}
