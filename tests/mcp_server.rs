//! `sortie mcp-server` as an agent runs it: the real binary spoken to over stdio (initialize,
//! tools/list, tools/call), against a database populated through the store's write API and,
//! for the live figures, a running daemon whose dispatch wrote the session's `.sortie/mcp.json`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use common::{Project, SORTIE, wait_for};
use serde_json::{Value, json};
use sortie::domain::RunStatus;
use sortie::store::{RunRecord, Store};

/// How long one answer may take.
const ANSWER: Duration = Duration::from_secs(20);

/// A client of one `sortie mcp-server` process.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: i64,
}

impl Client {
    fn spawn(mut cmd: Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn mcp-server: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            lines: rx,
            next_id: 0,
        }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin closed"));
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("write to mcp-server: {e}"));
    }

    fn answer(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(ANSWER)
            .unwrap_or_else(|e| panic!("no answer from mcp-server: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {line}"))
    }

    /// A raw line and its one answer.
    fn exchange(&mut self, line: &str) -> Value {
        self.send_raw(line);
        self.answer()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.exchange(&msg.to_string());
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        answer
    }

    /// A `tools/call` that must succeed as a protocol exchange: the result and its text parsed.
    fn call(&mut self, tool: &str, args: Value) -> (Value, Value) {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: no result: {answer}"));
        assert_eq!(result["content"][0]["type"], "text", "{result}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let body: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{tool}: text not JSON ({e})"));
        (result, body)
    }

    /// A call that must be answered with a JSON-RPC error: its code.
    fn call_error(&mut self, tool: &str, args: Value) -> i64 {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": args}));
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{tool} {answer}: not an error"))
    }

    /// A `tools/call` refused for naming an issue outside the session's scope: a JSON-RPC
    /// `-32602` error naming the rule, whose whole answer is returned.
    fn scope_refusal(&mut self, args: Value) -> Value {
        let answer = self.request(
            "tools/call",
            json!({"name": "tracker_api", "arguments": args}),
        );
        assert!(answer.get("result").is_none(), "{args}: {answer}");
        assert_eq!(answer["error"]["code"], -32602, "{args}: {answer}");
        assert_eq!(answer["error"]["data"]["kind"], "project_scope_violation");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("project_scope_violation") && message.contains("rule: "),
            "{message}"
        );
        answer
    }

    /// Closes stdin and waits for the exit code.
    fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let status = wait_for("mcp-server to exit after EOF", ANSWER, || {
            self.child.try_wait().ok().flatten()
        });
        status.code()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A finished run of `issue_id` (identifier = id) with 1200 tokens, 500 of them cache reads.
fn stored_run(issue_id: &str, attempt: i64, status: RunStatus, completed_at_ms: i64) -> RunRecord {
    RunRecord {
        issue_id: issue_id.into(),
        identifier: issue_id.into(),
        issue_title: "Title".into(),
        attempt,
        started_at_ms: completed_at_ms - 60_000,
        completed_at_ms,
        workflow_file: "WORKFLOW.md".into(),
        agent_kind: "claude-code".into(),
        turns_completed: 1,
        input_tokens: 1000,
        output_tokens: 200,
        total_tokens: 1200,
        cache_read_tokens: 500,
        tokens_measured: true,
        dispatch_id: Some(format!("D-{issue_id}-{attempt}")),
        error: (status == RunStatus::Failed).then(|| "turn_failed: boom".to_string()),
        estimated_cost_usd: Some(0.25),
        cost_status: "estimated".into(),
        ..RunRecord::new(status)
    }
}

/// Two finished runs of MT-1 (the newer one failed) and one of another issue.
fn populate(db: &Path) {
    const T0: i64 = 1_774_533_600_000;
    let clock = std::sync::Arc::new(sortie::clock::ManualClock::new(T0));
    let store = Store::open(db, clock).unwrap_or_else(|e| panic!("open store: {e}"));
    let w = store.writer();
    for run in [
        stored_run("MT-1", 1, RunStatus::Succeeded, T0),
        stored_run("MT-1", 2, RunStatus::Failed, T0 + 120_000),
        stored_run("MT-9", 1, RunStatus::Succeeded, T0 + 60_000),
    ] {
        w.record_run(run, Vec::new())
            .unwrap_or_else(|e| panic!("record run: {e}"));
    }
    store.close().unwrap_or_else(|e| panic!("close store: {e}"));
}

