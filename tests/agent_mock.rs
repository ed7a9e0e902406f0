//! The in-process `mock` agent kind.

use crossbeam_channel::unbounded;
use sortie::agent::{
    AgentErrorKind, AgentEventKind, AgentSettings, CancelReason, CancelToken, StartSessionParams,
    TokenUsage, TurnOutcome,
};
use sortie::clock::{Clock, ManualClock};
use sortie::registry::{adapter_for_with_clock, caps_for_kind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn settings(block: serde_json::Value) -> AgentSettings {
    AgentSettings {
        kind: "mock".into(),
        block: block.as_object().cloned().unwrap_or_default(),
        ..AgentSettings::default()
    }
}

fn start(block: serde_json::Value) -> Box<dyn sortie::agent::AgentSession> {
    let clock = Arc::new(ManualClock::new(5_000)) as Arc<dyn Clock>;
    let adapter = adapter_for_with_clock(&settings(block), clock).unwrap_or_else(|e| panic!("{e}"));
    adapter
        .start_session(StartSessionParams {
            workspace: PathBuf::from("/tmp/ws"),
            ..StartSessionParams::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_turn_emits_the_scripted_sequence() {
    let mut s = start(serde_json::json!({
        "events_per_turn": 2, "model_name": "mock-model", "cache_read_tokens_per_turn": 30,
        "tool_calls": [{"tool_name": "Bash", "duration_ms": 12, "error": true}]
    }));
    let (tx, rx) = unbounded();
    let r = s.run_turn("p", &tx, &CancelToken::new());
    let kinds: Vec<&str> = rx
        .try_iter()
        .map(|e| e.kind.type_name())
        .collect::<Vec<_>>();
    assert_eq!(
        kinds,
        [
            "session_started",
            "notification",
            "notification",
            "token_usage",
            "tool_result",
            "turn_completed"
        ]
    );
    assert_eq!(r.usage, Some(TokenUsage::new(100, 50, 30, 0)));
    assert_eq!(r.model.as_deref(), Some("mock-model"));
    assert_eq!(r.session_id.as_deref(), Some("mock-session-001"));
}

#[test]
fn outcomes_follow_the_script_per_turn() {
    let mut s = start(serde_json::json!({
        "turn_outcomes": ["completed", "failed", "cancelled", "error", "input_required"]
    }));
    let (tx, rx) = unbounded();
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(
            s.run_turn("p", &tx, &CancelToken::new())
                .outcome
                .error_kind(),
        );
    }
    assert_eq!(
        got,
        [
            None,
            Some(AgentErrorKind::TurnFailed),
            Some(AgentErrorKind::TurnCancelled),
            Some(AgentErrorKind::PortExit),
            Some(AgentErrorKind::TurnInputRequired),
            None
        ]
    );
    let terminals: Vec<&str> = rx
        .try_iter()
        .filter(|e| e.kind.is_terminal())
        .map(|e| e.kind.type_name())
        .collect();
    assert_eq!(
        terminals,
        [
            "turn_completed",
            "turn_failed",
            "turn_cancelled",
            "turn_ended_with_error",
            "turn_input_required",
            "turn_completed"
        ]
    );
}

#[test]
fn a_cancel_during_the_delay_ends_the_turn() {
    let mut s = start(serde_json::json!({"turn_delay_ms": 600_000}));
    let (tx, rx) = unbounded();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let handle = std::thread::spawn(move || {
        let r = s.run_turn("p", &tx, &c2);
        r.outcome
    });
    // Wait until the turn is inside its delay (token_usage precedes it), then cancel.
    let saw_usage = rx
        .iter()
        .take_while(|e| !matches!(e.kind, AgentEventKind::TokenUsage { .. }))
        .count();
    assert!(saw_usage >= 1);
    cancel.cancel(CancelReason::Shutdown);
    let outcome = handle.join().unwrap_or_else(|_| panic!("mock panicked"));
    assert_eq!(
        outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::Shutdown
        }
    );
    let last = rx
        .recv_timeout(Duration::from_secs(5))
        .map(|e| e.kind.type_name());
    assert_eq!(last.ok(), Some("turn_cancelled"));
}

#[test]
fn start_and_stop_errors_and_config_validation() {
    let clock = Arc::new(ManualClock::new(0)) as Arc<dyn Clock>;
    let a = adapter_for_with_clock(
        &settings(serde_json::json!({"start_error": true})),
        clock.clone(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let err = a
        .start_session(StartSessionParams {
            workspace: PathBuf::from("/w"),
            ..StartSessionParams::default()
        })
        .err()
        .map(|e| e.kind);
    assert_eq!(err, Some(AgentErrorKind::AgentNotFound));
    let err = a
        .start_session(StartSessionParams::default())
        .err()
        .map(|e| e.kind);
    assert_eq!(err, Some(AgentErrorKind::InvalidWorkspaceCwd));

    let mut s = start(serde_json::json!({"stop_error": true}));
    assert!(s.stop().is_err());

    assert!(
        adapter_for_with_clock(
            &settings(serde_json::json!({"input_tokens_per_turn": 1.5})),
            clock.clone()
        )
        .is_err()
    );
    assert!(
        adapter_for_with_clock(
            &settings(serde_json::json!({"input_tokens_per_turn": 2.0})),
            clock.clone()
        )
        .is_ok()
    );
    assert!(
        adapter_for_with_clock(
            &settings(serde_json::json!({"turn_outcomes": ["exploded"]})),
            clock
        )
        .is_err()
    );
    assert_eq!(
        caps_for_kind("mock").map(|c| c.requires_command),
        Some(false)
    );
}
