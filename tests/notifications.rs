//! Operator notifications through the real binary: a Slack-shaped receiver and a signed
//! generic webhook on 127.0.0.1 take every subscribed event (handoff, run failures from a
//! destination's threshold on, a budget reached, the attention item it raises, an agent's
//! `notify_operator` message through `sortie mcp-server`); a destination that stays down is
//! retried, then held up as an attention item and a failing health row, without touching the
//! runs, and clears once it takes a notice again.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use common::Project;
use common::fake_server::Recorded;
use common::receiver::{self, PATH};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);
const SECRET: &str = "whsec-notify-0123456789";

fn succeeding() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn failing() -> Vec<Value> {
    vec![
        json!({"stderr": "Error: the frobnicator is not ready"}),
        json!({"exit": 1}),
    ]
}

fn bodies(reqs: &[Recorded]) -> Vec<Value> {
    reqs.iter().map(Recorded::json).collect()
}

/// The Slack texts that announce `event` for `identifier`.
fn slack_says(reqs: &[Recorded], event: &str, identifier: &str) -> bool {
    let head = format!("sortie {event}: [{identifier}]");
    bodies(reqs)
        .iter()
        .any(|b| b["text"].as_str().is_some_and(|t| t.starts_with(&head)))
}

fn hook_has(reqs: &[Recorded], event: &str, identifier: &str) -> bool {
    bodies(reqs)
        .iter()
        .any(|b| b["event"] == event && b["issue_identifier"] == identifier)
}

/// A client of one `sortie mcp-server` process over stdio.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next: i64,
}

