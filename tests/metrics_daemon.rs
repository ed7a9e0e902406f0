//! `/metrics` of the real daemon: a scrape taken while agents run passes `promtool check
//! metrics`, and after a graceful restart every restart-surviving counter is at least its value
//! before. Skips (with a printed reason) while `/metrics` is not routed.

mod common;

use common::promtool::promtool_check;
use common::{Daemon, FAKE_AGENT, free_port, request, set_server_port, spawn, wait_for};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Restart-surviving series: sortie seeds them from the aggregate totals in its database at
/// startup, so a restart must never lower them.
const KEPT: &[&str] = &[
    "sortie_tokens_total{type=\"input\"}",
    "sortie_tokens_total{type=\"output\"}",
    "sortie_tokens_total{type=\"cache_read\"}",
    "sortie_tokens_total{type=\"cache_write\"}",
    "sortie_dispatches_total{outcome=\"success\"}",
    "sortie_worker_exits_total{exit_type=\"normal\"}",
    "sortie_worker_exits_total{exit_type=\"error\"}",
    "sortie_worker_exits_total{exit_type=\"cancelled\"}",
    "sortie_agent_runtime_seconds_total",
    "sortie_unmeasured_sessions_total",
];

/// Starts the daemon in `dir` on `port` first (the workflow's port is rewritten when it is
/// taken). On an early return or a failed assertion it gets the graceful stop, so no agent is
/// orphaned.
fn start(dir: &Path, port: u16) -> Daemon {
    let mut d = spawn(&dir.join("sortie.log"), Some(port), |port| {
        set_server_port(&dir.join("WORKFLOW.md"), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(dir)
            .arg("WORKFLOW.md")
            .env("FAKE_AGENT_SCENARIO", ".scenario")
            .env_remove("RUST_LOG");
        cmd
    });
    d.graceful_drop = true;
    d
}

/// SIGTERM and wait: the graceful drain records the running sessions.
fn stop(mut d: Daemon) {
    assert!(
        d.terminate_status().is_some(),
        "the daemon did not stop within 60 s of SIGTERM"
    );
}

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Status, content type and body of a GET; `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<(u16, String, String)> {
    let r = request(port, "GET", path, &[])?;
    let ct = r.header("content-type").unwrap_or_default().to_string();
    Some((r.status, ct, r.body))
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

fn promtool(text: &str) -> Option<String> {
    let (ok, msg) = promtool_check(text)?;
    Some(if ok {
        String::new()
    } else {
        format!("promtool check metrics failed: {msg}")
    })
}

fn check_with_promtool(text: &str, when: &str) {
    match promtool(text) {
        None => say("SKIP promtool check: promtool not installed (apt-get install prometheus)"),
        Some(err) => assert!(err.is_empty(), "{when}: {err}\n---\n{text}"),
    }
}

fn prepare(dir: &Path, port: u16) {
    let issues = serde_json::json!([
        {"id": "1", "identifier": "M-1", "title": "long work", "state": "To Do", "priority": 1},
        {"id": "2", "identifier": "M-2", "title": "long work", "state": "To Do", "priority": 1},
        {"id": "3", "identifier": "M-3", "title": "quick fix", "state": "To Do", "priority": 2}
    ]);
    std::fs::write(dir.join("issues.json"), issues.to_string()).expect("issues");
    let hang = "{\"init\": {}}\n{\"assistant\": {\"text\": \"working\", \"input_tokens\": 1000, \"output_tokens\": 100}}\n{\"hang\": true}\n";
    let quick = "{\"init\": {}}\n{\"assistant\": {\"text\": \"done\", \"input_tokens\": 500, \"output_tokens\": 50}}\n{\"result\": {\"subtype\": \"success\", \"text\": \"ok\"}}\n";
    std::fs::write(dir.join("hang.jsonl"), hang).expect("scenario");
    std::fs::write(dir.join("quick.jsonl"), quick).expect("scenario");
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done]
  handoff_state: Review
file:
  path: ./issues.json
polling:
  interval_ms: 300
workspace:
  root: ./workspaces
hooks:
  after_create: |
    if [ "$SORTIE_ISSUE_IDENTIFIER" = M-3 ]; then cp "{dir}/quick.jsonl" .scenario; else cp "{dir}/hang.jsonl" .scenario; fi
agent:
  kind: claude-code
  command: {agent}
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_concurrent_agents: 3
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}.
"#,
        dir = dir.display(),
        agent = FAKE_AGENT,
    );
    std::fs::write(dir.join("WORKFLOW.md"), wf).expect("workflow");
}

/// No label value names an issue (by identifier or id): cardinality stays bounded by the
/// catalogue, not by the backlog.
fn assert_no_issue_labels(text: &str) {
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(labels) = line.split_once('{').and_then(|(_, r)| r.split_once('}')) else {
            continue;
        };
        for (name, value) in labels.0.split(',').filter_map(|kv| kv.split_once('=')) {
            if name == "le" {
                continue;
            }
            let v = value.trim_matches('"');
            assert!(
                !v.starts_with("M-") && !["1", "2", "3"].contains(&v),
                "issue label in {line}"
            );
        }
    }
}

#[test]
fn scrapes_pass_promtool_and_counters_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    prepare(dir.path(), port);
    let d = start(dir.path(), port);
    let port = d.port;
    let (status, ct, _) = wait_for("the HTTP server", Duration::from_secs(30), || {
        get(port, "/metrics")
    });
    assert_eq!(status, 200);
    assert!(
        ct.starts_with("text/plain; version=0.0.4"),
        "content type {ct}"
    );
    // Two sessions running, the quick one handed off.
    let before = wait_for(
        "two running sessions and one finished run",
        Duration::from_secs(60),
        || {
            let (_, _, text) = get(port, "/metrics")?;
            let running = sample(&text, "sortie_sessions_running")?;
            let normal = sample(&text, "sortie_worker_exits_total{exit_type=\"normal\"}")?;
            (running == 2.0 && normal >= 1.0).then_some(text)
        },
    );
    assert!(sample(&before, "sortie_tokens_total{type=\"input\"}").unwrap_or(0.0) >= 2500.0);
    assert_eq!(sample(&before, "sortie_slots_available"), Some(1.0));
    assert!(sample(&before, "sortie_active_sessions_elapsed_seconds").unwrap_or(0.0) > 0.0);
    // The tick's dispatch pass and the database writer's commands are timed.
    for count in [
        "sortie_dispatch_pass_duration_seconds_count",
        "sortie_store_command_duration_seconds_count",
    ] {
        assert!(sample(&before, count).unwrap_or(0.0) >= 1.0, "{count}");
    }
    check_with_promtool(&before, "scrape while agents run");
    assert_no_issue_labels(&before);
    stop(d);
    // What the first life ended with is only visible after the drain; the restart must not
    // go below the last scrape of the first life.
    let d = start(dir.path(), port);
    let port = d.port;
    let after = wait_for("the restarted daemon", Duration::from_secs(30), || {
        get(port, "/metrics").and_then(|(s, _, t)| (s == 200).then_some(t))
    });
    for series in KEPT {
        let (b, a) = (sample(&before, series), sample(&after, series));
        println!("{series}: {b:?} before the restart, {a:?} after");
        assert!(
            a.is_some() && a.unwrap_or(0.0) >= b.unwrap_or(0.0),
            "{series}: {b:?} before the restart, {a:?} after"
        );
    }
    check_with_promtool(&after, "scrape after a restart");
    assert_no_issue_labels(&after);
    stop(d);
}
