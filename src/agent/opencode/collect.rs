//! A stream parser that only collects stdout, for the short `opencode export` call, so it
//! runs under the same supervisor (process group, line cap, deadline) as a turn.

use crate::agent::error::AgentErrorKind;
use crate::agent::event::{AgentEvent, TokenUsage, TurnOutcome};
use crate::agent::stream::{StreamParser, TurnEnd, shared_outcome};

/// Collects every stdout line, joined with newlines.
#[derive(Debug, Default)]
pub struct CollectParser {
    text: String,
}

impl CollectParser {
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl StreamParser for CollectParser {
    fn on_spawn(&mut self, _pid: u32) -> Vec<AgentEvent> {
        Vec::new()
    }

    fn on_line(&mut self, line: &[u8]) -> Vec<AgentEvent> {
        self.text.push_str(&String::from_utf8_lossy(line));
        self.text.push('\n');
        Vec::new()
    }

    fn finish(&mut self, end: &TurnEnd) -> (TurnOutcome, Vec<AgentEvent>) {
        let outcome = shared_outcome(end).unwrap_or_else(|| {
            match end.exit.and_then(|e| e.code).unwrap_or(0) {
                0 => TurnOutcome::Completed {
                    message: String::new(),
                },
                code => TurnOutcome::Failed {
                    message: format!("exited with code {code}"),
                    kind: AgentErrorKind::PortExit,
                },
            }
        });
        (outcome, Vec::new())
    }

    fn session_id(&self) -> Option<String> {
        None
    }

    fn usage(&self) -> Option<TokenUsage> {
        None
    }

    fn model(&self) -> Option<String> {
        None
    }
}
