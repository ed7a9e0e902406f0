//! The `kiro` agent kind: Kiro CLI driven over the Agent Client Protocol. A workflow written
//! for the original's `kiro` kind (`agent.command: kiro-cli` and a `kiro:` block) runs
//! unchanged: the command gains `acp -a` (Kiro's ACP entry point with every tool trusted, as an
//! unattended run needs), then `--model` and `--agent` from the block, and the session is an
//! ordinary ACP session (`super::AcpAdapter`) recorded under this kind.
//!
//! The `kiro:` block's trust keys are checked as the original checks them: `trust_all_tools`
//! and a non-empty `trust_tools` together are refused, and so is any setting that leaves a
//! tool untrusted, because an untrusted tool waits for an approval no one gives. Leaving both
//! keys out trusts every tool. Kiro reads its login from the user's home directory (`HOME`
//! and `XDG_*` are system basics every agent gets) and its own `KIRO_*` variables.

use super::{AcpAdapter, CAPS};
use crate::agent::block::BlockReader;
use crate::agent::{AgentDescriptor, AgentSettings, SettingProblem};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The configuration name of this kind (`agent.kind`, and the `kiro:` block).
pub const KIND: &str = "kiro";
/// The program when `agent.command` names none.
pub const DEFAULT_PROGRAM: &str = "kiro-cli";
/// The keys the `kiro:` block understands.
pub const BLOCK_KEYS: &[&str] = &["model", "agent", "trust_all_tools", "trust_tools"];
/// Kiro CLI's own variables.
pub const ENV_VARS: &[&str] = &["KIRO_*"];

/// This kind as the registry lists it.
pub const DESCRIPTOR: AgentDescriptor = AgentDescriptor {
    kind: KIND,
    caps: CAPS,
    block_keys: BLOCK_KEYS,
    env_vars: ENV_VARS,
    egress_hosts: &[],
    validate: |settings: &AgentSettings| -> Vec<SettingProblem> {
        KiroConfig::parse(&settings.block).1
    },
    classify_failure: super::classify_failure,
    build: |settings, clock| {
        let (config, _) = KiroConfig::parse(&settings.block);
        Ok(Arc::new(AcpAdapter::for_kind(
            KIND,
            ENV_VARS,
            converted(settings, &config),
            clock,
        )))
    },
    contract: crate::domain::contract::Contract::Suite("kiro"),
};

/// The `kiro:` block, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KiroConfig {
    /// `--model`: the model every turn runs on.
    pub model: Option<String>,
    /// `--agent`: a custom agent profile of the user's Kiro configuration.
    pub agent: Option<String>,
}

impl KiroConfig {
    /// Reads the block; the problems list is empty when the session can run unattended.
    pub fn parse(block: &Map<String, Value>) -> (KiroConfig, Vec<SettingProblem>) {
        let mut r = BlockReader::new(KIND, block);
        let config = KiroConfig {
            model: r.word("model"),
            agent: r.word("agent"),
        };
        let trust_all = r.bool("trust_all_tools");
        let trust_tools = r.string_list_len("trust_tools", "tool names");
        let mut problems = r.finish();
        problems.extend(trust_problem(trust_all, trust_tools));
        (config, problems)
    }
}

/// The original's trust rule: both keys unset trusts every tool; `trust_all_tools: true` with
/// listed tools is a conflict; anything short of full trust is refused.
fn trust_problem(trust_all: Option<bool>, trust_tools: Option<usize>) -> Option<SettingProblem> {
    match (trust_all, trust_tools) {
        (None, None) | (Some(true), None) | (Some(true), Some(0)) => None,
        (Some(true), Some(_)) => Some(problem(
            "trust_tools",
            format!("{KIND}.trust_all_tools and {KIND}.trust_tools are mutually exclusive"),
        )),
        _ => Some(problem(
            "trust_tools",
            format!(
                "{KIND}.trust_all_tools does not resolve to true: an unattended Kiro session \
                 would wait for a tool approval no one gives; set trust_all_tools: true or \
                 leave trust_all_tools and trust_tools both unset"
            ),
        )),
    }
}

fn problem(key: &str, message: String) -> SettingProblem {
    SettingProblem::new(format!("{KIND}.{key}"), message)
}

/// The command line a session runs: `agent.command` (else `kiro-cli`), then `acp -a` and the
/// block's flags.
pub fn command_line(command: Option<&str>, config: &KiroConfig) -> String {
    let base = command
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .unwrap_or(DEFAULT_PROGRAM);
    let mut line = format!("{base} acp -a");
    if let Some(m) = &config.model {
        line.push_str(&format!(" --model {m}"));
    }
    if let Some(a) = &config.agent {
        line.push_str(&format!(" --agent {a}"));
    }
    line
}

/// The settings the ACP adapter runs with: the converted command and no ACP block (the `kiro:`
/// block has been read into the command).
fn converted(settings: &AgentSettings, config: &KiroConfig) -> AgentSettings {
    AgentSettings {
        command: Some(command_line(settings.command.as_deref(), config)),
        block: Map::new(),
        ..settings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn block(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_command_gains_the_protocol_entry_point_and_the_block_flags() {
        let (c, p) = KiroConfig::parse(&block(
            json!({"model": "claude-sonnet-4.6", "agent": "dev"}),
        ));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(
            command_line(Some("kiro-cli"), &c),
            "kiro-cli acp -a --model claude-sonnet-4.6 --agent dev"
        );
        assert_eq!(
            command_line(None, &KiroConfig::default()),
            "kiro-cli acp -a"
        );
        assert_eq!(
            command_line(Some("  "), &KiroConfig::default()),
            "kiro-cli acp -a"
        );
    }

    #[test]
    fn trust_settings_short_of_full_trust_are_refused() {
        let ok = |v: Value| KiroConfig::parse(&block(v)).1.is_empty();
        assert!(ok(json!({})));
        assert!(ok(json!({"trust_all_tools": true})));
        assert!(ok(json!({"trust_all_tools": true, "trust_tools": []})));
        let msg = |v: Value| {
            KiroConfig::parse(&block(v))
                .1
                .first()
                .map(|p| p.message.clone())
                .unwrap_or_default()
        };
        assert!(
            msg(json!({"trust_all_tools": true, "trust_tools": ["read"]}))
                .contains("mutually exclusive")
        );
        assert!(msg(json!({"trust_tools": ["read", "grep"]})).contains("does not resolve to true"));
        assert!(msg(json!({"trust_all_tools": false})).contains("does not resolve to true"));
        assert!(msg(json!({"trust_tools": "read"})).contains("list of tool names"));
        assert!(msg(json!({"model": "two words"})).contains("one word"));
    }
}
