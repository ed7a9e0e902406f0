//! The contract every agent adapter must pass, written once against [`AgentAdapter`] and
//! instantiated per registered kind: `mock` in process, every other kind driving the scripted
//! `fake-agent` binary in that CLI's mode. A kind's instantiation only says how to stand up an adapter whose turn
//! completes, one whose turn runs until cancelled, and one whose turn fails; every assertion
//! lives in the shared suite. Waits are channel receives with deadlines, never sleeps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, unbounded};
use sortie::agent::{
    AgentAdapter, AgentEvent, AgentEventKind, AgentSettings, CancelReason, CancelToken,
    StartSessionParams, TokenUsage, TurnOutcome, TurnResult, UsageArrival, UsageAttribution,
};
use sortie::clock::SystemClock;
use sortie::domain::contract::Contract;
use sortie::registry;

type TestResult = Result<(), Box<dyn std::error::Error>>;
type Made = Result<UnderTest, Box<dyn std::error::Error>>;

/// How long any one wait may take before the contract calls the adapter hung.
const DEADLINE: Duration = Duration::from_secs(20);

/// An adapter stood up for one contract run; `_keep` owns its temp dir, so it lives as long.
struct UnderTest {
    adapter: Arc<dyn AgentAdapter>,
    workspace: PathBuf,
    _keep: tempfile::TempDir,
}

/// How one kind is stood up for each scripted behaviour.
struct Instantiation {
    /// Its turn runs to a normal completion with usage.
    completing: fn() -> Made,
    /// Its turn starts and then works until cancelled.
    hanging: fn() -> Made,
    /// Its turn fails (the agent process exits non-zero, or the kind's scripted failure).
    failing: fn() -> Made,
}

fn params(workspace: PathBuf) -> StartSessionParams {
    StartSessionParams {
        workspace,
        resume_session_id: None,
        issue_id: "id-CON-1".into(),
        issue_identifier: "CON-1".into(),
        mcp_config_path: None,
        remote: None,
        attempt: None,
    }
}

/// Runs one turn to its end and returns the result with every event it sent.
fn one_turn(t: &UnderTest) -> Result<(TurnResult, Vec<AgentEvent>), Box<dyn std::error::Error>> {
    let mut session = t.adapter.start_session(params(t.workspace.clone()))?;
    let (tx, rx) = unbounded();
    let result = session.run_turn("contract prompt", &tx, &CancelToken::new());
    drop(tx);
    let events = rx.try_iter().collect();
    session.stop()?;
    Ok((result, events))
}

/// Exactly one terminal event, last, of the type the outcome implies.
fn assert_one_matching_terminal(result: &TurnResult, events: &[AgentEvent]) {
    let terminal: Vec<&AgentEvent> = events.iter().filter(|e| e.kind.is_terminal()).collect();
    assert_eq!(terminal.len(), 1, "terminal events: {terminal:?}");
    let last = events.last().map(|e| e.kind.type_name());
    assert_eq!(
        last,
        Some(terminal[0].kind.type_name()),
        "terminal is not last"
    );
    assert_eq!(
        terminal[0].kind.type_name(),
        result.outcome.terminal_event(None).type_name(),
        "{:?}",
        result.outcome
    );
}

fn caps_are_registered_and_sane(inst: &Instantiation) -> TestResult {
    let t = (inst.completing)()?;
    let kind = t.adapter.kind();
    let caps = t.adapter.caps();
    let d = registry::agent(kind).ok_or("adapter kind is not in the registry")?;
    assert_eq!(d.kind, kind);
    assert_eq!(d.caps, caps, "descriptor and adapter disagree");
    assert_eq!(registry::caps_for_kind(kind), Some(caps));
    // A kind that never reports usage cannot attribute it, and the other way round.
    assert_eq!(
        caps.usage_arrival == UsageArrival::None,
        caps.usage_attribution == UsageAttribution::None,
        "{caps:?}"
    );
    Ok(())
}

