//! `dispatch` → [`DispatchConfig`]: the rules, the default selection, the hop ceiling and
//! the per-rule templates, with the load checks of the reference (first error stops).
//!
//! Order of checks: the block's shape, then each rule in list order (`rules`), then
//! `dispatch.default`, then the cross-rule checks (`chains`: names, reachability, stage labels,
//! `next` links, the hop ceiling, collisions with states and written labels), and last the
//! template files (`templates`), the only checks that read the filesystem. Environment
//! overrides never reach this block.

use std::path::Path;

use serde_json::{Map, Value};

use super::dispatch::{DispatchConfig, DispatchSelection};
use super::error::{ConfigError, ConfigWarning};
use super::reactions::ReactionsConfig;
use super::schema::{AgentConfig, TrackerConfig};

mod chains;
mod matcher;
mod rules;
pub mod settings_vars;
mod templates;

/// The label a parked issue gets (the orchestrator's `DEFAULT_PARKING_LABEL`; config sits
/// below it and cannot name it). A stage label must not equal it.
pub const PARKING_LABEL: &str = "needs-human";

/// The advisory drawn when `agent.max_sessions` cannot cover the longest chain.
pub const MAX_SESSIONS_CHECK: &str = "dispatch.next.max_sessions";

/// What the dispatch checks read from the rest of the configuration.
pub(super) struct DispatchInputs<'a> {
    pub tracker: &'a TrackerConfig,
    pub agent: &'a AgentConfig,
    pub reactions: &'a ReactionsConfig,
    pub workflow_dir: &'a Path,
    /// The environment `$VAR` in a rule's settings block reads.
    pub env: &'a std::collections::BTreeMap<String, String>,
}

/// Builds `dispatch`; the default value when the block is absent or null.
pub(super) fn build_dispatch(
    raw: &Map<String, Value>,
    inputs: &DispatchInputs<'_>,
    warnings: &mut Vec<ConfigWarning>,
    secrets: &mut Vec<String>,
) -> Result<DispatchConfig, ConfigError> {
    let block = match raw.get("dispatch") {
        None | Some(Value::Null) => return Ok(DispatchConfig::default()),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(not_a_map("dispatch", other)),
    };
    for key in block.keys() {
        if !["rules", "default", "max_consecutive_hops"].contains(&key.as_str()) {
            return Err(ConfigError::field(
                format!("dispatch.{key}"),
                "unknown key; dispatch accepts rules, default and max_consecutive_hops",
            ));
        }
    }
    let default = build_default(block.get("default"))?;
    let rules = rules::build_rules(block.get("rules"), &default, &inputs.agent.kind)?;
    let mut cfg = DispatchConfig {
        rules,
        default,
        max_consecutive_hops: None,
        templates: Default::default(),
    };
    chains::check_rules(&cfg)?;
    cfg.max_consecutive_hops =
        chains::max_consecutive_hops(block.get("max_consecutive_hops"), &cfg)?;
    chains::check_handoff(&cfg, inputs.tracker)?;
    chains::check_collisions(&cfg, inputs.tracker, inputs.reactions)?;
    cfg.templates = templates::read_templates(&cfg, inputs.workflow_dir)?;
    max_sessions_advisory(&cfg, inputs.agent, warnings);
    settings_key_warnings(&cfg, &inputs.agent.kind, warnings);
    settings_vars::resolve(&mut cfg, &inputs.agent.kind, inputs.env, warnings, secrets);
    Ok(cfg)
}

/// `dispatch.default`: `agent` and `template` only.
fn build_default(v: Option<&Value>) -> Result<DispatchSelection, ConfigError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(DispatchSelection::default()),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(not_a_map("dispatch.default", other)),
    };
    for key in m.keys() {
        if crate::registry::agent(key).is_some() {
            return Err(ConfigError::field(
                format!("dispatch.default.{key}"),
                format!(
                    "dispatch.default carries no settings block; the top-level {key} block holds the default settings of agent kind {key:?}"
                ),
            ));
        }
        if key != "agent" && key != "template" {
            return Err(ConfigError::field(
                format!("dispatch.default.{key}"),
                "unknown key; dispatch.default accepts only agent and template",
            ));
        }
    }
    Ok(DispatchSelection {
        agent: rules::agent_kind(m, "dispatch.default")?,
        template: rules::template_path(m, "dispatch.default")?,
    })
}

/// `dispatch.next.max_sessions`: a chain needs one session per rule on it.
fn max_sessions_advisory(cfg: &DispatchConfig, agent: &AgentConfig, out: &mut Vec<ConfigWarning>) {
    let Some(longest) = cfg.chains().into_iter().max_by_key(Vec::len) else {
        return;
    };
    let runs = longest.len() as u64;
    if let Some(max) = agent.max_sessions.filter(|m| *m > 0 && *m < runs) {
        out.push(ConfigWarning::new(
            MAX_SESSIONS_CHECK,
            "agent.max_sessions",
            format!(
                "agent.max_sessions is {max}, but the longest stage chain ({}) needs {runs} runs; an issue stops before its chain ends",
                longest.join(" -> ")
            ),
        ));
    }
}

/// `unknown_key` for a settings-block key the rule's kind does not read, as for a top-level
/// block (`kubernetes`, the image of the rule's Jobs, is checked with `worker.kubernetes`).
fn settings_key_warnings(cfg: &DispatchConfig, workflow_kind: &str, out: &mut Vec<ConfigWarning>) {
    for (i, rule) in cfg.rules.iter().enumerate() {
        let kind = cfg.rule_kind(rule, workflow_kind);
        let (Some(d), Some(block)) = (crate::registry::agent(kind), rule.settings.as_ref()) else {
            continue;
        };
        let known =
            |k: &str| d.block_keys.contains(&k) || k == super::kubernetes::RULE_SETTINGS_KEY;
        for key in block.keys().filter(|k| !known(k)) {
            out.push(ConfigWarning::new(
                "unknown_key",
                format!("dispatch.rules[{i}].{kind}.{key}"),
                super::validate::unknown_message(
                    "not a key this agent kind reads",
                    super::validate::closest(key, d.block_keys.iter().copied()),
                ),
            ));
        }
    }
}

/// How a value that is not of the expected kind is named in the stage-chain messages.
pub(super) fn shape(v: &Value) -> &'static str {
    match v {
        Value::Number(_) => "a number",
        Value::Bool(_) => "a true/false value",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
        _ => "a value of an unexpected type",
    }
}

pub(super) fn not_a_map(field: &str, v: &Value) -> ConfigError {
    ConfigError::field(field, format!("expected a map, got {}", shape(v)))
}
