//! `cost_budget`: what the issue has spent against its budgets (`agent.max_tokens`,
//! `agent.max_cost_usd`, `agent.max_sessions`), under the API's names. Finished sessions come
//! from the database (read-only); the session running now is asked of the daemon, whose figures
//! include it. When the daemon cannot be asked the answer is the database's alone, marked
//! `"live": false` with the reason. An unconfigured limit reads 0.

use serde_json::{Map, Value, json};

use super::live::{DaemonApi, LiveIssue};
use super::tool::{Tool, ToolError, empty_schema, no_arguments};
use crate::store::{IssueSpend, ReadConn};

/// The limits, as configured (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budgets {
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_sessions: Option<u64>,
}

pub struct CostBudgetTool {
    pub issue_id: String,
    pub issue_identifier: String,
    pub budgets: Budgets,
    /// `None` when the database did not open: the figures then come from the daemon alone.
    pub db: Option<ReadConn>,
    /// `None` when no `SORTIE_API_URL` was given.
    pub daemon: Option<DaemonApi>,
}

/// The issue's figures before the budgets are laid over them.
#[derive(Debug, Clone, Default, PartialEq)]
struct Spend {
    used_tokens: u64,
    used_sessions: u64,
    used_usd: f64,
    session_running: Option<bool>,
    session_tokens: Option<u64>,
    session_cost_usd: Option<f64>,
}

impl Spend {
    fn of_database(s: &IssueSpend) -> Spend {
        Spend {
            used_tokens: s.uncached,
            used_sessions: s.sessions,
            used_usd: s.cost.usd,
            ..Spend::default()
        }
    }

    /// The daemon's figures: the running session's row carries the issue's totals with it.
    fn with_live(mut self, detail: &Value) -> Spend {
        let running = &detail["running"];
        if !running.is_object() {
            self.session_running = Some(false);
            return self;
        }
        self.session_running = Some(true);
        if let Some(t) = running["used_tokens"].as_u64() {
            self.used_tokens = self.used_tokens.max(t);
        }
        if let Some(n) = running["used_sessions"].as_u64() {
            self.used_sessions = self.used_sessions.max(n);
        }
        if let Some(usd) = running["issue_estimated_cost_usd"].as_f64() {
            self.used_usd = self.used_usd.max(usd);
        }
        self.session_tokens = running["uncached_tokens"].as_u64();
        self.session_cost_usd = running["estimated_cost_usd"].as_f64();
        self
    }
}

fn remaining_u(budget: Option<u64>, used: u64) -> Value {
    budget
        .filter(|b| *b > 0)
        .map_or(Value::Null, |b| json!(b.saturating_sub(used)))
}

impl Tool for CostBudgetTool {
    fn name(&self) -> &'static str {
        "cost_budget"
    }

    fn description(&self) -> &'static str {
        "This issue's spend against its budgets: tokens (uncached), sessions and estimated US dollars used, each limit (0 = no limit) and what is left, including the session running now when the daemon can be asked (live)."
    }

    fn input_schema(&self) -> Value {
        empty_schema()
    }

    fn call(&self, arguments: &Map<String, Value>) -> Result<Value, ToolError> {
        no_arguments(arguments)?;
        let stored = match &self.db {
            Some(db) => Some(
                db.issue_spend(&self.issue_id)
                    .map_err(|e| ToolError::message(format!("run history unavailable: {e}")))?,
            ),
            None => None,
        };
        let live = match &self.daemon {
            Some(d) => d.issue(&self.issue_identifier),
            None => Err(super::live::LiveError::NotConfigured),
        };
        let base = stored.as_ref().map(Spend::of_database).unwrap_or_default();
        let (spend, live_error) = match &live {
            Ok(LiveIssue::Known(detail)) => (base.with_live(detail), None),
            Ok(LiveIssue::Unknown) => (
                Spend {
                    session_running: Some(false),
                    ..base
                },
                None,
            ),
            Err(e) if stored.is_none() => {
                return Err(ToolError::message(format!(
                    "neither the database nor the daemon could be read: {e}"
                )));
            }
            Err(e) => (base, Some(e.to_string())),
        };
        let b = self.budgets;
        let budget_usd = b.max_cost_usd.filter(|v| *v > 0.0).unwrap_or(0.0);
        let mut out = json!({
            "issue_id": self.issue_id,
            "issue_identifier": self.issue_identifier,
            "used_tokens": spend.used_tokens,
            "budget_tokens": b.max_tokens.unwrap_or(0),
            "remaining_tokens": remaining_u(b.max_tokens, spend.used_tokens),
            "used_sessions": spend.used_sessions,
            "budget_sessions": b.max_sessions.unwrap_or(0),
            "remaining_sessions": remaining_u(b.max_sessions, spend.used_sessions),
            "used_usd": spend.used_usd,
            "budget_usd": budget_usd,
            "remaining_usd": if budget_usd > 0.0 { json!((budget_usd - spend.used_usd).max(0.0)) } else { Value::Null },
            "session_running": spend.session_running,
            "session_tokens": spend.session_tokens,
            "session_cost_usd": spend.session_cost_usd,
            "live": live_error.is_none(),
        });
        if let Some(e) = live_error {
            out["live_error"] = Value::String(format!(
                "the running daemon could not be asked; figures are from the database (finished sessions only): {e}"
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_row_adds_the_live_session() {
        let stored = IssueSpend {
            sessions: 2,
            uncached: 700,
            ..Default::default()
        };
        let detail = json!({"running": {
            "used_tokens": 760, "used_sessions": 2, "issue_estimated_cost_usd": 0.5,
            "uncached_tokens": 60, "estimated_cost_usd": 0.1
        }});
        let s = Spend::of_database(&stored).with_live(&detail);
        assert_eq!(s.used_tokens, 760);
        assert_eq!(s.session_tokens, Some(60));
        assert_eq!(s.session_running, Some(true));
        let idle = Spend::of_database(&stored).with_live(&json!({"running": null}));
        assert_eq!(idle.used_tokens, 700);
        assert_eq!(idle.session_running, Some(false));
    }

    #[test]
    fn without_a_daemon_the_database_answers_and_says_so() {
        let tool = CostBudgetTool {
            issue_id: "1".into(),
            issue_identifier: "MT-1".into(),
            budgets: Budgets {
                max_tokens: Some(1000),
                ..Default::default()
            },
            db: None,
            daemon: None,
        };
        // No database either: the call fails as a tool error, never a crash.
        assert!(matches!(tool.call(&Map::new()), Err(ToolError::Failed(_))));
        assert_eq!(remaining_u(Some(1000), 300), json!(700));
        assert_eq!(remaining_u(None, 300), Value::Null);
    }
}