fn issues_json() -> Value {
    json!([
        {"id": "MT-1", "identifier": "MT-1", "title": "First", "state": "To Do",
         "comments": [{"id": "c1", "author": "ann", "body": "please look", "created_at": "2026-01-02T00:00:00Z"}]},
        {"id": "MT-2", "identifier": "MT-2", "title": "Second", "state": "Done"},
        {"id": "OTHER-1", "identifier": "OTHER-1", "title": "Elsewhere", "state": "To Do"},
    ])
}

/// A port nothing listens on (bound a moment ago, then released).
fn closed_port() -> u16 {
    common::free_port()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_tool_answers_and_bad_requests_get_exact_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    std::fs::write(
        root.join("WORKFLOW.md"),
        "---\ntracker:\n  kind: file\n  project: MT\n  api_key: sekrit-tracker-key-42\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\nagent:\n  kind: mock\n  max_tokens: 5000\n---\nWork.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("issues.json"), issues_json().to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let db = root.join("state").join("sortie.db");
    populate(&db);
    let ws = root.join("ws").join("MT-1");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    let usage = sortie::agent::TokenUsage::new(120, 30, 20, 0);
    let started = sortie::clock::Clock::now_ms(&sortie::clock::SystemClock) - 5_000;
    let state = sortie::agent::state_file::StateFile::new(2, 3, Some(1), started, Some(&usage));
    sortie::agent::state_file::write(&ws, &state).unwrap_or_else(|e| panic!("{e}"));

    let mut cmd = Command::new(SORTIE);
    cmd.current_dir(root)
        .args(["mcp-server", "--workflow", "WORKFLOW.md"])
        .env("SORTIE_ISSUE_ID", "MT-1")
        .env("SORTIE_ISSUE_IDENTIFIER", "MT-1")
        .env("SORTIE_WORKSPACE", &ws)
        .env("SORTIE_DB_PATH", &db)
        .env(
            "SORTIE_API_URL",
            format!("http://127.0.0.1:{}", closed_port()),
        );
    let mut c = Client::spawn(cmd);

    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(init["result"]["capabilities"], json!({"tools": {}}));
    assert_eq!(init["result"]["serverInfo"]["name"], "sortie-tools");
    assert!(init["result"]["serverInfo"]["version"].is_string());
    // A notification gets no answer: the next line answers the next request.
    c.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    let list = c.request("tools/list", json!({}));
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "cost_budget",
            "sortie_status",
            "tracker_api",
            "workspace_history"
        ]
    );
    let empty = json!({"type": "object", "properties": {}, "additionalProperties": false});
    for t in &tools {
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
        if t["name"] != "tracker_api" {
            assert_eq!(t["inputSchema"], empty, "{t}");
        }
    }
    let tracker_schema = &tools[2]["inputSchema"];
    assert_eq!(
        tracker_schema["properties"]["operation"]["enum"],
        json!([
            "fetch_issue",
            "fetch_comments",
            "search_issues",
            "transition_issue"
        ])
    );
    assert_eq!(tracker_schema["required"], json!(["operation"]));
    assert_eq!(tracker_schema["additionalProperties"], false);

    // sortie_status reads .sortie/state.json.
    let (res, status) = c.call("sortie_status", json!({}));
    assert!(res.get("isError").is_none(), "{res}");
    assert_eq!(status["turn_number"], 2);
    assert_eq!(status["max_turns"], 3);
    assert_eq!(status["turns_remaining"], 1);
    assert_eq!(status["attempt"], 1);
    assert!(
        status["session_duration_seconds"]
            .as_i64()
            .is_some_and(|s| s >= 5)
    );
    assert_eq!(status["tokens"]["input_tokens"], 120);
    assert_eq!(status["tokens"]["total_tokens"], 150);
    assert_eq!(status["tokens"]["cache_read_tokens"], 20);

    // workspace_history: this issue's runs only, newest first.
    let (_, history) = c.call("workspace_history", json!({}));
    assert_eq!(history["issue_id"], "MT-1");
    let entries = history["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 2, "{history}");
    assert_eq!(entries[0]["attempt"], 2);
    assert_eq!(entries[0]["status"], "failed");
    assert_eq!(entries[0]["error"], "turn_failed: boom");
    assert_eq!(entries[0]["agent_adapter"], "claude-code");
    assert!(
        entries[0]["started_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z'))
    );
    assert_eq!(entries[1]["attempt"], 1);
    assert_eq!(entries[1]["error"], Value::Null);

    // cost_budget: the daemon cannot be reached, so the database answers and says so.
    let (res, cost) = c.call("cost_budget", json!({}));
    assert!(res.get("isError").is_none(), "{res}");
    assert_eq!(cost["live"], false, "{cost}");
    assert!(cost["live_error"].is_string());
    assert_eq!(cost["used_tokens"], 1400);
    assert_eq!(cost["budget_tokens"], 5000);
    assert_eq!(cost["remaining_tokens"], 3600);
    assert_eq!(cost["used_sessions"], 2);
    assert_eq!(cost["budget_sessions"], 0);
    assert_eq!(cost["budget_usd"], 0.0);
    assert_eq!(cost["used_usd"], 0.5);

    // tracker_api on the file tracker, within the project.
    let (_, issue) = c.call(
        "tracker_api",
        json!({"operation": "fetch_issue", "issue_id": "MT-1"}),
    );
    assert_eq!(issue["success"], true, "{issue}");
    assert_eq!(issue["data"]["identifier"], "MT-1");
    assert_eq!(issue["data"]["title"], "First");
    let (_, comments) = c.call(
        "tracker_api",
        json!({"operation": "fetch_comments", "issue_id": "MT-1"}),
    );
    assert_eq!(
        comments["data"],
        json!([{"id": "c1", "author": "ann", "body": "please look", "created_at": "2026-01-02T00:00:00Z"}])
    );
    let (_, search) = c.call("tracker_api", json!({"operation": "search_issues"}));
    let found: Vec<&str> = search["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["identifier"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        found.contains(&"MT-1") && !found.contains(&"MT-2"),
        "{search}"
    );
    let (_, moved) = c.call(
        "tracker_api",
        json!({"operation": "transition_issue", "issue_id": "MT-1", "target_state": "In Progress"}),
    );
    assert_eq!(
        moved,
        json!({"success": true, "data": {"transitioned": true}})
    );
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("issues.json")).unwrap_or_default(),
    )
    .unwrap_or(Value::Null);
    assert_eq!(file[0]["state"], "In Progress");

    // An issue of another project is refused with a protocol error naming the rule.
    c.scope_refusal(json!({"operation": "fetch_issue", "issue_id": "OTHER-1"}));
    c.scope_refusal(
        json!({"operation": "transition_issue", "issue_id": "OTHER-1", "target_state": "Done"}),
    );
    assert_eq!(file[2]["state"], "To Do");
    // Tool-level failures: the envelope names the kind.
    let kind = |c: &mut Client, args: Value| {
        let (res, body) = c.call("tracker_api", args);
        assert!(res.get("isError").is_none(), "{res}");
        assert_eq!(body["success"], false, "{body}");
        body["error"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        kind(&mut c, json!({"operation": "fetch_issue"})),
        "invalid_input"
    );
    assert_eq!(
        kind(
            &mut c,
            json!({"operation": "transition_issue", "issue_id": "MT-1"})
        ),
        "invalid_input"
    );
    assert_eq!(
        kind(
            &mut c,
            json!({"operation": "delete_issue", "issue_id": "MT-1"})
        ),
        "unsupported_operation"
    );
    assert_eq!(
        kind(
            &mut c,
            json!({"operation": "fetch_issue", "issue_id": "MT-404"})
        ),
        "tracker_not_found"
    );

    // Protocol errors, each answered exactly, the server answering on afterwards.
    let bad = c.exchange("{not json");
    assert_eq!(bad["error"]["code"], -32700);
    assert_eq!(bad["id"], Value::Null);
    let wrong = c.exchange(r#"{"jsonrpc":"1.0","id":"w","method":"tools/list"}"#);
    assert_eq!(wrong["error"]["code"], -32600);
    assert_eq!(wrong["id"], "w");
    let missing = c.exchange(r#"{"id":"m","method":"tools/list"}"#);
    assert_eq!(missing["error"]["code"], -32600);
    let method = c.request("prompts/list", json!({}));
    assert_eq!(method["error"]["code"], -32601);
    assert_eq!(c.call_error("no_such_tool", json!({})), -32602);
    assert_eq!(
        c.call_error(
            "tracker_api",
            json!({"operation": "fetch_issue", "extra": 1})
        ),
        -32602
    );
    assert_eq!(
        c.call_error("tracker_api", json!({"issue_id": "MT-1"})),
        -32602
    );
    assert_eq!(c.call_error("tracker_api", json!({"operation": 7})), -32602);
    assert_eq!(
        c.call_error("sortie_status", json!({"verbose": true})),
        -32602
    );
    assert_eq!(c.call_error("workspace_history", json!({"n": 1})), -32602);
    assert_eq!(c.call_error("cost_budget", json!({"x": null})), -32602);
    let not_object = c.request(
        "tools/call",
        json!({"name": "cost_budget", "arguments": [1]}),
    );
    assert_eq!(not_object["error"]["code"], -32602);
    let no_name = c.request("tools/call", json!({"arguments": {}}));
    assert_eq!(no_name["error"]["code"], -32602);
    let params_array = c.request("tools/call", json!([1, 2]));
    assert_eq!(params_array["error"]["code"], -32602);
    // An oversized line is dropped whole and answered as a parse error.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"tools/list","pad":"{}"}}"#,
        "x".repeat(10 * 1024 * 1024 + 16)
    );
    let over = c.exchange(&huge);
    assert_eq!(over["error"]["code"], -32700);

    // Still answering; no secret in any output.
    let (res, _) = c.call("sortie_status", json!({}));
    assert!(!text_of(&res).contains("sekrit-tracker-key-42"));
    let (_, issue) = c.call(
        "tracker_api",
        json!({"operation": "fetch_issue", "issue_id": "MT-1"}),
    );
    assert!(!issue.to_string().contains("sekrit-tracker-key-42"));

    // The database was only read.
    let conn = rusqlite::Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM run_history", [], |r| r.get(0))
        .unwrap_or(-1);
    assert_eq!(runs, 3);

    assert_eq!(c.finish(), Some(0), "EOF on stdin ends the server cleanly");
}

#[test]
fn unavailable_sources_leave_tools_unregistered_or_failing_as_tool_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    // No tracker.project: no tracker_api.
    std::fs::write(
        root.join("WORKFLOW.md"),
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\nagent:\n  kind: mock\n---\nWork.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("issues.json"), "[]").unwrap_or_else(|e| panic!("{e}"));
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(SORTIE);
    cmd.args(["mcp-server", "--workflow"])
        .arg(root.join("WORKFLOW.md"))
        .env("SORTIE_ISSUE_ID", "MT-1")
        .env("SORTIE_WORKSPACE", &ws)
        .env("SORTIE_DB_PATH", root.join("missing.db"))
        .env(
            "SORTIE_API_URL",
            format!("http://127.0.0.1:{}", closed_port()),
        );
    let mut c = Client::spawn(cmd);
    let list = c.request("tools/list", Value::Null);
    let names: Vec<String> = list["result"]["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    // The database does not open: no workspace_history; cost_budget still asks the daemon.
    assert_eq!(names, ["cost_budget", "sortie_status"]);
    assert!(
        !root.join("missing.db").exists(),
        "a read-only open creates nothing"
    );
    // No state file yet: an isError result, not a crash.
    let (res, body) = c.call("sortie_status", json!({}));
    assert_eq!(res["isError"], true);
    assert!(body["error"].is_string(), "{body}");
    // Neither database nor daemon: an isError result.
    let (res, body) = c.call("cost_budget", json!({}));
    assert_eq!(res["isError"], true, "{res}");
    assert!(body["error"].is_string());
    assert_eq!(c.call_error("workspace_history", json!({})), -32602);
    assert_eq!(c.finish(), Some(0));
}

#[test]
fn a_workflow_that_does_not_load_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(SORTIE)
        .args(["mcp-server", "--workflow"])
        .arg(dir.path().join("NOPE.md"))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("sortie mcp-server: ") && stderr.contains("NOPE.md"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let out = Command::new(SORTIE)
        .arg("mcp-server")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--workflow"));
}

/// The fake agent's logged invocations.
fn invocations(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_dispatch_writes_the_mcp_file_and_its_server_sees_the_live_session() {
    let p = Project::new();
    p.write(
        "operator-mcp.json",
        r#"{"mcpServers":{"docs":{"type":"stdio","command":"docs-mcp","args":[]}}}"#,
    );
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  project: MT",
        "  max_tokens: 100000\n  max_sessions: 5\n",
        "claude-code:\n  mcp_config: operator-mcp.json\n",
    );
    p.write(
        "issues.json",
        &json!([{"id": "MT-1", "identifier": "MT-1", "title": "First", "state": "To Do"}])
            .to_string(),
    );
    p.scenario(
        "MT-1",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working", "input_tokens": 300, "output_tokens": 40, "model": "m-1"}}),
            // The state file takes usage at most once a second: a second figure after that
            // brings the first one to disk too.
            json!({"sleep_ms": 1100}),
            json!({"assistant": {"id": "msg_2", "text": "still working", "input_tokens": 100, "output_tokens": 20, "model": "m-1"}}),
            json!({"hang": true}),
        ],
    );
    populate(&p.db());
    let mut d = p.start();
    d.graceful_drop = true;
    let ws = p.workspace("MT-1");
    let mcp_path = ws.join(".sortie").join("mcp.json");
    d.wait_state(
        "MT-1 running with its tokens",
        Duration::from_secs(60),
        |s| {
            s["running"][0]["issue_identifier"] == "MT-1"
                && s["running"][0]["tokens"]["output_tokens"].as_i64() == Some(60)
        },
    );

    // The file: private, ignored by git, naming this binary, the workflow and the session.
    let mode = std::fs::metadata(&mcp_path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_else(|e| panic!("{}: {e}", mcp_path.display()));
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::read_to_string(ws.join(".sortie/.gitignore"))
            .unwrap_or_default()
            .trim(),
        "*"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&mcp_path).unwrap_or_default())
        .unwrap_or(Value::Null);
    assert_eq!(doc["mcpServers"]["docs"]["command"], "docs-mcp", "{doc}");
    let own = &doc["mcpServers"]["sortie-tools"];
    assert_eq!(own["type"], "stdio");
    let binary = std::fs::canonicalize(SORTIE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(own["command"], binary.to_string_lossy().as_ref());
    assert_eq!(
        own["args"],
        json!(["mcp-server", "--workflow", p.workflow().to_string_lossy()])
    );
    let env: BTreeMap<String, String> =
        serde_json::from_value(own["env"].clone()).unwrap_or_else(|e| panic!("env: {e}"));
    assert_eq!(env["SORTIE_ISSUE_ID"], "MT-1");
    assert_eq!(env["SORTIE_ISSUE_IDENTIFIER"], "MT-1");
    assert_eq!(env["SORTIE_WORKSPACE"], ws.to_string_lossy());
    assert_eq!(env["SORTIE_DB_PATH"], p.db().to_string_lossy());
    assert_eq!(env["SORTIE_SESSION_ID"], "");
    assert_eq!(env["SORTIE_ATTEMPT"], "0");
    assert_eq!(
        env["SORTIE_API_URL"],
        format!("http://127.0.0.1:{}", d.port)
    );
    // Layer 1: only what the server uses; not the daemon's other SORTIE_* variables.
    assert!(!env.contains_key("SORTIE_PRICE_TABLE_FETCH"), "{env:?}");
    assert!(env.keys().all(|k| k.starts_with("SORTIE_")), "{env:?}");

    // The agent was given the file.
    let calls = invocations(&p);
    let argv: Vec<String> = calls
        .first()
        .and_then(|c| serde_json::from_value(c["argv"].clone()).ok())
        .unwrap_or_default();
    let at = argv
        .iter()
        .position(|a| a == "--mcp-config")
        .unwrap_or_else(|| panic!("no --mcp-config in {argv:?}"));
    assert_eq!(argv.get(at + 1).map(String::as_str), mcp_path.to_str());
    assert_eq!(argv.iter().filter(|a| *a == "--mcp-config").count(), 1);

    // Start the server the way the agent runtime does: the file's command, args and env.
    let mut cmd = Command::new(own["command"].as_str().unwrap_or_default());
    let args: Vec<String> = serde_json::from_value(own["args"].clone()).unwrap_or_default();
    cmd.args(&args).envs(&env).current_dir(&ws);
    let mut c = Client::spawn(cmd);
    c.request("initialize", json!({"protocolVersion": "2024-11-05"}));
    let list = c.request("tools/list", json!({}));
    assert_eq!(
        list["result"]["tools"].as_array().map(Vec::len),
        Some(4),
        "{list}"
    );

    let (_, cost) = c.call("cost_budget", json!({}));
    assert_eq!(cost["live"], true, "{cost}");
    assert_eq!(cost["session_running"], true, "{cost}");
    assert_eq!(cost["session_tokens"], 460, "{cost}");
    assert_eq!(cost["used_tokens"], 1400 + 460, "{cost}");
    assert_eq!(cost["used_sessions"], 2);
    assert_eq!(cost["budget_sessions"], 5);
    assert_eq!(cost["remaining_sessions"], 3);
    assert_eq!(cost["budget_tokens"], 100000);
    assert_eq!(cost["budget_usd"], 0.0);

    let status = wait_for("the state file's figures", Duration::from_secs(20), || {
        let (_, status) = c.call("sortie_status", json!({}));
        (status["tokens"]["output_tokens"] == 60).then_some(status)
    });
    assert_eq!(status["turn_number"], 1, "{status}");
    assert_eq!(status["max_turns"], 1);
    assert_eq!(status["attempt"], 0);
    assert_eq!(status["tokens"]["input_tokens"], 400);

    let (_, history) = c.call("workspace_history", json!({}));
    assert_eq!(history["entries"].as_array().map(Vec::len), Some(2));

    let (_, issue) = c.call(
        "tracker_api",
        json!({"operation": "fetch_issue", "issue_id": "MT-1"}),
    );
    assert_eq!(issue["success"], true, "{issue}");
    assert_eq!(issue["data"]["title"], "First");
    // Scope is what the tracker says: an id naming no issue at all is simply not found.
    let (_, absent) = c.call(
        "tracker_api",
        json!({"operation": "fetch_issue", "issue_id": "ZZ-1"}),
    );
    assert_eq!(absent["error"]["kind"], "tracker_not_found", "{absent}");
    assert_eq!(c.finish(), Some(0));

    // Once the daemon is gone, the same call answers from the database.
    assert_eq!(d.terminate(), Some(0));
    let mut cmd = Command::new(own["command"].as_str().unwrap_or_default());
    cmd.args(&args).envs(&env);
    let mut c = Client::spawn(cmd);
    let (res, cost) = c.call("cost_budget", json!({}));
    assert!(res.get("isError").is_none(), "{res}");
    assert_eq!(cost["live"], false, "{cost}");
    assert!(cost["live_error"].is_string());
    // The interrupted session is a finished run now.
    assert!(
        cost["used_sessions"].as_u64().is_some_and(|n| n >= 2),
        "{cost}"
    );
    assert_eq!(c.finish(), Some(0));
}

