//! The served shape of one agent event (run events route, issue detail, SSE `agent_event`):
//! the kept members plus `seq`, `text` and `tool_line`, worded when served and never stored.

use serde_json::Value;

use super::views::event::{EventView, StageFields, ToolFields};

/// Longest message or tool argument served, in characters, before `…`.
const MAX_CHARS: usize = crate::agent::text::MESSAGE_CHARS;

const TURN_ENDING: &[&str] = &[
    "turn_completed",
    "turn_failed",
    "turn_cancelled",
    "turn_ended_with_error",
    "turn_input_required",
];

fn cut(s: &str) -> String {
    let masked = crate::mask::mask(s);
    if masked.chars().count() > MAX_CHARS {
        let mut out: String = masked.chars().take(MAX_CHARS).collect();
        out.push('…');
        out
    } else {
        masked
    }
}

fn seconds(ms: u64) -> String {
    if ms < 60_000 {
        let tenths = ms / 100;
        if tenths.is_multiple_of(10) {
            format!("{}s", tenths / 10)
        } else {
            format!("{}.{}s", tenths / 10, tenths % 10)
        }
    } else {
        super::wording::duration(ms as i64)
    }
}

/// Ends a sentence with exactly one period.
fn sentence(s: String) -> String {
    let t = s.trim_end();
    if t.ends_with('.') || t.ends_with('?') || t.ends_with('!') {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

fn with_message(head: &str, message: &str) -> String {
    if message.trim().is_empty() {
        format!("{head}.")
    } else {
        sentence(format!("{head}: {}", message.trim()))
    }
}

/// The call as one line: a shell call's command, else `Name argument`, else the name.
fn tool_line(name: Option<&str>, kind: Option<&str>, arg: Option<&str>) -> String {
    let stand_in = match kind {
        Some("shell") => "Command",
        Some("read") => "Read",
        Some("edit") => "Edit",
        Some("skill") => "Skill",
        _ => "Tool",
    };
    let name = name.filter(|n| !n.is_empty()).unwrap_or(stand_in);
    match (kind, arg.filter(|a| !a.is_empty())) {
        (Some("shell"), Some(a)) => a.to_string(),
        (_, Some(a)) => format!("{name} {a}"),
        _ => name.to_string(),
    }
}

/// The `tool_result` members and the call's line and sentence.
fn tool_result(
    get: &dyn Fn(&str) -> Option<String>,
    payload: &Value,
) -> (ToolFields, String, String) {
    let name = get("tool_name").map(|n| cut(&n));
    let kind = get("tool_kind");
    let arg = if kind.is_some() {
        get("tool_argument").map(|a| {
            cut(&a
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect::<String>())
        })
    } else {
        None
    };
    let duration = payload.get("duration_ms").and_then(Value::as_u64);
    let failed = payload
        .get("tool_error")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let line = tool_line(name.as_deref(), kind.as_deref(), arg.as_deref());
    let mut t = format!("Ran {line}");
    if let Some(d) = duration {
        t.push_str(&format!(" in {}", seconds(d)));
    }
    if failed {
        t.push_str("; it returned an error");
    }
    let fields = ToolFields {
        tool_name: name,
        tool_kind: kind,
        tool_argument: arg,
        duration_ms: duration,
        tool_error: failed,
    };
    (fields, line, format!("{t}."))
}

/// The hop decision a stage event records.
fn stage_fields(get: &dyn Fn(&str) -> Option<String>, payload: &Value) -> StageFields {
    let count = |k: &str| payload.get(k).and_then(Value::as_u64).unwrap_or(0);
    StageFields {
        issue_id: get("issue_id").unwrap_or_default(),
        issue_identifier: get("issue_identifier").unwrap_or_default(),
        source_rule: get("source_rule").unwrap_or_default(),
        target_rule: get("target_rule").unwrap_or_default(),
        target_label: get("target_label").unwrap_or_default(),
        chain_id: get("chain_id").unwrap_or_default(),
        hop_count: count("hop_count"),
        hop_ceiling: count("hop_ceiling"),
        result: get("result").unwrap_or_default(),
        reason: get("reason"),
    }
}

/// Builds the served event from its stored members (`payload` as the store keeps it or as the
/// live event serializes).
pub fn view(seq: i64, payload: &Value) -> EventView {
    let get = |k: &str| payload.get(k).and_then(Value::as_str).map(str::to_string);
    let event = get("event").unwrap_or_default();
    let message = cut(&get("message").unwrap_or_default());
    let mut v = EventView {
        seq,
        at: payload.get("at").cloned().unwrap_or(Value::Null),
        event: event.clone(),
        message: message.clone(),
        session_id: None,
        tool: None,
        stage: None,
        usage: None,
        text: String::new(),
        tool_line: None,
    };
    v.text = match event.as_str() {
        "session_started" => {
            v.session_id = Some(get("session_id").unwrap_or_default());
            "Session started.".to_string()
        }
        "startup_failed" => with_message("The session failed to start", &message),
        "notification" | "other_message" => message.clone(),
        "malformed" => with_message("The agent wrote output Sortie could not read", &message),
        "tool_result" => {
            let (fields, line, text) = tool_result(&get, payload);
            v.tool = Some(fields);
            v.tool_line = Some(line);
            text
        }
        "stage.advanced" | "stage.not_advanced" => {
            v.stage = Some(stage_fields(&get, payload));
            message.clone()
        }
        "turn_completed" => with_message("Turn completed", &message),
        "turn_failed" => with_message("Turn failed", &message),
        "turn_cancelled" => with_message("Turn cancelled", &message),
        "turn_ended_with_error" => with_message("Turn ended with an error", &message),
        "turn_input_required" => with_message("The agent asked for input", &message),
        other => with_message(&format!("Agent event {other}"), &message),
    };
    if TURN_ENDING.contains(&event.as_str()) {
        // A stored figure that does not read as totals (absent, null or malformed) serves as
        // `null`, the documented "unmeasured", rather than as whatever the row holds.
        v.usage = Some(
            payload
                .get("usage")
                .and_then(|u| serde_json::from_value(u.clone()).ok()),
        );
    }
    v
}

/// A live event from a running row's ring.
pub fn view_live(seq: u64, ev: &crate::agent::AgentEvent) -> EventView {
    let payload = serde_json::to_value(ev).unwrap_or(Value::Null);
    view(seq as i64, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn served(seq: i64, payload: &Value) -> Value {
        super::super::views::to_value(&view(seq, payload))
    }

    #[test]
    fn tool_result_reads_as_one_line() {
        let v = served(
            41,
            &json!({"event": "tool_result", "at": "2026-03-26T14:29:31Z", "message": "",
                    "tool_name": "Bash", "tool_kind": "shell", "tool_argument": "go test ./...",
                    "duration_ms": 2400, "tool_error": false}),
        );
        assert_eq!(
            v,
            json!({"seq": 41, "at": "2026-03-26T14:29:31Z", "event": "tool_result", "message": "",
                   "tool_name": "Bash", "tool_kind": "shell", "tool_argument": "go test ./...",
                   "duration_ms": 2400, "tool_error": false, "text": "Ran go test ./... in 2.4s.",
                   "tool_line": "go test ./..."})
        );
        let keys: Vec<&String> = v
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys.last().map(|s| s.as_str()), Some("tool_line"));
    }

    #[test]
    fn turn_completed_carries_usage_or_null() {
        let v = served(
            42,
            &json!({"event": "turn_completed", "at": "x", "message": "Working on tests"}),
        );
        assert_eq!(v["text"], "Turn completed: Working on tests.");
        assert_eq!(v["usage"], Value::Null);
    }

    #[test]
    fn other_events() {
        let v = served(
            1,
            &json!({"event": "session_started", "at": "x", "message": "", "session_id": "s"}),
        );
        assert_eq!(v["text"], "Session started.");
        assert_eq!(v["session_id"], "s");
        assert!(v.get("agent_pid").is_none());
        let v = served(
            2,
            &json!({"event": "notification", "at": "x", "message": "hello"}),
        );
        assert_eq!(v["text"], "hello");
        let v = served(
            3,
            &json!({"event": "tool_result", "at": "x", "message": "", "tool_name": "Read", "tool_kind": "read", "tool_argument": "src/a.rs", "tool_error": true}),
        );
        assert_eq!(v["text"], "Ran Read src/a.rs; it returned an error.");
        let long = "x".repeat(1200);
        let v = served(
            4,
            &json!({"event": "notification", "at": "x", "message": long}),
        );
        assert_eq!(v["message"].as_str().map(|s| s.chars().count()), Some(1000));
    }
}
