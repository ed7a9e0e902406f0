//! The `codex` mode of `fake-agent` (`FAKE_AGENT_KIND=codex`, or a symlink named `codex`): a
//! scripted `codex app-server` peer speaking JSON-RPC without the `jsonrpc` member on
//! stdin/stdout. It answers `initialize`, `account/read`, `account/login/start` (then sends
//! `account/login/completed`), `thread/start`, `thread/resume`, `turn/start` (then plays the
//! turn's script, ending with `turn/completed`) and `turn/interrupt`; `initialized` and other
//! notifications are only logged. It exits 0 when stdin closes.
//!
//! Environment:
//! - `FAKE_AGENT_SCENARIO=<file>`: the script, one JSON object per line (blank lines and lines
//!   starting with `#` skipped). A line may carry `"session": N` (only the N-th server process,
//!   counted in `$FAKE_AGENT_STATE_DIR/codex_sessions`, 1 without a state dir) and, for turn
//!   steps, `"turn": N` (only the N-th `turn/start` of that process).
//! - `FAKE_AGENT_STATE_DIR=<dir>`: where the process counter lives.
//! - `FAKE_AGENT_ARGV_LOG=<file>`: one JSON line per process: `{"argv":[…],"cwd":"…","session":N}`.
//! - `FAKE_AGENT_RPC_LOG=<file>`: every message received, one JSON line each, as
//!   `{"session":N,"received":{…}}`; and for each answer to a server request this mode sent,
//!   `{"session":N,"reply_to":"<method>","reply":{…}}`.
//!
//! Configuration lines `{"config": {…}}` (merged in order) shape the handshake:
//!
//! | key | effect (default) |
//! |---|---|
//! | `account` | `account/read`'s `account` (`{"type":"apiKey"}`); `null` means not logged in |
//! | `requires_openai_auth` | `account/read`'s `requiresOpenaiAuth` (`true`) |
//! | `login` | `"fail"` makes `account/login/completed` report `success:false` |
//! | `resume` | `"fail"` answers `thread/resume` with an error |
//! | `thread_id` | the id `thread/start` returns (`thr-fake-<session>`) |
//! | `model` | the model `thread/start` reports (`fake-codex-model`) |
//! | `crash_on` | a method: on that request, print `fake-agent: crashing on <method>` to stderr and exit 1 |
//! | `stderr` | a line printed to stderr at startup |
//! | `warn` | a `configWarning` notification sent before the `initialize` answer |
//! | `ask_on_initialize` | a method: a server request sent (and its answer awaited) before the `initialize` answer |
//!
//! Turn steps (any other step goes to the Claude mode's step vocabulary: `raw`, `stderr`,
//! `sleep_ms`, `hang`, `exit`, `kill_self`, `spawn_grandchild`, `ignore_sigterm`,
//! `big_line_bytes`, `write_file`, `cat_file`, `wait_file`, …):
//!
//! | step | effect |
//! |---|---|
//! | `{"started": true}` | `turn/started` |
//! | `{"message": "text"}` | `item/started` + `item/completed` of an `agentMessage` |
//! | `{"command": "ls", "exit_code": 0}` | `item/started` + `item/completed` of a `commandExecution` |
//! | `{"token_usage": {"input": N, "cached": N, "output": N}}` | adds to the thread total and sends `thread/tokenUsage/updated` (`total` and `last`) |
//! | `{"rate_limits": {…}}` | `account/rateLimits/updated` with this `rateLimits` object |
//! | `{"complete": {"status": "completed", "usage": {…}, "error": {…}}}` | `turn/completed` (usage in `input_tokens`/`output_tokens`/`cached_input_tokens`) |
//! | `{"usage_limit": "message"}` | `turn/completed` failed with `codexErrorInfo: "UsageLimitExceeded"` |
//! | `{"request": {"method": "…", "params": {…}}}` | a server request; waits for the answer and logs it |
//! | `{"wait_interrupt": true}` | waits for `turn/interrupt`, answers it, sends `turn/completed` interrupted |
//! | `{"notify": {"method": "…", "params": {…}}}` | any notification |
//!
//! A turn without steps plays `started`, `message "Working on it."`, then `complete` with usage
//! 100 in / 20 out. A turn whose steps send no `turn/completed` gets one (completed, no usage).

use serde_json::{Map, Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};

struct Peer {
    session: u64,
    config: Map<String, Value>,
    steps: Vec<Value>,
    thread_id: String,
    turn: u64,
    turn_id: String,
    completed: bool,
    total: (u64, u64, u64),
    next_request_id: u64,
    lines: std::io::Lines<std::io::StdinLock<'static>>,
}

/// Plays this mode's scenario.
pub fn run() {
    let session = next_session();
    log_argv(session);
    let (config, steps) = crate::load_session(session).unwrap_or_else(|e| {
        eprintln!("fake-agent: scenario: {e}");
        std::process::exit(3);
    });
    if let Some(line) = config.get("stderr").and_then(Value::as_str) {
        eprintln!("{line}");
    }
    let mut peer = Peer {
        session,
        thread_id: String::new(),
        config,
        steps,
        turn: 0,
        turn_id: String::new(),
        completed: false,
        total: (0, 0, 0),
        next_request_id: 1000,
        lines: std::io::stdin().lock().lines(),
    };
    while let Some(msg) = peer.read() {
        if let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        {
            peer.request(
                method,
                id.clone(),
                msg.get("params").unwrap_or(&Value::Null),
            );
        }
    }
}

