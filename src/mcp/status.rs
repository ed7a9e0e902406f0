//! `sortie_status`: the running session's progress (turn, turns left, attempt, duration,
//! tokens) as the supervisor keeps it in `<workspace>/.sortie/state.json`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::tool::{Tool, ToolError, empty_schema, no_arguments};
use crate::agent::state_file;
use crate::clock::Clock;

pub struct StatusTool {
    pub workspace: PathBuf,
    pub clock: Arc<dyn Clock>,
}

impl Tool for StatusTool {
    fn name(&self) -> &'static str {
        "sortie_status"
    }

    fn description(&self) -> &'static str {
        "The current session's progress: turn number, turns left, attempt, how long the session has run and the tokens it has used so far."
    }

    fn input_schema(&self) -> Value {
        empty_schema()
    }

    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        no_arguments(arguments)?;
        let st = state_file::read(&self.workspace).map_err(|e| {
            ToolError::message(format!(
                "session state unavailable ({}): {e}",
                state_file::state_path(&self.workspace).display()
            ))
        })?;
        let started: jiff::Timestamp = st.started_at.parse().map_err(|e| {
            ToolError::message(format!(
                "session state: bad started_at {:?}: {e}",
                st.started_at
            ))
        })?;
        let elapsed_ms = self.clock.now_ms() - started.as_millisecond();
        Ok(json!({
            "turn_number": st.turn_number,
            "max_turns": st.max_turns,
            "turns_remaining": st.max_turns.saturating_sub(st.turn_number),
            "attempt": st.attempt,
            "session_duration_seconds": (elapsed_ms.max(0) / 1000),
            "tokens": {
                "input_tokens": st.input_tokens,
                "output_tokens": st.output_tokens,
                "total_tokens": st.total_tokens,
                "cache_read_tokens": st.cache_read_tokens,
                "cache_write_tokens": st.cache_write_tokens,
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn reports_the_state_file_and_an_error_without_one() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let start = 1_774_533_600_000;
        let tool = StatusTool {
            workspace: d.path().to_path_buf(),
            clock: Arc::new(ManualClock::new(start + 90_500)),
        };
        match tool.call(&Map::new()) {
            Err(ToolError::Failed(v)) => assert!(v["error"].is_string()),
            other => panic!("{other:?}"),
        }
        let usage = crate::agent::TokenUsage::new(100, 50, 10, 0);
        let st = state_file::StateFile::new(2, 5, Some(1), start, Some(&usage));
        state_file::write(d.path(), &st).unwrap_or_else(|e| panic!("{e}"));
        let v = tool.call(&Map::new()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(v["turn_number"], 2);
        assert_eq!(v["turns_remaining"], 3);
        assert_eq!(v["attempt"], 1);
        assert_eq!(v["session_duration_seconds"], 90);
        assert_eq!(v["tokens"]["input_tokens"], 100);
        let mut extra = Map::new();
        extra.insert("x".into(), json!(1));
        assert!(matches!(
            tool.call(&extra),
            Err(ToolError::InvalidArguments(_))
        ));
    }
}
