//! The config maps handed to adapter constructors (config-cli.md §1.2, §1.8): the resolved core
//! fields, shallow-merged with the adapter's pass-through block (keys already present win).

use serde_json::{Map, Value};

use super::schema::ServiceConfig;

fn put_opt(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(s) = v {
        m.insert(key.to_string(), Value::String(s.clone()));
    }
}

fn merge_block(m: &mut Map<String, Value>, block: Option<&Map<String, Value>>) {
    for (k, v) in block.into_iter().flatten() {
        if !m.contains_key(k) {
            m.insert(k.clone(), v.clone());
        }
    }
}

fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::String).collect())
}

impl ServiceConfig {
    /// Constructor map for the tracker adapter: resolved `tracker.*` values, then the block named
    /// by `tracker.kind`. For the file tracker `path` is the absolute [`Self::file_tracker_path`].
    pub fn tracker_adapter_config(&self) -> Map<String, Value> {
        let t = &self.tracker;
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(t.kind.clone()));
        put_opt(&mut m, "endpoint", &t.endpoint);
        put_opt(&mut m, "api_key", &t.api_key);
        put_opt(&mut m, "project", &t.project);
        m.insert("active_states".into(), strings(&t.active_states));
        m.insert("terminal_states".into(), strings(&t.terminal_states));
        put_opt(&mut m, "query_filter", &t.query_filter);
        put_opt(&mut m, "handoff_state", &t.handoff_state);
        put_opt(&mut m, "in_progress_state", &t.in_progress_state);
        put_opt(&mut m, "no_change_state", &t.no_change_state);
        if let Some(p) = &self.file_tracker_path {
            m.insert("path".into(), Value::String(p.display().to_string()));
        }
        merge_block(&mut m, self.adapter_block(&t.kind));
        m
    }

    /// Constructor map for the agent adapter: only `kind`, `command` and the three timeouts
    /// (orchestrator-only keys are withheld so they cannot shadow same-named adapter keys such
    /// as `claude-code.max_turns`), then the block named by `agent.kind`.
    pub fn agent_adapter_config(&self) -> Map<String, Value> {
        let a = &self.agent;
        let mut m = Map::new();
        m.insert("kind".into(), Value::String(a.kind.clone()));
        put_opt(&mut m, "command", &a.command);
        m.insert("turn_timeout_ms".into(), a.turn_timeout_ms.into());
        m.insert("read_timeout_ms".into(), a.read_timeout_ms.into());
        m.insert(
            "stall_timeout_ms".into(),
            a.stall_timeout_ms.unwrap_or(0).into(),
        );
        merge_block(&mut m, self.adapter_block(&a.kind));
        m
    }
}