fn a_turn_completes_with_normalized_events(inst: &Instantiation) -> TestResult {
    let t = (inst.completing)()?;
    let (result, events) = one_turn(&t)?;
    assert!(result.outcome.is_completed(), "{:?}", result.outcome);
    assert_eq!(result.outcome.error_kind(), None);
    let Some(AgentEventKind::SessionStarted { session_id, .. }) = events.first().map(|e| &e.kind)
    else {
        return Err(format!("first event is not session_started: {events:?}").into());
    };
    // A kind may learn its session id only at the turn's end (the CLI names it in its last
    // line); the turn's result must carry one, and an id announced at the start must be it.
    let result_id = result.session_id.as_deref().unwrap_or_default();
    assert!(!result_id.is_empty(), "the turn names no session id");
    assert!(
        session_id.is_empty() || session_id == result_id,
        "{session_id} vs {result_id}"
    );
    assert_one_matching_terminal(&result, &events);
    assert!(events.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    if t.adapter.caps().usage_arrival != UsageArrival::None {
        let summed = events
            .iter()
            .filter_map(|e| match &e.kind {
                AgentEventKind::TokenUsage { usage, .. } => Some(*usage),
                _ => None,
            })
            .fold(TokenUsage::default(), |a, u| a.plus(&u));
        let usage = result
            .usage
            .ok_or("a usage-reporting kind reported no usage")?;
        assert!(usage.total_tokens > 0);
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (summed.input_tokens, summed.output_tokens),
            "the turn's usage is the sum of its token_usage deltas"
        );
    }
    Ok(())
}

/// Waits for `session_started`, so the cancel lands on a turn that is really running; returns
/// the events seen so far.
fn wait_until_started(
    rx: &Receiver<AgentEvent>,
) -> Result<Vec<AgentEvent>, Box<dyn std::error::Error>> {
    let mut seen = Vec::new();
    loop {
        let e = rx.recv_timeout(DEADLINE)?;
        if e.kind.is_terminal() {
            return Err(format!("turn ended before it was cancelled: {:?}", e.kind).into());
        }
        let started = matches!(e.kind, AgentEventKind::SessionStarted { .. });
        seen.push(e);
        if started {
            return Ok(seen);
        }
    }
}

fn a_cancel_ends_a_running_turn_promptly(inst: &Instantiation) -> TestResult {
    let t = (inst.hanging)()?;
    let mut session = t.adapter.start_session(params(t.workspace.clone()))?;
    let (tx, rx) = unbounded();
    let (done_tx, done_rx) = unbounded();
    let cancel = CancelToken::new();
    let turn_cancel = cancel.clone();
    let runner = std::thread::spawn(move || {
        let result = session.run_turn("work until cancelled", &tx, &turn_cancel);
        let _ = done_tx.send(result);
        session
    });
    let mut events = wait_until_started(&rx)?;
    assert!(done_rx.try_recv().is_err(), "the turn ended on its own");
    cancel.cancel(CancelReason::User);
    let result = done_rx.recv_timeout(DEADLINE)?;
    let mut session = runner.join().map_err(|_| "turn thread panicked")?;
    assert_eq!(
        result.outcome,
        TurnOutcome::Cancelled {
            reason: CancelReason::User
        }
    );
    events.extend(rx.try_iter());
    assert_one_matching_terminal(&result, &events);
    session.stop()?;
    Ok(())
}

fn a_failing_turn_is_a_typed_failure(inst: &Instantiation) -> TestResult {
    let t = (inst.failing)()?;
    let (result, events) = one_turn(&t)?;
    assert!(!result.outcome.is_completed(), "{:?}", result.outcome);
    assert!(
        result.outcome.error_kind().is_some(),
        "{:?}",
        result.outcome
    );
    assert!(!result.outcome.message().is_empty());
    assert_one_matching_terminal(&result, &events);
    Ok(())
}

fn stop_is_idempotent(inst: &Instantiation) -> TestResult {
    let t = (inst.completing)()?;
    let mut session = t.adapter.start_session(params(t.workspace.clone()))?;
    session.stop()?;
    session.stop()?;
    Ok(())
}