#[test]
fn an_operator_config_that_claims_sortie_tools_fails_the_attempt() {
    let p = Project::new();
    p.write(
        "operator-mcp.json",
        r#"{"mcpServers":{"sortie-tools":{"command":"elsewhere"}}}"#,
    );
    p.fake_agent_workflow("", "claude-code:\n  mcp_config: operator-mcp.json\n");
    p.write(
        "issues.json",
        &json!([{"id": "MT-1", "identifier": "MT-1", "title": "First", "state": "To Do"}])
            .to_string(),
    );
    let d = p.start();
    d.wait_until("a failed run", Duration::from_secs(60), || {
        p.run_statuses("MT-1").first().map(String::as_str) == Some("failed")
    });
    let conn = p.db_conn();
    let error: String = conn
        .query_row(
            "SELECT error FROM run_history WHERE issue_id = 'MT-1' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap_or_default();
    assert!(error.contains("sortie-tools"), "{error}");
    assert!(invocations(&p).is_empty(), "the agent never started");
    assert!(!p.workspace("MT-1").join(".sortie/mcp.json").exists());
}

#[test]
fn a_copilot_session_is_given_the_file_as_an_additional_config() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().to_path_buf();
    std::fs::create_dir_all(root.join("bin")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(common::FAKE_AGENT, root.join("bin/copilot"))
        .unwrap_or_else(|e| panic!("{e}"));
    let wf = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: copilot-cli\n  command: {}\n  env: [FAKE_AGENT_*]\n  max_sessions: 1\ncopilot-cli:\n  mcp_config: '{{\"mcpServers\":{{\"docs\":{{\"command\":\"docs-mcp\"}}}}}}'\n---\nWork.\n",
        root.join("bin/copilot").display()
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        root.join("issues.json"),
        json!([{"id": "1", "identifier": "C-1", "title": "Copilot work", "state": "To Do"}])
            .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        root.join("scenario.jsonl"),
        json!({"result": {"session_id": "cop-1"}}).to_string() + "\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = common::spawn(&root.join("sortie.log"), None, |port| {
        let mut cmd = common::sortie_command();
        cmd.current_dir(&root)
            .arg("--port")
            .arg(port.to_string())
            .arg(root.join("WORKFLOW.md"))
            .env("FAKE_AGENT_SCENARIO", root.join("scenario.jsonl"))
            .env("FAKE_AGENT_ARGV_LOG", root.join("argv.log"))
            .env("COPILOT_GITHUB_TOKEN", "test-token-not-real")
            .env_remove("RUST_LOG");
        cmd
    });
    let argv: Vec<String> = wait_for("the copilot turn", Duration::from_secs(60), || {
        std::fs::read_to_string(root.join("argv.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| {
                let argv: Vec<String> = serde_json::from_value(v["argv"].clone()).ok()?;
                // The turn, not the `--version` canary (the prompt travels on stdin).
                argv.iter().any(|a| a == "--output-format").then_some(argv)
            })
    });
    let mcp_path = root.join("ws").join("C-1").join(".sortie").join("mcp.json");
    let at = argv
        .iter()
        .position(|a| a == "--additional-mcp-config")
        .unwrap_or_else(|| panic!("no --additional-mcp-config in {argv:?}"));
    assert_eq!(
        argv.get(at + 1).cloned(),
        Some(format!("@{}", mcp_path.display()))
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&mcp_path).unwrap_or_default())
        .unwrap_or(Value::Null);
    assert_eq!(doc["mcpServers"]["docs"]["command"], "docs-mcp", "{doc}");
    assert_eq!(doc["mcpServers"]["sortie-tools"]["type"], "stdio");
    assert_eq!(
        doc["mcpServers"]["sortie-tools"]["env"]["SORTIE_API_URL"],
        format!("http://127.0.0.1:{}", d.port)
    );
    // The credential of the daemon's environment is not a SORTIE_* variable: not copied.
    assert!(!doc.to_string().contains("test-token-not-real"));
}