impl Mcp {
    fn spawn(p: &Project, env: &[(&str, String)]) -> Mcp {
        let mut cmd = common::sortie_command();
        cmd.args(["mcp-server", "--workflow"])
            .arg(p.workflow())
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("mcp-server: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Mcp {
            child,
            stdin,
            lines: rx,
            next: 0,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap_or_else(|e| panic!("write: {e}"));
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("no answer: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// `tools/call` of `notify_operator`: (isError, the body).
    fn notify(&mut self, message: &str) -> (bool, Value) {
        let a = self.request(
            "tools/call",
            json!({"name": "notify_operator", "arguments": {"message": message}}),
        );
        let r = &a["result"];
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        (
            r["isError"] == true,
            serde_json::from_str(text).unwrap_or(Value::Null),
        )
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_subscribed_event_reaches_both_receivers_shaped_and_signed() {
    let slack = receiver::slack();
    let hook = receiver::webhook(SECRET);
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "Succeeds", "state": "To Do"},
        {"id": "2", "identifier": "A-2", "title": "Keeps failing", "state": "To Do"},
        {"id": "3", "identifier": "A-3", "title": "Keeps working", "state": "To Do"},
    ]));
    p.scenario("A-1", &succeeding());
    p.scenario("A-2", &failing());
    p.scenario("A-3", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow(
        // Failure retries wait a second: long enough to be seen queued, short for a test.
        "  max_retry_backoff_ms: 1000\n  max_sessions: 3\n",
        r#"notifications:
  destinations:
    - name: team
      kind: slack
      url: $NOTIFY_SLACK_URL
      failures_threshold: 1
    - name: ops
      kind: webhook
      url: ${NOTIFY_HOOK_URL}
      secret: $NOTIFY_HOOK_SECRET
      events: [handoff, run_failed, budget_reached, attention_raised, operator_message]
      failures_threshold: 2
"#,
    );
    let slack_url = format!("{}{PATH}", slack.url);
    let hook_url = format!("{}{PATH}/ops", hook.url);
    let mut d = p.start_with_env(&[
        ("NOTIFY_SLACK_URL", &slack_url),
        ("NOTIFY_HOOK_URL", &hook_url),
        ("NOTIFY_HOOK_SECRET", SECRET),
    ]);
    d.graceful_drop = true;

    // handoff (A-1), run failures (A-2), the session budget it then reaches and its item.
    d.wait_until("every run event at both receivers", T, || {
        let (s, h) = (
            slack.requests("POST", PATH),
            hook.requests("POST", "/hook/ops"),
        );
        slack_says(&s, "handoff", "A-1")
            && slack_says(&s, "run_failed", "A-2")
            && slack_says(&s, "budget_reached", "A-2")
            && slack_says(&s, "attention_raised", "A-2")
            && hook_has(&h, "handoff", "A-1")
            && hook_has(&h, "run_failed", "A-2")
            && hook_has(&h, "budget_reached", "A-2")
            && hook_has(&h, "attention_raised", "A-2")
    });
    let s = d.wait_state("A-3 running", T, |s| {
        s["running"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x["issue_identifier"] == "A-3"))
    });

    // The agent's own message, through the MCP tool the session's server registers.
    let env = [
        ("SORTIE_API_URL", format!("http://127.0.0.1:{}", d.port)),
        ("SORTIE_ISSUE_ID", "3".to_string()),
        ("SORTIE_ISSUE_IDENTIFIER", "A-3".to_string()),
        ("SORTIE_WORKSPACE", p.workspace("A-3").display().to_string()),
    ];
    let mut mcp = Mcp::spawn(&p, &env);
    mcp.request("initialize", json!({"protocolVersion": "2024-11-05"}));
    let list = mcp.request("tools/list", json!({}));
    assert!(list.to_string().contains("\"notify_operator\""), "{list}");
    let (err, body) = mcp.notify("I need the staging database password to go on.");
    assert!(!err, "{body}");
    assert_eq!(body["sent"], true, "{body}");
    assert_eq!(body["destinations"], 2, "{body}");
    for n in 2..=5 {
        let (err, body) = mcp.notify(&format!("message {n}"));
        assert!(!err, "{n}: {body}");
    }
    let (err, body) = mcp.notify("one too many");
    assert!(
        err,
        "the sixth message within the window is refused: {body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("rate limited"),
        "{body}"
    );
    d.wait_until("the operator message at both receivers", T, || {
        slack_says(&slack.requests("POST", PATH), "operator_message", "A-3")
            && hook_has(
                &hook.requests("POST", "/hook/ops"),
                "operator_message",
                "A-3",
            )
    });

    // Shapes and signatures: Slack answered every post 200, the webhook verified every one.
    let sl = slack.requests("POST", PATH);
    for r in &sl {
        assert_eq!(receiver::slack_shape_ok(&r.body), Ok(()), "{}", r.body);
        assert_eq!(r.header("content-type"), Some("application/json"));
    }
    let hk = hook.requests("POST", "/hook/ops");
    for r in &hk {
        assert!(receiver::signed_by(r, SECRET), "unsigned: {}", r.body);
        let b = r.json();
        assert_eq!(r.header("x-sortie-event"), b["event"].as_str());
        assert_eq!(b["destination"], "ops");
        assert!(b["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{b}");
        assert!(b["text"].as_str().is_some_and(|t| !t.is_empty()), "{b}");
    }
    let op = bodies(&hk)
        .into_iter()
        .find(|b| b["event"] == "operator_message")
        .unwrap_or_default();
    assert_eq!(op["text"], "I need the staging database password to go on.");
    assert_eq!(op["issue_id"], "3");
    // `ops` takes run failures from the second in a row on; `team` from the first.
    let failures = |bs: Vec<Value>| -> Vec<u64> {
        bs.iter()
            .filter(|b| b["event"] == "run_failed")
            .filter_map(|b| b["failures"].as_u64())
            .collect()
    };
    assert!(
        failures(bodies(&hk)).iter().all(|n| *n >= 2),
        "{:?}",
        failures(bodies(&hk))
    );
    assert!(
        slack_says(&sl, "run_failed", "A-2")
            && sl.iter().any(|r| r.body.contains("1 run in a row failed")),
        "team hears of the first failure"
    );
    assert!(!hk.iter().any(|r| r.json()["event"] == "merge"));

    // Health rows, metrics, and no URL or secret anywhere sortie writes.
    let s2 = d.state();
    let rows = s2["health"]["notifications"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["ops", "team"], "{rows:?}");
    for r in &rows {
        assert_eq!(r["status"], "pass", "{r}");
        assert!(r["last_success_at"].is_string(), "{r}");
    }
    // The team's queue drains once its last delivery is out (a later event may still be on
    // its way when the health rows already pass).
    d.wait_until("the team's queue drained", T, || {
        d.get("/metrics")
            .body
            .contains("sortie_notifications_queued{destination=\"team\"} 0")
    });
    let metrics = d.get("/metrics").body;
    assert!(
        metrics.contains(
            "sortie_notifications_total{destination=\"ops\",event=\"handoff\",result=\"delivered\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("sortie_notifications_queued{destination=\"team\"} 0"));
    for text in [s.to_string(), s2.to_string(), p.log(), metrics] {
        assert!(!text.contains(SECRET));
        assert!(!text.contains(&slack_url) && !text.contains(&hook_url));
    }
}

#[test]
fn a_destination_that_stays_down_is_retried_then_held_up_until_it_takes_a_notice() {
    let hook = receiver::webhook(SECRET);
    hook.with_state(|h| h.up = false);
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "B-1", "title": "First", "state": "To Do"},
    ]));
    p.scenario("default", &succeeding());
    p.fake_agent_workflow(
        "",
        &format!(
            "notifications:\n  destinations:\n    - name: pager\n      kind: webhook\n      url: {}{PATH}\n      secret: {SECRET}\n      events: [handoff]\n",
            hook.url
        ),
    );
    let d = p.start();
    let item_of = |s: &Value| -> Option<Value> {
        s["attention"]
            .as_array()?
            .iter()
            .find(|i| i["kind"] == "notification_failing")
            .cloned()
    };
    let s = d.wait_state("the failing destination's item", T, |s| {
        item_of(s).is_some()
    });
    let item = item_of(&s).unwrap_or_default();
    let tries = hook.requests("POST", PATH);
    assert_eq!(tries.len(), 4, "the first post and three retries");
    let ids: Vec<Option<&str>> = tries
        .iter()
        .map(|r| r.header("x-sortie-delivery"))
        .collect();
    assert!(ids.iter().all(|i| i.is_some() && *i == ids[0]), "{ids:?}");
    assert_eq!(item["evidence"]["destination"], "pager", "{item}");
    assert_eq!(item["severity"], "warning");
    let why = item["why_text"].as_str().unwrap_or_default();
    assert!(why.contains("pager") && why.contains("HTTP 503"), "{why}");
    assert!(
        item["clears_text"]
            .as_str()
            .unwrap_or_default()
            .contains("notifications.destinations")
    );
    let row = &s["health"]["notifications"][0];
    assert_eq!(row["status"], "fail", "{row}");
    assert_eq!(row["consecutive_failures"], 1);
    assert!(
        row["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("503")
    );
    // The run is recorded and handed off as if nothing happened.
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);
    assert_eq!(p.issue_state("1"), "Review");
    let metrics = d.get("/metrics").body;
    assert!(metrics.contains(
        "sortie_notifications_total{destination=\"pager\",event=\"handoff\",result=\"failed\"} 1"
    ));

    // Back up: the next notice goes through and the item clears.
    hook.with_state(|h| h.up = true);
    let mut issues = p.read_issues();
    if let Some(list) = issues.as_array_mut() {
        list.push(json!({"id": "2", "identifier": "B-2", "title": "Second", "state": "To Do"}));
    }
    p.issues(issues);
    let s = d.wait_state("the item clears", T, |s| {
        item_of(s).is_none() && s["health"]["notifications"][0]["status"] == "pass"
    });
    assert!(s["health"]["notifications"][0]["last_success_at"].is_string());
    let delivered = hook.requests("POST", PATH);
    let last = delivered.last().map(Recorded::json).unwrap_or_default();
    assert_eq!(last["event"], "handoff");
    assert_eq!(last["issue_identifier"], "B-2");
}
