//! Agent login holds through the real binary with the fake Claude Code: a session that fails to
//! authenticate is not retried; every dispatch of the kind is held, with a critical attention
//! item, until the workflow reloads or a session of the kind succeeds. Also: the CLI's own
//! reason in a port_exit run's error, and the root rule of Claude Code caught by `validate` and
//! the dispatch preflight.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude")
        .join(name)
}

/// Claude Code as recorded without credentials: its stream, then exit 1.
fn not_logged_in() -> Vec<Value> {
    vec![
        json!({"cat_file": fixture("real_not_logged_in.jsonl")}),
        json!({"exit": 1}),
    ]
}

fn succeeding() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

/// How many times the fake agent was started.
fn spawns(p: &Project) -> usize {
    std::fs::read_to_string(p.path("argv.log"))
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

fn attention_of<'a>(s: &'a Value, kind: &str) -> Option<&'a Value> {
    s["attention"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["kind"] == kind))
}

fn held_of<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["held"]
        .as_array()
        .and_then(|a| a.iter().find(|h| h["issue_identifier"] == identifier))
}

fn run_errors(p: &Project, issue_id: &str) -> Vec<String> {
    if !p.db().exists() {
        return Vec::new();
    }
    let conn = p.db_conn();
    let mut st = conn
        .prepare("SELECT COALESCE(error, '') FROM run_history WHERE issue_id = ?1 ORDER BY id")
        .unwrap();
    st.query_map([issue_id], |r| r.get::<_, String>(0))
        .unwrap()
        .filter_map(Result::ok)
        .collect()
}

/// Replaces the scenario an existing workspace replays (the hook copies it only on creation).
fn rescript(p: &Project, identifier: &str, lines: &[Value]) {
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(
        p.workspace(identifier).join(".scenario"),
        text.join("\n") + "\n",
    )
    .unwrap();
}

/// Replays a recorded stream through the Claude Code parser, ending with exit `code`.
fn parse(lines: &[String], code: i32) -> sortie::agent::TurnOutcome {
    use sortie::agent::stream::{ExitInfo, StreamParser, TurnEnd};
    let clock: std::sync::Arc<dyn sortie::clock::Clock> =
        std::sync::Arc::new(sortie::clock::ManualClock::new(1_700_000_000_000));
    let mut p = sortie::agent::claude::parser::ClaudeParser::new(clock, "/w".into(), None);
    for l in lines {
        p.on_line(l.as_bytes());
    }
    let end = TurnEnd {
        exit: Some(ExitInfo {
            code: Some(code),
            signal: None,
        }),
        ..TurnEnd::default()
    };
    p.finish(&end).0
}

#[test]
fn the_recorded_not_logged_in_stream_is_an_auth_failure_never_a_success() {
    use sortie::agent::{AgentErrorKind, TurnOutcome};
    let text = std::fs::read_to_string(fixture("real_not_logged_in.jsonl")).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    for code in [1, 0] {
        match parse(&lines, code) {
            TurnOutcome::Failed { message, kind } => {
                assert_eq!(kind, AgentErrorKind::AgentAuthFailed);
                assert!(message.contains("Not logged in"), "{message}");
                assert!(message.contains("claude /login"), "{message}");
            }
            other => panic!("exit {code}: {other:?}"),
        }
    }
    // Without the result line, the made-up message and a failed exit still say it.
    let head: Vec<String> = lines[..2].to_vec();
    assert_eq!(
        parse(&head, 1).error_kind(),
        Some(AgentErrorKind::AgentAuthFailed)
    );
    // Another api_error (no failed-login message) stays a plain turn failure.
    let other: Vec<String> = vec![
        lines[0].clone(),
        r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","result":"API Error: 500"}"#.into(),
    ];
    assert_eq!(
        parse(&other, 1).error_kind(),
        Some(AgentErrorKind::TurnFailed)
    );
}

/// Waits until `n` more poll ticks have run.
fn wait_polls(d: &common::Daemon, n: usize) {
    let mut seen = std::collections::BTreeSet::new();
    d.wait_until("several poll ticks", T, || {
        if let Some(s) = d.try_state() {
            seen.insert(s["health"]["poll"]["checked_at"].to_string());
        }
        seen.len() > n
    });
}