fn next_session() -> u64 {
    let Some(dir) = std::env::var_os("FAKE_AGENT_STATE_DIR") else {
        return 1;
    };
    let path = PathBuf::from(dir).join("codex_sessions");
    let n = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    let _ = std::fs::write(&path, n.to_string());
    n
}

fn log_argv(session: u64) {
    if let Some(p) = std::env::var_os("FAKE_AGENT_ARGV_LOG") {
        let argv: Vec<String> = std::env::args().collect();
        let rec = json!({"argv": argv, "cwd": crate::cwd(), "session": session});
        crate::append_line(Path::new(&p), &rec.to_string());
    }
}

fn rpc_log(rec: &Value) {
    if let Some(p) = std::env::var_os("FAKE_AGENT_RPC_LOG") {
        crate::append_line(Path::new(&p), &rec.to_string());
    }
}

fn send(v: Value) {
    crate::out_line(&v.to_string());
}

fn notify(method: &str, params: Value) {
    send(json!({"method": method, "params": params}));
}

impl Peer {
    /// The next JSON message on stdin (logged); `None` at end of input.
    fn read(&mut self) -> Option<Value> {
        loop {
            let line = self.lines.next()?.ok()?;
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            rpc_log(&json!({"session": self.session, "received": v}));
            return Some(v);
        }
    }

    fn cfg(&self, key: &str) -> Option<&Value> {
        self.config.get(key)
    }

    fn model(&self) -> Value {
        self.cfg("model")
            .cloned()
            .unwrap_or(json!("fake-codex-model"))
    }