/// Writes one `#[test]` per contract case for a kind.
macro_rules! agent_contract {
    ($module:ident, $inst:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn caps_are_registered_and_sane() -> TestResult {
                super::caps_are_registered_and_sane(&$inst)
            }
            #[test]
            fn a_turn_completes_with_normalized_events() -> TestResult {
                super::a_turn_completes_with_normalized_events(&$inst)
            }
            #[test]
            fn a_cancel_ends_a_running_turn_promptly() -> TestResult {
                super::a_cancel_ends_a_running_turn_promptly(&$inst)
            }
            #[test]
            fn a_failing_turn_is_a_typed_failure() -> TestResult {
                super::a_failing_turn_is_a_typed_failure(&$inst)
            }
            #[test]
            fn stop_is_idempotent() -> TestResult {
                super::stop_is_idempotent(&$inst)
            }
        }
    };
}

/// Builds `kind` through the registry with `block` and `command`, in a fresh temp workspace.
fn build(
    kind: &str,
    command: impl FnOnce(&std::path::Path) -> Result<Option<String>, std::io::Error>,
    block: serde_json::Value,
) -> Made {
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace)?;
    let settings = AgentSettings {
        kind: kind.to_string(),
        command: command(dir.path())?,
        turn_timeout_ms: 0,
        read_timeout_ms: 5_000,
        stop_grace_ms: 0,
        block: block.as_object().cloned().unwrap_or_default(),
        workflow_dir: dir.path().to_path_buf(),
        env: Default::default(),
        sandbox: None,
    };
    let adapter = registry::adapter_for_with_clock(&settings, Arc::new(SystemClock))?;
    Ok(UnderTest {
        adapter,
        workspace,
        _keep: dir,
    })
}

// ---- mock: the in-process scripted agent ----

fn mock(block: serde_json::Value) -> Made {
    build(sortie::agent::mock::KIND, |_| Ok(None), block)
}

const MOCK: Instantiation = Instantiation {
    completing: || mock(serde_json::json!({"events_per_turn": 2})),
    hanging: || mock(serde_json::json!({"turn_delay_ms": 600_000})),
    failing: || mock(serde_json::json!({"turn_outcomes": ["failed"]})),
};

agent_contract!(mock, MOCK);

// ---- claude-code: the real adapter driving the scripted `fake-agent` process ----

const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");

/// `env FAKE_AGENT_SCENARIO=… fake-agent`, with the scenario written beside the workspace, so
/// this test process's environment is never touched.
fn claude(scenario: &'static str) -> Made {
    build(
        sortie::agent::claude::KIND,
        move |dir| {
            let file = dir.join("scenario.jsonl");
            std::fs::write(&file, scenario)?;
            let state = dir.join("state");
            std::fs::create_dir_all(&state)?;
            Ok(Some(format!(
                "env FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} {FAKE_AGENT}",
                file.display(),
                state.display()
            )))
        },
        serde_json::Value::Null,
    )
}

const CLAUDE_CODE: Instantiation = Instantiation {
    // An empty scenario plays the default script: init, one assistant message, success.
    completing: || claude(""),
    hanging: || claude("{\"init\": {}}\n{\"hang\": true}\n"),
    failing: || claude("{\"init\": {}}\n{\"stderr\": \"boom\"}\n{\"exit\": 3}\n"),
};

agent_contract!(claude_code, CLAUDE_CODE);

// ---- the other CLIs: their adapters driving `fake-agent` in that CLI's mode ----

/// `env FAKE_AGENT_KIND=<mode> FAKE_AGENT_SCENARIO=… fake-agent`, the scenario beside the
/// workspace.
fn faked(kind: &'static str, mode: &'static str, scenario: &'static str) -> Made {
    build(
        kind,
        move |dir| {
            let file = dir.join("scenario.jsonl");
            std::fs::write(&file, scenario)?;
            let state = dir.join("state");
            std::fs::create_dir_all(&state)?;
            Ok(Some(format!(
                "env FAKE_AGENT_KIND={mode} FAKE_AGENT_SCENARIO={} FAKE_AGENT_STATE_DIR={} {FAKE_AGENT}",
                file.display(),
                state.display()
            )))
        },
        serde_json::Value::Null,
    )
}

const CODEX: Instantiation = Instantiation {
    // No steps: turn/started, one agent message, turn/completed with usage.
    completing: || faked(sortie::agent::codex::KIND, "codex", ""),
    hanging: || {
        faked(
            sortie::agent::codex::KIND,
            "codex",
            "{\"started\": true}\n{\"wait_interrupt\": true}\n",
        )
    },
    failing: || {
        faked(
            sortie::agent::codex::KIND,
            "codex",
            "{\"started\": true}\n{\"stderr\": \"boom\"}\n{\"exit\": 3}\n",
        )
    },
};

