//! The codex kind through the real `sortie` binary, with `fake-agent` playing `codex
//! app-server`: turns on one thread, resume and its fallback on later dispatches, token
//! totals in `/api/v1/runs`, a stalled turn stopped with its whole process group, approvals
//! answered, rate limits in `/api/v1/state`, a usage limit, and a server nobody logged in.

mod common;

use common::procs::{agent_processes_in, processes_in};
use common::{Daemon, FAKE_AGENT, Setup, holds_within, wait_for};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const WAIT: Duration = Duration::from_secs(40);

struct Codex {
    setup: Setup,
}

impl Codex {
    /// A file-tracker project with one issue `A-1`, the codex kind on the fake, and `script`
    /// as the fake's scenario. `agent_extra` / `codex_block` are YAML lines for those blocks.
    fn new(script: &[Value], agent_extra: &str, codex_block: &str) -> Codex {
        let wf = format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: codex\n  command: {FAKE_AGENT} app-server\n  env: [FAKE_AGENT_*]\n  read_timeout_ms: 2000\n{agent_extra}codex:\n  model: o3\n{codex_block}---\nWork on {{{{ .issue.identifier }}}}.\n"
        );
        let setup = Setup::new(&wf, &common::issues(&[("1", "A-1", "To Do")]));
        std::fs::create_dir_all(setup.path().join("state")).unwrap();
        let text: Vec<String> = script.iter().map(Value::to_string).collect();
        std::fs::write(setup.path().join("scenario.jsonl"), text.join("\n") + "\n").unwrap();
        Codex { setup }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.setup.path().join(rel)
    }

    fn start(&self) -> Daemon {
        let p = |rel: &str| self.path(rel).display().to_string();
        let (scenario, state, rpc, argv) =
            (p("scenario.jsonl"), p("state"), p("rpc.log"), p("argv.log"));
        self.setup.start(&[
            ("FAKE_AGENT_KIND", "codex"),
            ("FAKE_AGENT_SCENARIO", &scenario),
            ("FAKE_AGENT_STATE_DIR", &state),
            ("FAKE_AGENT_RPC_LOG", &rpc),
            ("FAKE_AGENT_ARGV_LOG", &argv),
        ])
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("rpc.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `(session, method)` of every request or notification the fake received.
    fn calls(&self) -> Vec<(u64, String)> {
        self.records()
            .iter()
            .filter_map(|r| {
                Some((
                    r["session"].as_u64()?,
                    r["received"]["method"].as_str()?.to_string(),
                ))
            })
            .collect()
    }

    fn spawns(&self) -> usize {
        std::fs::read_to_string(self.path("argv.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn finish_issue(&self) {
        std::fs::write(
            self.path("issues.json"),
            common::issues(&[("1", "A-1", "Done")]),
        )
        .unwrap();
    }
}

fn runs(d: &Daemon) -> Vec<Value> {
    d.get_ok("/api/v1/runs")
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|v| v["runs"].as_array().cloned())
        .unwrap_or_default()
}

fn no_api_key() -> bool {
    if std::env::var_os("CODEX_API_KEY").is_some() {
        eprintln!("skipped: CODEX_API_KEY is set in the test environment");
        return false;
    }
    true
}

#[test]
fn turns_share_a_thread_and_later_dispatches_resume_it_or_start_anew() {
    let c = Codex::new(
        &[
            json!({"session": 1, "turn": 1, "started": true}),
            json!({"session": 1, "turn": 1, "token_usage": {"input": 1000, "cached": 200, "output": 100}}),
            json!({"session": 1, "turn": 2, "started": true}),
            json!({"session": 1, "turn": 2, "token_usage": {"input": 500, "cached": 0, "output": 50}}),
            json!({"session": 3, "config": {"resume": "fail"}}),
        ],
        "  max_turns: 2\n",
        "",
    );
    let d = c.start();
    wait_for("the third session's new thread", WAIT, || {
        let calls = c.calls();
        calls
            .contains(&(3, "thread/start".to_string()))
            .then_some(())
    });
    c.finish_issue();
    let calls = c.calls();
    let of = |s: u64| -> Vec<String> {
        calls
            .iter()
            .filter(|(n, _)| *n == s)
            .map(|(_, m)| m.clone())
            .collect()
    };
    assert_eq!(
        of(1),
        [
            "initialize",
            "initialized",
            "account/read",
            "thread/start",
            "turn/start",
            "turn/start"
        ],
        "two turns on one thread"
    );
    assert_eq!(
        of(2)[..4],
        ["initialize", "initialized", "account/read", "thread/resume"]
    );
    assert_eq!(
        of(3)[..5],
        [
            "initialize",
            "initialized",
            "account/read",
            "thread/resume",
            "thread/start"
        ],
        "a failed resume falls back to a new thread"
    );
    let resumed: Vec<String> = c
        .records()
        .iter()
        .filter(|r| r["received"]["method"] == "thread/resume")
        .filter_map(|r| {
            r["received"]["params"]["threadId"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(resumed[0], "thr-fake-1");

    // The first run's tokens are the scripted totals of its two turns.
    let first = wait_for("the first run row", WAIT, || {
        runs(&d).into_iter().min_by_key(|r| r["run_id"].as_i64())
    });
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(
        first["tokens"],
        json!({"input_tokens": 1500, "output_tokens": 150, "total_tokens": 1650,
            "cache_read_tokens": 200, "cache_write_tokens": 0}),
        "{first}"
    );
    assert_eq!(first["agent_kind"], "codex");
}

#[test]
fn a_stalled_turn_is_stopped_with_its_whole_process_group() {
    let c = Codex::new(
        &[
            json!({"session": 1, "started": true}),
            json!({"session": 1, "spawn_grandchild": true}),
            json!({"session": 1, "ignore_sigterm": true}),
            json!({"session": 1, "hang": true}),
        ],
        "  max_turns: 1\n  stall_timeout_ms: 800\n  max_retry_backoff_ms: 600000\n",
        "",
    );
    let ws = c.path("ws/A-1");
    let d = c.start();
    wait_for("the agent and its grandchild", WAIT, || {
        (agent_processes_in(&ws).len() >= 2).then_some(())
    });
    wait_for("the stalled run recorded", WAIT, || {
        runs(&d)
            .iter()
            .any(|r| r["status"] == "cancelled")
            .then_some(())
    });
    // The stall retry waits 10 s; meanwhile nothing of the session may be left.
    assert!(
        holds_within(Duration::from_secs(8), || processes_in(&ws).is_empty()),
        "left running: {:?}",
        processes_in(&ws)
    );
    c.finish_issue();
}

#[test]
fn approval_requests_are_answered_by_the_configured_policy() {
    let c = Codex::new(
        &[
            json!({"session": 1, "started": true}),
            json!({"session": 1, "request": {"method": "item/commandExecution/requestApproval", "params": {"command": "cargo test"}}}),
            json!({"session": 1, "request": {"method": "item/fileChange/requestApproval", "params": {}}}),
        ],
        "  max_turns: 1\n",
        "  approval_policy: on-request\n",
    );
    let _d = c.start();
    let replies = wait_for("both answers", WAIT, || {
        let r: Vec<Value> = c
            .records()
            .into_iter()
            .filter(|r| r.get("reply_to").is_some())
            .collect();
        (r.len() >= 2).then_some(r)
    });
    c.finish_issue();
    for r in &replies[..2] {
        assert_eq!(
            r["reply"]["result"],
            json!({"decision": "acceptForSession"}),
            "{r}"
        );
    }
    let start = c
        .records()
        .into_iter()
        .find(|r| r["received"]["method"] == "thread/start")
        .unwrap();
    assert_eq!(start["received"]["params"]["approvalPolicy"], "on-request");
}

#[test]
fn rate_limit_reports_show_in_the_state() {
    let now_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let c = Codex::new(
        &[
            json!({"started": true}),
            json!({"rate_limits": {
                "primary": {"usedPercent": 42.0, "windowDurationMins": 300, "resetsAt": now_s + 3600},
                "secondary": {"usedPercent": 7.0, "windowDurationMins": 10080, "resetsAt": now_s + 86400}}}),
            json!({"complete": {"status": "completed", "usage": {"input_tokens": 10, "output_tokens": 2, "cached_input_tokens": 0}}}),
        ],
        "  max_turns: 1\n",
        "",
    );
    let d = c.start();
    let s = d.wait_state("codex rate limits", WAIT, |s| {
        s["rate_limits"]["codex"]["windows"]
            .as_array()
            .is_some_and(|w| w.len() == 2)
    });
    c.finish_issue();
    let w = &s["rate_limits"]["codex"]["windows"];
    assert_eq!(w[0]["label"], "5-hour limit");
    assert_eq!(w[0]["used_percent"], 42.0);
    assert_eq!(w[1]["label"], "Weekly limit");
    assert!(w[0]["resets_at"].is_string(), "{w}");
}

/// A `UsageLimitExceeded` answer after a report of the exhausted window: a `usage_limited`
/// run whose retry (`trigger: usage_limit`) is due at the window's reset.
#[test]
fn a_usage_limit_answer_is_a_usage_limited_run_retried_at_the_reset() {
    let reset_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let c = Codex::new(
        &[
            json!({"started": true}),
            json!({"rate_limits": {
                "primary": {"usedPercent": 100.0, "windowDurationMins": 300, "resetsAt": reset_s}}}),
            json!({"usage_limit": "You've hit your usage limit."}),
        ],
        "  max_turns: 1\n  max_retry_backoff_ms: 1000\n",
        "",
    );
    let d = c.start();
    let s = d.wait_state("the usage_limit retry", WAIT, |s| {
        s["retrying"][0]["trigger"] == "usage_limit"
    });
    c.finish_issue();
    let due: jiff::Timestamp = s["retrying"][0]["due_at"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap();
    assert_eq!(due.as_second(), reset_s as i64, "{s}");
    let run = runs(&d).into_iter().next().unwrap();
    assert_eq!(run["status"], "usage_limited", "{run}");
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains("usage limit")),
        "{run}"
    );
    assert_eq!(
        s["rate_limits"]["codex"]["windows"][0]["status"],
        "exhausted"
    );
}

#[test]
fn a_server_nobody_logged_in_ends_in_agent_auth_failed_without_retrying() {
    if !no_api_key() {
        return;
    }
    let c = Codex::new(
        &[json!({"config": {"account": null, "requires_openai_auth": true}})],
        "  max_turns: 1\n",
        "",
    );
    let d = c.start();
    let run = wait_for("the failed run", WAIT, || runs(&d).into_iter().next());
    let error = run["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error.contains("codex login") && error.contains("CODEX_API_KEY"),
        "{run}"
    );
    assert_eq!(run["status"], "failed", "{run}");
    // No retry loop: three later polls (200 ms apart) dispatch nothing new.
    let completed = run["completed_at"].as_str().unwrap_or_default().to_string();
    let mut seen = std::collections::BTreeSet::new();
    d.wait_until("three polls after the failure", WAIT, || {
        if let Some(s) = d.try_state()
            && let Some(at) = s["health"]["poll"]["checked_at"].as_str()
            && at > completed.as_str()
        {
            seen.insert(at.to_string());
        }
        seen.len() >= 3
    });
    assert_eq!(c.spawns(), 1, "one app-server start only");
    assert_eq!(runs(&d).len(), 1);
    assert!(
        d.log_text().contains("agent_auth_failed"),
        "{}",
        d.log_text()
    );
}