/// With a Jira project `PROJ`, the session tool reaches PROJ's issues by number or key and
/// nothing else: another project's issue, named by its number, its key or a path-shaped
/// spelling, is refused before anything of it is read or written.
#[test]
fn a_jira_session_reaches_only_its_own_projects_issues() {
    let fake = common::fake_jira::start();
    let (ours, theirs) = fake.with_state(|s| {
        let ours = s.add_issue(1, "Our issue", "To Do");
        let theirs = s.add_issue_in("OTHER", 9, "Other team's secret plan", "To Do");
        if let Some(i) = s.issues.get_mut(&theirs) {
            i.comments
                .push(json!({"id": "31", "author": {"displayName": "eve"},
                "body": {"type": "doc", "version": 1, "content": [{"type": "paragraph",
                    "content": [{"type": "text", "text": "private comment text"}]}]},
                "created": "2026-01-01T00:00:00.000+0000"}));
        }
        (ours, theirs)
    });
    assert_eq!((ours, theirs), (10_001, 20_009));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: jira\n  endpoint: {}\n  api_key: $JIRA_API_TOKEN\n  project: PROJ\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\njira:\n  retry_base_ms: 10\n  timeout_ms: 2000\nagent:\n  kind: mock\n---\nWork.\n",
            fake.url
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(SORTIE);
    cmd.current_dir(dir.path())
        .args(["mcp-server", "--workflow", "WORKFLOW.md"])
        .env("JIRA_API_TOKEN", common::fake_jira::api_key());
    let mut c = Client::spawn(cmd);
    c.request("initialize", json!({"protocolVersion": "2024-11-05"}));

    // Our issue, by number and by key.
    for id in ["10001", "PROJ-1", "proj-1"] {
        let (_, issue) = c.call(
            "tracker_api",
            json!({"operation": "fetch_issue", "issue_id": id}),
        );
        assert_eq!(issue["success"], true, "{id}: {issue}");
        assert_eq!(issue["data"]["title"], "Our issue");
    }

    // The other project's issue: by number (the reported escape), by key, path-shaped.
    let foreign = [
        "20009",
        "OTHER-9",
        "other-9",
        "../20009",
        "10001/../20009",
        "%2F..%2F20009",
        "10001%2F..%2F..%2Fissue%2F20009",
        "http://127.0.0.1:1/rest/api/3/issue/20009",
    ];
    for id in foreign {
        for op in ["fetch_issue", "fetch_comments", "transition_issue"] {
            let refused =
                c.scope_refusal(json!({"operation": op, "issue_id": id, "target_state": "Done"}));
            let text = refused.to_string();
            assert!(
                !text.contains("secret plan") && !text.contains("private comment"),
                "{op} {id}: {text}"
            );
        }
    }
    assert_eq!(fake.with_state(|s| s.status(theirs)), "To Do");
    let touched: Vec<String> = fake
        .journal()
        .iter()
        .filter(|r| r.path.contains("20009") || r.path.contains("OTHER"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    // Resolving by number or key reads the issue once to learn its project; nothing else.
    assert!(
        touched
            .iter()
            .all(|t| t.starts_with("GET /rest/api/3/issue/")
                && !t.ends_with("/comment")
                && !t.ends_with("/transitions")),
        "{touched:?}"
    );
    assert!(
        fake.journal()
            .iter()
            .all(|r| !r.path.contains("..") && !r.path.contains("%2F") && !r.path.contains("http")),
        "a spelling reached the server"
    );

    // Our issue still moves, by the id the tracker answered.
    let (_, moved) = c.call(
        "tracker_api",
        json!({"operation": "transition_issue", "issue_id": "PROJ-1", "target_state": "In Progress"}),
    );
    assert_eq!(moved["success"], true, "{moved}");
    assert_eq!(fake.with_state(|s| s.status(ours)), "In Progress");
    assert_eq!(
        fake.requests("POST", "/rest/api/3/issue/10001/transitions")
            .len(),
        1
    );
    assert_eq!(c.finish(), Some(0));
}

/// With several workflows in one database, the session tools read their own workflow's rows
/// (`SORTIE_WORKFLOW`, set by a daemon of several workflows): another workflow's runs of the
/// same issue id are not its history.
#[test]
fn the_history_is_the_named_workflow_s_own() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    std::fs::write(
        root.join("WORKFLOW.md"),
        "---\ntracker:\n  kind: file\n  project: MT\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\nagent:\n  kind: mock\n---\nWork.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("issues.json"), issues_json().to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let db = root.join("sortie.db");
    {
        let clock = std::sync::Arc::new(sortie::clock::ManualClock::new(1_774_533_600_000));
        let store = Store::open(&db, clock).unwrap_or_else(|e| panic!("open store: {e}"));
        let web = store.scoped("web");
        let api = store.scoped("api");
        web.writer()
            .record_run(
                stored_run("MT-1", 1, RunStatus::Succeeded, 1_774_533_600_000),
                Vec::new(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        for attempt in [1, 2] {
            api.writer()
                .record_run(
                    RunRecord {
                        // Dispatch ids are unique across the database.
                        dispatch_id: Some(format!("API-{attempt}")),
                        ..stored_run(
                            "MT-1",
                            attempt,
                            RunStatus::Failed,
                            1_774_533_700_000 + attempt,
                        )
                    },
                    Vec::new(),
                )
                .unwrap_or_else(|e| panic!("{e}"));
        }
        store.close().unwrap_or_else(|e| panic!("close store: {e}"));
    }
    let history_of = |workflow: Option<&str>| {
        let mut cmd = Command::new(SORTIE);
        cmd.current_dir(root)
            .args(["mcp-server", "--workflow", "WORKFLOW.md"])
            .env("SORTIE_ISSUE_ID", "MT-1")
            .env("SORTIE_DB_PATH", &db);
        if let Some(w) = workflow {
            cmd.env("SORTIE_WORKFLOW", w);
        }
        let mut c = Client::spawn(cmd);
        c.request(
            "initialize",
            json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        let (_, history) = c.call("workspace_history", json!({}));
        history["entries"].as_array().cloned().unwrap_or_default()
    };
    let web = history_of(Some("web"));
    assert_eq!(web.len(), 1, "{web:?}");
    assert_eq!(web[0]["status"], "succeeded");
    assert_eq!(history_of(Some("api")).len(), 2);
    // Without the variable: the single workflow's rows, none here.
    assert!(history_of(None).is_empty());
}