#[test]
fn a_claude_code_that_is_not_logged_in_holds_the_kind_until_the_workflow_reloads() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    p.scenario("default", &not_logged_in());
    p.fake_agent_workflow("", "");
    let d = p.start();
    let s = d.wait_state("the login hold and its attention item", T, |s| {
        attention_of(s, "agent_auth_failed").is_some() && held_of(s, "A-1").is_some()
    });

    assert_eq!(p.run_statuses("1"), vec!["failed"]);
    let error = &run_errors(&p, "1")[0];
    assert!(
        error.starts_with("agent_auth_failed: Claude Code is not logged in"),
        "{error}"
    );
    assert!(
        error.contains("claude /login") && error.contains("ANTHROPIC_API_KEY"),
        "{error}"
    );
    assert_eq!(s["retrying"], json!([]), "a failed login is not retried");

    let hold = &held_of(&s, "A-1").unwrap()["hold"];
    assert_eq!(hold["reason"], "agent_auth_failed");
    assert_eq!(hold["agent_kind"], "claude-code");
    assert_eq!(hold["reason_text"], "claude-code is not logged in");
    let item = attention_of(&s, "agent_auth_failed").unwrap();
    assert_eq!(item["severity"], "critical");
    assert_eq!(item["reason_text"], "claude-code is not logged in");
    assert!(
        item["why_text"]
            .as_str()
            .unwrap()
            .contains("log the agent's CLI in"),
        "{item}"
    );
    assert!(
        item["clears_text"]
            .as_str()
            .unwrap()
            .contains("workflow file is saved"),
        "{item}"
    );
    assert_eq!(item["evidence"]["agent_kind"], "claude-code");
    assert_eq!(item["action"]["kind"], "acknowledge");

    // Held, never looping: no further session however many ticks pass.
    wait_polls(&d, 5);
    assert_eq!(spawns(&p), 1);
    assert_eq!(p.run_statuses("1").len(), 1);

    // A person logs the CLI in and saves the workflow: the hold lifts and the issue runs.
    rescript(&p, "A-1", &succeeding());
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    std::fs::write(p.workflow(), wf.replace("Work on ", "Please work on ")).unwrap();
    d.wait_until("the second run", T, || p.run_statuses("1").len() == 2);
    assert_eq!(p.run_statuses("1"), vec!["failed", "succeeded"]);
    let s = d.wait_state("the attention item cleared", T, |s| {
        attention_of(s, "agent_auth_failed").is_none()
    });
    assert!(held_of(&s, "A-1").is_none());
}

#[test]
fn a_successful_session_of_the_kind_lifts_the_hold() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "Refused", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "A-2", "title": "Slow", "state": "To Do", "priority": 2}
    ]));
    p.scenario("A-1", &not_logged_in());
    let go = p.path("markers/go");
    let mut slow = vec![json!({"init": {}}), json!({"wait_file": go})];
    slow.extend(succeeding().into_iter().skip(1));
    p.scenario("A-2", &slow);
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("A-1 held while A-2 runs", T, |s| {
        held_of(s, "A-1").is_some_and(|h| h["hold"]["reason"] == "agent_auth_failed")
            && s["counts"]["running"] == 1
    });
    wait_polls(&d, 3);
    assert_eq!(
        spawns(&p),
        2,
        "the refused issue is not started again while held"
    );

    // A-2's turn completes: the login works, so the hold lifts and A-1 runs again.
    rescript(&p, "A-1", &succeeding());
    std::fs::write(&go, "").unwrap();
    d.wait_until("A-1's second run", T, || p.run_statuses("1").len() == 2);
    assert_eq!(p.run_statuses("1"), vec!["failed", "succeeded"]);
    assert_eq!(p.run_statuses("2"), vec!["succeeded"]);
    let s = d.wait_state("no hold left", T, |s| {
        attention_of(s, "agent_auth_failed").is_none()
    });
    assert!(held_of(&s, "A-1").is_none());
}

#[test]
fn a_port_exit_error_carries_the_cli_s_last_words() {
    let said = std::fs::read_to_string(fixture("real_root_skip_permissions_refused.txt")).unwrap();
    let said = said.trim();
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "P-1", "title": "Stderr", "state": "To Do"},
        {"id": "2", "identifier": "P-2", "title": "Stdout", "state": "To Do"}
    ]));
    p.scenario(
        "P-1",
        &[
            json!({"stderr": "starting"}),
            json!({"stderr": said}),
            json!({"stderr": "  "}),
            json!({"exit": 1}),
        ],
    );
    p.scenario("P-2", &[json!({"raw": said}), json!({"exit": 1})]);
    p.fake_agent_workflow("", "");
    let _d = p.start();
    let want = format!("port_exit: non-zero exit (code 1): {said}");
    for id in ["1", "2"] {
        let error = wait_for("the port_exit run", T, || {
            run_errors(&p, id).first().cloned()
        });
        assert_eq!(error, want, "issue {id}");
    }
}

/// The daemon's command without the sandbox declaration the test helper adds.
fn sandboxless(p: &Project) -> std::process::Command {
    std::fs::create_dir_all(p.path("markers")).unwrap();
    let mut cmd = common::sortie_command();
    cmd.current_dir(p.dir.path())
        .arg(p.workflow())
        .env_remove("IS_SANDBOX")
        .env("FAKE_AGENT_SCENARIO", ".scenario")
        .env("FAKE_AGENT_ARGV_LOG", p.path("argv.log"))
        .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
        .env("SORTIE_TEST_MARKERS", p.path("markers"))
        .env_remove("RUST_LOG");
    cmd
}

