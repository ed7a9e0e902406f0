//! `workspace_history`: the issue's earlier runs (newest first, at most ten) from the database,
//! read through a read-only connection.

use serde_json::{Map, Value, json};

use super::tool::{Tool, ToolError, empty_schema, no_arguments};
use crate::store::{ReadConn, RunFilter};

/// Runs listed at most.
pub const MAX_ENTRIES: usize = 10;

pub struct HistoryTool {
    pub issue_id: String,
    pub db: ReadConn,
}

impl Tool for HistoryTool {
    fn name(&self) -> &'static str {
        "workspace_history"
    }

    fn description(&self) -> &'static str {
        "Earlier attempts on this issue, newest first (at most 10): attempt, agent, start and end times, status and error."
    }

    fn input_schema(&self) -> Value {
        empty_schema()
    }

    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        no_arguments(arguments)?;
        let filter = RunFilter {
            issue_id: Some(self.issue_id.clone()),
            ..Default::default()
        };
        let page = self
            .db
            .list_runs(&filter, None, MAX_ENTRIES)
            .map_err(|e| ToolError::message(format!("run history unavailable: {e}")))?;
        let entries: Vec<Value> = page
            .runs
            .iter()
            .map(|r| {
                json!({
                    "attempt": r.attempt,
                    "agent_adapter": r.agent_kind,
                    "started_at": crate::clock::rfc3339_ms(r.started_at_ms),
                    "completed_at": crate::clock::rfc3339_ms(r.completed_at_ms),
                    "status": r.status.as_str(),
                    "error": r.error,
                })
            })
            .collect();
        Ok(json!({"issue_id": self.issue_id, "entries": entries}))
    }
}