agent_contract!(codex, CODEX);

// copilot-cli is not instantiated here: its session start requires a GitHub credential in
// the daemon's own environment, which an in-process test could give only by changing this
// process's environment under other threads. tests/agent_copilot_daemon.rs runs the same cases
// (a completed turn with usage, a stall cancel with its process group, a typed failure) through
// the real binary with the credential in the daemon's environment.

const OPENCODE: Instantiation = Instantiation {
    // No steps: step_start, a text, step_finish with tokens, exit 0.
    completing: || faked(sortie::agent::opencode::KIND, "opencode", ""),
    hanging: || {
        faked(
            sortie::agent::opencode::KIND,
            "opencode",
            "{\"step_start\": {}}\n{\"hang\": true}\n",
        )
    },
    failing: || {
        faked(
            sortie::agent::opencode::KIND,
            "opencode",
            "{\"step_start\": {}}\n{\"stderr\": \"boom\"}\n{\"exit\": 3}\n",
        )
    },
};

agent_contract!(opencode, OPENCODE);

const ACP: Instantiation = Instantiation {
    // No steps: one agent message, then the prompt answers end_turn.
    completing: || {
        faked(
            sortie::agent::acp::KIND,
            "acp",
            "{\"message\": \"Done.\"}\n{\"usage\": {\"inputTokens\": 100, \"outputTokens\": 20}}\n",
        )
    },
    hanging: || {
        faked(
            sortie::agent::acp::KIND,
            "acp",
            "{\"message\": \"working\"}\n{\"wait_cancel\": true}\n",
        )
    },
    failing: || {
        faked(
            sortie::agent::acp::KIND,
            "acp",
            "{\"prompt_error\": {\"code\": -32603, \"message\": \"boom\"}}\n",
        )
    },
};

agent_contract!(agent_client_protocol, ACP);

/// Kiro is an ACP session under its own kind (the command gains `acp -a`, which the scripted
/// agent ignores).
const KIRO: Instantiation = Instantiation {
    completing: || {
        faked(
            sortie::agent::acp::kiro::KIND,
            "acp",
            "{\"message\": \"Done.\"}\n{\"usage\": {\"inputTokens\": 100, \"outputTokens\": 20}}\n",
        )
    },
    hanging: || {
        faked(
            sortie::agent::acp::kiro::KIND,
            "acp",
            "{\"message\": \"working\"}\n{\"wait_cancel\": true}\n",
        )
    },
    failing: || {
        faked(
            sortie::agent::acp::kiro::KIND,
            "acp",
            "{\"prompt_error\": {\"code\": -32603, \"message\": \"boom\"}}\n",
        )
    },
};

agent_contract!(kiro, KIRO);

/// A registered kind without an instantiation above (or a named daemon test) would run none of
/// the contract: the instantiations are read from this file and compared with the suites the
/// registry's descriptors name; a kind whose contract runs through the real binary names its
/// test file instead ([`Contract::File`]), which must exist.
#[test]
fn every_registered_kind_has_a_contract_instantiation() {
    let instantiated: std::collections::BTreeSet<String> = include_str!("agent_contract.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("agent_contract!(")?.split(',').next())
        .map(str::to_string)
        .collect();
    let mut suites = std::collections::BTreeSet::new();
    let mut covered = std::collections::BTreeSet::new();
    for d in registry::AGENTS {
        match d.contract {
            Contract::Suite(name) => {
                suites.insert(name.to_string());
                if instantiated.contains(name) {
                    covered.insert(d.kind.to_string());
                }
            }
            Contract::File(file) => {
                let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("tests")
                    .join(file);
                assert!(path.is_file(), "{}: {} is missing", d.kind, path.display());
                covered.insert(d.kind.to_string());
            }
        }
    }
    let registered: std::collections::BTreeSet<String> = registry::AGENTS
        .iter()
        .map(|d| d.kind.to_string())
        .collect();
    assert_eq!(covered, registered);
    assert_eq!(instantiated, suites);
}