/// The daemon started without the sandbox declaration.
fn start_without_sandbox(p: &Project) -> common::Daemon {
    common::spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        common::set_server_port(&p.workflow(), port);
        sandboxless(p)
    })
}

#[test]
fn as_root_without_a_sandbox_validate_and_the_preflight_refuse_to_bypass_permissions() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: Claude Code's root rule applies to root only");
        return;
    }
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    p.scenario("default", &succeeding());
    p.fake_agent_workflow("", "");

    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .env_remove("IS_SANDBOX")
        .arg("validate")
        .arg(p.workflow())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("claude-code.permission_mode"), "{stderr}");
    assert!(stderr.contains("IS_SANDBOX=1"), "{stderr}");

    // At startup the failing preflight is fatal: the daemon exits 1 with the rule's text.
    let mut child = sandboxless(&p)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = common::poll(T, Duration::from_millis(50), || {
        child.try_wait().ok().flatten()
    });
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the daemon did not exit on its failing preflight");
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("claude-code.permission_mode"), "{stderr}");
    assert_eq!(spawns(&p), 0);

    // Running, a reload that drops the permission mode fails the dispatch preflight.
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "Backlog"}]));
    p.fake_agent_workflow("", "claude-code:\n  permission_mode: acceptEdits");
    let d = start_without_sandbox(&p);
    d.wait_state("a passing preflight", T, |s| {
        s["health"]["preflight"]["status"] == "pass"
    });
    p.fake_agent_workflow("", "");
    p.set_issue_state("1", "To Do");
    let s = d.wait_state("the failing preflight", T, |s| {
        s["health"]["preflight"]["status"] == "fail"
    });
    let error = s["health"]["preflight"]["error"].as_str().unwrap();
    assert!(error.contains("claude-code.permission_mode"), "{error}");
    assert!(attention_of(&s, "preflight_failed").is_some());
    wait_polls(&d, 3);
    assert_eq!(spawns(&p), 0, "nothing is dispatched");
    assert!(p.run_statuses("1").is_empty());
}

/// In-process, with the mock: a session whose start fails to authenticate holds the kind the
/// same way, and a reload that changes the workflow lifts it.
#[test]
fn a_session_start_that_fails_to_authenticate_holds_the_kind_until_a_reload() {
    use common::in_process::{mock_orchestrator, step_until};
    use sortie::orchestrator::dispatch_pass::HoldReason;
    let dir = tempfile::tempdir().unwrap();
    let issues = r#"[{"id": "1", "identifier": "A-1", "title": "t", "state": "To Do"}]"#;
    let mut p = mock_orchestrator(
        dir.path(),
        issues,
        "mock:\n  start_error: true\n  start_error_kind: agent_auth_failed\n",
    );
    let o = &mut p.orch;
    step_until(o, "the login hold", |s| !s.auth_holds.is_empty());
    let snap = o.snapshot_now();
    assert_eq!(snap.auth_holds[0].agent_kind, "mock");
    assert!(snap.retrying.is_empty(), "a failed login is not retried");
    for _ in 0..3 {
        p.clock.advance(Duration::from_millis(1_000));
        o.step(Duration::from_millis(20));
    }
    let snap = o.snapshot_now();
    assert_eq!(
        snap.held
            .iter()
            .map(|h| h.reason.clone())
            .collect::<Vec<_>>(),
        vec![HoldReason::AgentAuthFailed {
            agent_kind: "mock".into()
        }]
    );
    let items = sortie::http::attention::items(&snap);
    let item = items
        .iter()
        .find(|i| i.view.kind.as_str() == "agent_auth_failed")
        .expect("the attention item");
    assert_eq!(item.view.reason_text, "mock is not logged in");
    let conn = rusqlite::Connection::open(dir.path().join("sortie.db")).unwrap();
    let runs = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("SELECT COUNT(*) FROM run_history", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(runs(&conn), 1, "one session, however many ticks");

    let wf = std::fs::read_to_string(dir.path().join("WORKFLOW.md")).unwrap();
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        wf.replace("  start_error: true\n", ""),
    )
    .unwrap();
    p.clock.advance(Duration::from_millis(1_000));
    step_until(o, "the hold lifted", |s| s.auth_holds.is_empty());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while runs(&conn) < 2 {
        p.clock.advance(Duration::from_millis(1_000));
        o.step(Duration::from_millis(20));
        assert!(std::time::Instant::now() < deadline, "no second run");
    }
    let last: String = conn
        .query_row(
            "SELECT status FROM run_history ORDER BY id DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(last, "succeeded");
}