    fn request(&mut self, method: &str, id: Value, params: &Value) {
        if self.cfg("crash_on").and_then(Value::as_str) == Some(method) {
            eprintln!("fake-agent: crashing on {method}");
            std::process::exit(1);
        }
        match method {
            "initialize" => {
                if let Some(w) = self.cfg("warn").and_then(Value::as_str) {
                    notify("configWarning", json!({"summary": w, "details": null}));
                }
                if let Some(m) = self.cfg("ask_on_initialize").and_then(Value::as_str) {
                    let m = m.to_string();
                    self.server_request(&json!({"method": m, "params": {}}));
                }
                send(json!({"id": id, "result": {
                    "userAgent": "fake-codex/0.0.0", "codexHome": "/nonexistent",
                    "platformFamily": "unix", "platformOs": "linux"}}));
            }
            "account/read" => {
                let account = self
                    .cfg("account")
                    .cloned()
                    .unwrap_or(json!({"type": "apiKey"}));
                let requires = self
                    .cfg("requires_openai_auth")
                    .cloned()
                    .unwrap_or(json!(true));
                send(
                    json!({"id": id, "result": {"account": account, "requiresOpenaiAuth": requires}}),
                );
            }
            "account/login/start" => {
                send(json!({"id": id, "result": {"type": "apiKey"}}));
                let ok = self.cfg("login").and_then(Value::as_str) != Some("fail");
                let mut p = json!({"success": ok, "loginId": null});
                if !ok {
                    p["error"] = json!("invalid api key");
                }
                notify("account/login/completed", p);
            }
            "thread/start" => {
                self.thread_id = self
                    .cfg("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("thr-fake-{}", self.session));
                let thread = json!({"id": self.thread_id, "cwd": crate::cwd()});
                send(json!({"id": id, "result": {"thread": thread, "model": self.model()}}));
                notify("thread/started", json!({"thread": thread}));
            }
            "thread/resume" => {
                let wanted = params.get("threadId").and_then(Value::as_str).unwrap_or("");
                if self.cfg("resume").and_then(Value::as_str) == Some("fail") {
                    send(json!({"id": id, "error": {"code": -32600,
                        "message": format!("no rollout found for thread id {wanted}")}}));
                } else {
                    self.thread_id = wanted.to_string();
                    send(
                        json!({"id": id, "result": {"thread": {"id": wanted}, "model": self.model()}}),
                    );
                }
            }
            "turn/start" => {
                self.turn += 1;
                self.turn_id = format!("turn-{}", self.turn);
                self.completed = false;
                send(
                    json!({"id": id, "result": {"turn": {"id": self.turn_id, "status": "inProgress"}}}),
                );
                self.play_turn();
            }
            "turn/interrupt" => send(json!({"id": id, "result": {}})),
            other => send(json!({"id": id, "error": {"code": -32601,
                "message": format!("fake codex does not know {other}")}})),
        }
    }

    fn play_turn(&mut self) {
        let turn = self.turn;
        let mut steps: Vec<Value> = self
            .steps
            .iter()
            .filter(|s| {
                s.get("turn")
                    .and_then(Value::as_u64)
                    .is_none_or(|t| t == turn)
            })
            .cloned()
            .collect();
        if steps.is_empty() {
            steps = vec![
                json!({"started": true}),
                json!({"message": "Working on it."}),
                json!({"complete": {"status": "completed",
                    "usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 0}}}),
            ];
        }
        for step in &steps {
            self.step(step);
        }
        if !self.completed {
            self.complete(json!({"status": "completed"}));
        }
    }

    fn complete(&mut self, c: Value) {
        let mut turn = json!({"id": self.turn_id,
            "status": c.get("status").cloned().unwrap_or(json!("completed"))});
        if let Some(e) = c.get("error") {
            turn["error"] = e.clone();
        }
        let mut p = json!({"threadId": self.thread_id, "turn": turn});
        if let Some(u) = c.get("usage") {
            p["usage"] = u.clone();
        }
        notify("turn/completed", p);
        self.completed = true;
    }

    fn item(&self, item: Value) {
        let started = json!({"threadId": self.thread_id, "turnId": self.turn_id, "item": item});
        notify("item/started", started);
    }

    fn step(&mut self, step: &Value) {
        let ids = json!({"threadId": self.thread_id, "turnId": self.turn_id});
        if step.get("started").is_some() {
            notify(
                "turn/started",
                json!({"threadId": self.thread_id,
                "turn": {"id": self.turn_id, "status": "inProgress"}}),
            );
        } else if let Some(text) = step.get("message").and_then(Value::as_str) {
            let id = format!("msg-{}", self.turn);
            self.item(json!({"type": "agentMessage", "id": id, "text": ""}));
            let mut p = ids.clone();
            p["item"] = json!({"type": "agentMessage", "id": id, "text": text});
            notify("item/completed", p);
        } else if let Some(cmd) = step.get("command").and_then(Value::as_str) {
            let code = step.get("exit_code").and_then(Value::as_i64).unwrap_or(0);
            let id = format!("cmd-{}", self.turn);
            self.item(json!({"type": "commandExecution", "id": id, "command": cmd, "status": "inProgress"}));
            let mut p = ids.clone();
            p["item"] = json!({"type": "commandExecution", "id": id, "command": cmd,
                "status": if code == 0 { "completed" } else { "failed" }, "exitCode": code});
            notify("item/completed", p);
        } else if let Some(u) = step.get("token_usage") {
            self.token_usage(u);
        } else if let Some(r) = step.get("rate_limits") {
            notify("account/rateLimits/updated", json!({"rateLimits": r}));
        } else if let Some(c) = step.get("complete") {
            self.complete(c.clone());
        } else if let Some(m) = step.get("usage_limit") {
            let text = m.as_str().unwrap_or("You've hit your usage limit.");
            self.complete(json!({"status": "failed",
                "error": {"message": text, "codexErrorInfo": "UsageLimitExceeded"}}));
        } else if let Some(r) = step.get("request") {
            self.server_request(r);
        } else if step.get("wait_interrupt").is_some() {
            self.wait_interrupt();
        } else if let Some(n) = step.get("notify") {
            let method = n.get("method").and_then(Value::as_str).unwrap_or("");
            notify(method, n.get("params").cloned().unwrap_or(json!({})));
        } else {
            crate::run_step(step, &self.thread_id);
        }
    }

    fn token_usage(&mut self, u: &Value) {
        let f = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (input, cached, output) = (f("input"), f("cached"), f("output"));
        self.total = (
            self.total.0 + input,
            self.total.1 + cached,
            self.total.2 + output,
        );
        let b = |i: u64, c: u64, o: u64| {
            json!({"inputTokens": i, "cachedInputTokens": c,
            "outputTokens": o, "reasoningOutputTokens": 0, "totalTokens": i + o})
        };
        notify(
            "thread/tokenUsage/updated",
            json!({"threadId": self.thread_id,
            "turnId": self.turn_id, "tokenUsage": {
                "total": b(self.total.0, self.total.1, self.total.2),
                "last": b(input, cached, output)}}),
        );
    }

    fn server_request(&mut self, r: &Value) {
        let method = r
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let id = self.next_request_id;
        self.next_request_id += 1;
        send(
            json!({"id": id, "method": method, "params": r.get("params").cloned().unwrap_or(json!({}))}),
        );
        while let Some(msg) = self.read() {
            if msg.get("method").is_none() && msg.get("id").and_then(Value::as_u64) == Some(id) {
                rpc_log(&json!({"session": self.session, "reply_to": method, "reply": msg}));
                return;
            }
            if let (Some(m), Some(rid)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
            {
                let rid = rid.clone();
                let m = m.to_string();
                self.request(&m, rid, &Value::Null);
            }
        }
        std::process::exit(0);
    }

    fn wait_interrupt(&mut self) {
        while let Some(msg) = self.read() {
            if msg.get("method").and_then(Value::as_str) == Some("turn/interrupt") {
                send(json!({"id": msg.get("id").cloned().unwrap_or(Value::Null), "result": {}}));
                self.complete(json!({"status": "interrupted"}));
                return;
            }
        }
        std::process::exit(0);
    }
}
