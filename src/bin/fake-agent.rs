//! `fake-agent`: a scripted stand-in for the agent CLIs, for integration and end-to-end tests.
//! It plays Claude Code unless `FAKE_AGENT_KIND` (or the name it is called by) picks another
//! CLI; each other CLI's mode lives in `fake_agent/<mode>.rs` and documents its own scenario.
//!
//! As Claude Code it accepts every flag sortie passes to `claude` (and exits 2 on any other), logs
//! how it was called, then plays a scenario on stdout in `stream-json` format.
//!
//! Use it as `agent.command: "<path to fake-agent>"` with these environment variables:
//!
//! - `FAKE_AGENT_SCENARIO=<file>`: the script, one JSON object per line (blank lines and lines
//!   starting with `#` are skipped). Each step has one action key and optionally `"turn": N`,
//!   which limits it to the N-th invocation. When no step applies to the current turn, the
//!   default script runs: `init`, one `assistant` message with usage, `result` success.
//!   `"prompt_contains": "text"` limits a step to invocations whose prompt contains that text
//!   (as Claude Code only), e.g. to script self-review's review and fix turns apart.
//! - `FAKE_AGENT_STATE_DIR=<dir>`: where the turn counter lives (file `turns`). Without it the
//!   turn is 1, or 2 when `--resume` was passed.
//! - `FAKE_AGENT_ARGV_LOG=<file>`: appends one JSON line per invocation:
//!   `{"argv":[…],"cwd":"…","turn":N,"session_id":"…","resume":bool,"prompt":"…","prompt_from_stdin":bool}`.
//! - `FAKE_AGENT_ENV_LOG=<file>`: appends one JSON object with the whole environment.
//!
//! Steps (`${SESSION_ID}` inside any string is replaced by the `--session-id`/`--resume` value,
//! and `${ENV}` by the agent's whole environment, one `NAME=value` line per variable, sorted,
//! as an agent that runs `env` would print it):
//!
//! | step | effect |
//! |---|---|
//! | `{"init": {}}` | `system/init` line reporting the session id (or `{"init": {"session_id": "x"}}`) |
//! | `{"assistant": {"text": "…", "input_tokens": N, "output_tokens": N, "model": "…", "tool": {"name": "Bash", "input": {…}}}}` | one assistant message |
//! | `{"result": {"subtype": "success", "text": "…", "is_error": false, "input_tokens": N, "output_tokens": N, "total_cost_usd": X}}` | the result line |
//! | `{"emit": {…}}` | any JSON object as one line |
//! | `{"raw": "text"}` | a raw stdout line (e.g. malformed output) |
//! | `{"stderr": "text"}` | a stderr line |
//! | `{"sleep_ms": N}` | pause |
//! | `{"wait_file": "/abs/path"}` | pause until that file exists (at most 120 s, then exit 9) |
//! | `{"big_line_bytes": N}` | one stdout line of N bytes |
//! | `{"cat_file": "/abs/path"}` | copy that file to stdout as it is (a recorded or generated stream; exit 3 if unreadable) |
//! | `{"write_file": {"path": ".sortie/status", "content": "…"}}` | write a file relative to the cwd |
//! | `{"http_get": {"urls": ["http://127.0.0.1:8080/x", …], "tunnel": false, "report": "net.json"}}` | fetch each URL, through the proxy `http_proxy`/`HTTP_PROXY` names when set (an absolute-URI request, or with `tunnel` a `CONNECT` and then the request inside the tunnel, as HTTPS clients do), directly otherwise (5 s deadlines); write `{url: "<status> <body>" \| "error: …"}` to `report` |
//! | `{"sh": "script"}` | run `sh -c script` in the cwd and wait for it (e.g. `git commit`, as an agent's tool call would); a failure is reported on stderr |
//! | `{"spawn_grandchild": true}` | start a process in the same group that ignores SIGTERM and sleeps forever, holding stdout open |
//! | `{"ignore_sigterm": true}` | ignore SIGTERM from now on |
//! | `{"hang": true}` | sleep forever |
//! | `{"exit": N}` | exit with code N |
//! | `{"kill_self": "TERM" \| "KILL"}` | die by that signal |
//! | `{"fail_percent": N}` | with probability N% (seeded from pid and time), print a failed `result` line and exit 1 |
//! | `{"sleep_random_ms": [MIN, MAX]}` | pause a random time in MIN..=MAX ms |
//! | `{"log_turn": {"path": "…", "phase": "…"}}` | append one JSON line to `path`: `{"phase","pid","cwd","session_id","turn","attempt","started_at"}` (the last three from the supervisor's `.sortie/state.json`; `started_at` tells its sessions apart) |
//! | `{"probe_access": {"read": ["/abs", …], "write": ["/abs", …], "connect": ["127.0.0.1:80", …], "report": "access.json"}}` | try to read each `read` path (a directory is listed), to create each `write` file and to open a TCP connection to each `connect` address (3 s); write `{"read": {path: "ok" \| "error: …"}, "write": {…}, "connect": {…}}` to `report` (relative to the cwd) |
//! | `{"spawn_setsid_grandchild": {"pid_file": "…"}}` | start a process in a new session (so outside the agent's group) that ignores SIGTERM and sleeps forever, with null stdio; its pid is written to `pid_file` (absolute, or relative to the cwd) |
//!
//! After the last step the process exits 0.

use error::FakeError;
use serde_json::{Map, Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Flags that take a value, as sortie passes them to Claude Code.
const VALUE_FLAGS: &[&str] = &[
    "--output-format",
    "--permission-mode",
    "--session-id",
    "--resume",
    "--model",
    "--fallback-model",
    "--max-turns",
    "--max-budget-usd",
    "--effort",
    "--allowedTools",
    "--disallowedTools",
    "--append-system-prompt",
    "--mcp-config",
];
const BARE_FLAGS: &[&str] = &[
    "--verbose",
    "--dangerously-skip-permissions",
    "--no-session-persistence",
];

struct Invocation {
    argv: Vec<String>,
    prompt: String,
    prompt_from_stdin: bool,
    session_id: String,
    resume: bool,
}

#[path = "fake_agent/acp.rs"]
mod acp;
#[path = "fake_agent/codex.rs"]
mod codex;
#[path = "fake_agent/copilot.rs"]
mod copilot;
#[path = "fake_agent/error.rs"]
mod error;
#[path = "fake_agent/opencode.rs"]
mod opencode;

fn main() {
    if std::env::var_os("FAKE_AGENT_GRANDCHILD").is_some() {
        grandchild();
    }
    match mode().as_str() {
        "codex" => codex::run(),
        "copilot" => copilot::run(),
        "opencode" => opencode::run(),
        "gemini" | "kiro-cli" | "acp" => acp::run(),
        _ => claude_main(),
    }
}

/// Which CLI to play: `FAKE_AGENT_KIND`, else the name it was called by (a symlink named
/// `codex`, `copilot`, `opencode`, `gemini`), else Claude Code.
fn mode() -> String {
    if let Some(kind) = std::env::var_os("FAKE_AGENT_KIND") {
        return kind.to_string_lossy().into_owned();
    }
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default()
}

fn claude_main() {
    let inv = match parse_args() {
        Ok(inv) => inv,
        Err(msg) => {
            eprintln!("fake-agent: {msg}");
            std::process::exit(2);
        }
    };
    let turn = next_turn(inv.resume);
    log_invocation(&inv, turn);
    let steps = load_steps_for(turn, Some(&inv.prompt)).unwrap_or_else(|e| {
        eprintln!("fake-agent: scenario: {e}");
        std::process::exit(3);
    });
    let steps = if steps.is_empty() {
        default_steps()
    } else {
        steps
    };
    for step in steps {
        run_step(&step, &inv.session_id);
    }
}

fn parse_args() -> Result<Invocation, FakeError> {
    let argv: Vec<String> = std::env::args().collect();
    let mut prompt = None;
    let mut session_id = None;
    let mut resume = false;
    let mut saw_p = false;
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if a == "-p" || a == "--print" {
            saw_p = true;
            if let Some(next) = argv.get(i + 1).filter(|n| !n.starts_with("--")) {
                prompt = Some(next.clone());
                i += 1;
            }
        } else if VALUE_FLAGS.contains(&a) {
            let v = argv
                .get(i + 1)
                .ok_or_else(|| FakeError::Usage(format!("{a} needs a value")))?;
            match a {
                "--session-id" => session_id = Some(v.clone()),
                "--resume" => {
                    session_id = Some(v.clone());
                    resume = true;
                }
                _ => {}
            }
            i += 1;
        } else if !BARE_FLAGS.contains(&a) {
            return Err(FakeError::Usage(format!("unknown argument {a:?}")));
        }
        i += 1;
    }
    if !saw_p {
        return Err(FakeError::Usage("-p is required".into()));
    }
    let prompt_from_stdin = prompt.is_none();
    let prompt = match prompt {
        Some(p) => p,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| FakeError::Stdin("the prompt from stdin", e))?;
            s
        }
    };
    Ok(Invocation {
        argv,
        prompt,
        prompt_from_stdin,
        session_id: session_id.unwrap_or_else(|| "fake-session".into()),
        resume,
    })
}

fn next_turn(resume: bool) -> u64 {
    let Some(dir) = std::env::var_os("FAKE_AGENT_STATE_DIR") else {
        return if resume { 2 } else { 1 };
    };
    let path = PathBuf::from(dir).join("turns");
    let n = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    let _ = std::fs::write(&path, n.to_string());
    n
}

/// Appends `line` and its newline in one write: several agents started together append to
/// the same log, and a line written apart from its newline could be joined with another's.
fn append_line(path: &Path, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

fn log_invocation(inv: &Invocation, turn: u64) {
    if let Some(p) = std::env::var_os("FAKE_AGENT_ARGV_LOG") {
        let cwd = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rec = json!({
            "argv": inv.argv, "cwd": cwd, "turn": turn, "session_id": inv.session_id,
            "resume": inv.resume, "prompt": inv.prompt, "prompt_from_stdin": inv.prompt_from_stdin,
        });
        append_line(Path::new(&p), &rec.to_string());
    }
    if let Some(p) = std::env::var_os("FAKE_AGENT_ENV_LOG") {
        let env: serde_json::Map<String, Value> = std::env::vars()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        append_line(Path::new(&p), &Value::Object(env).to_string());
    }
}

fn load_steps(turn: u64) -> Result<Vec<Value>, FakeError> {
    load_steps_for(turn, None)
}

/// The steps for this invocation: those without `turn` or with this turn, and, given the
/// prompt, those without `prompt_contains` or whose text the prompt contains.
fn load_steps_for(turn: u64, prompt: Option<&str>) -> Result<Vec<Value>, FakeError> {
    let Some(path) = std::env::var_os("FAKE_AGENT_SCENARIO") else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(&path).map_err(FakeError::Scenario)?;
    let mut steps = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| FakeError::Line(n + 1, e))?;
        if v.get("turn")
            .and_then(Value::as_u64)
            .is_some_and(|t| t != turn)
        {
            continue;
        }
        let wanted = v.get("prompt_contains").and_then(Value::as_str);
        if let (Some(wanted), Some(prompt)) = (wanted, prompt)
            && !prompt.contains(wanted)
        {
            continue;
        }
        steps.push(v);
    }
    Ok(steps)
}

/// The merged `config` lines and the steps of one server process (`session`, counted from 1)
/// of a persistent-server kind: lines without `session` or with this one.
fn load_session(session: u64) -> Result<(Map<String, Value>, Vec<Value>), FakeError> {
    let mut config = Map::new();
    let mut steps = Vec::new();
    let Some(path) = std::env::var_os("FAKE_AGENT_SCENARIO") else {
        return Ok((config, steps));
    };
    let text = std::fs::read_to_string(&path).map_err(FakeError::Scenario)?;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| FakeError::Line(n + 1, e))?;
        if v.get("session")
            .and_then(Value::as_u64)
            .is_some_and(|s| s != session)
        {
            continue;
        }
        match v.get("config").and_then(Value::as_object) {
            Some(c) => config.extend(c.clone()),
            None => steps.push(v),
        }
    }
    Ok((config, steps))
}

fn default_steps() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "Working on it.", "input_tokens": 100, "output_tokens": 20}}),
        json!({"result": {"subtype": "success", "text": "Done.", "input_tokens": 100, "output_tokens": 20}}),
    ]
}

fn substitute(v: &Value, sid: &str) -> Value {
    match v {
        Value::String(s) if s.contains("${ENV}") => Value::String(
            s.replace("${SESSION_ID}", sid)
                .replace("${ENV}", &env_text()),
        ),
        Value::String(s) => Value::String(s.replace("${SESSION_ID}", sid)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, sid)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), substitute(x, sid)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The environment as `env` prints it, sorted.
fn env_text() -> String {
    let mut vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
    vars.sort();
    vars.join("\n")
}

fn out_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe means the supervisor is gone; nothing useful is left to do.
    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
        std::process::exit(141);
    }
}

/// Copies a file to stdout in large writes, so a benchmark measures the reader, not this.
fn cat_file(path: &Path) {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fake-agent: cat_file {}: {e}", path.display());
            std::process::exit(3);
        }
    };
    let mut out = std::io::stdout().lock();
    if std::io::copy(&mut file, &mut out)
        .and_then(|_| out.flush())
        .is_err()
    {
        std::process::exit(141);
    }
}

fn num(v: &Value, k: &str, default: u64) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(default)
}

/// Tries each access the step names and writes what happened to its report file.
fn probe_access(a: &Value) {
    let paths = |k: &str| -> Vec<String> {
        a.get(k)
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let said = |r: std::io::Result<()>| match r {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("error: {e}"),
    };
    let mut read = serde_json::Map::new();
    for p in paths("read") {
        let path = Path::new(&p);
        let r = if path.is_dir() {
            std::fs::read_dir(path).map(|_| ())
        } else {
            std::fs::read(path).map(|_| ())
        };
        read.insert(p, Value::String(said(r)));
    }
    let mut write = serde_json::Map::new();
    for p in paths("write") {
        write.insert(
            p.clone(),
            Value::String(said(std::fs::write(&p, "escaped"))),
        );
    }
    let mut connect = serde_json::Map::new();
    for addr in paths("connect") {
        let r = addr
            .parse::<std::net::SocketAddr>()
            .map_err(std::io::Error::other)
            .and_then(|sa| std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(3)))
            .map(|_| ());
        connect.insert(addr, Value::String(said(r)));
    }
    let report = json!({"read": read, "write": write, "connect": connect}).to_string();
    if let Err(e) = std::fs::write(text(a, "report", "access.json"), report) {
        eprintln!("fake-agent: access report: {e}");
    }
}

/// Fetches each URL of the step and writes what came back to its report file.
fn http_get(a: &Value) {
    let proxy = ["http_proxy", "HTTP_PROXY"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty());
    let tunnel = a.get("tunnel").and_then(Value::as_bool).unwrap_or(false);
    let mut out = serde_json::Map::new();
    for url in a
        .get("urls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(url) = url.as_str() else { continue };
        let said = match fetch(url, proxy.as_deref(), tunnel) {
            Ok(s) => s,
            Err(e) => format!("error: {e}"),
        };
        out.insert(url.to_string(), Value::String(said));
    }
    if let Err(e) = std::fs::write(
        text(a, "report", "net.json"),
        Value::Object(out).to_string(),
    ) {
        eprintln!("fake-agent: http_get report: {e}");
    }
}

/// `"<status> <body>"` of one GET.
fn fetch(url: &str, proxy: Option<&str>, tunnel: bool) -> std::io::Result<String> {
    use std::io::Read;
    use std::net::ToSocketAddrs;
    let bad = |m: &str| std::io::Error::other(m.to_string());
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("not http://"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let dial = |addr: &str| -> std::io::Result<std::net::TcpStream> {
        let sa = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| bad("no address"))?;
        let s = std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(s)
    };
    let mut conn = match proxy {
        Some(p) => dial(p.trim_start_matches("http://").trim_end_matches('/'))?,
        None => dial(authority)?,
    };
    let target = match proxy {
        Some(_) if tunnel => {
            write!(
                conn,
                "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n"
            )?;
            let head = read_head(&mut conn)?;
            if !head.starts_with("HTTP/1.1 200") {
                return Ok(head.lines().next().unwrap_or("").to_string());
            }
            path.to_string()
        }
        Some(_) => url.to_string(),
        None => path.to_string(),
    };
    write!(
        conn,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = Vec::new();
    conn.take(64 << 10).read_to_end(&mut body)?;
    let text = String::from_utf8_lossy(&body);
    let status = text.split(' ').nth(1).unwrap_or("?");
    let content = text.split_once("\r\n\r\n").map_or("", |(_, b)| b.trim());
    Ok(format!("{status} {content}"))
}

/// A response head read byte by byte (at most 8 KiB), so nothing after it is consumed.
fn read_head(conn: &mut std::net::TcpStream) -> std::io::Result<String> {
    use std::io::Read;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if conn.read(&mut b)? == 0 {
            break;
        }
        head.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn text<'a>(v: &'a Value, k: &str, default: &'a str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or(default)
}

/// A stream-json `assistant` line: the step's text, an optional tool call, and usage.
fn assistant_line(a: &Value, sid: &str) -> Value {
    let mut content = vec![json!({"type": "text", "text": text(a, "text", "Working.")})];
    if let Some(tool) = a.get("tool") {
        content.push(json!({"type": "tool_use", "id": text(tool, "id", "toolu_fake_1"),
            "name": text(tool, "name", "Bash"), "input": tool.get("input").cloned().unwrap_or(json!({}))}));
    }
    json!({"type": "assistant", "session_id": sid, "message": {
        "id": text(a, "id", "msg_fake"), "type": "message", "role": "assistant",
        "model": text(a, "model", "fake-model-1"), "content": content,
        "usage": {"input_tokens": num(a, "input_tokens", 100), "output_tokens": num(a, "output_tokens", 20),
                  "cache_read_input_tokens": num(a, "cache_read_tokens", 0),
                  "cache_creation_input_tokens": num(a, "cache_write_tokens", 0)}}})
}

/// A stream-json `result` line; usage and cost only when the step names them.
fn result_line(a: &Value, sid: &str) -> Value {
    let subtype = text(a, "subtype", "success");
    let is_error = a
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(subtype != "success");
    let mut msg = json!({"type": "result", "subtype": subtype, "is_error": is_error,
        "result": text(a, "text", "Done."), "session_id": sid, "duration_ms": 20, "duration_api_ms": 10, "num_turns": 1});
    if a.get("input_tokens").is_some() || a.get("output_tokens").is_some() {
        msg["usage"] = json!({"input_tokens": num(a, "input_tokens", 0), "output_tokens": num(a, "output_tokens", 0)});
    }
    if let Some(usd) = a.get("total_cost_usd") {
        msg["total_cost_usd"] = usd.clone();
    }
    msg
}

/// Waits for `p` to exist; exits 9 after two minutes.
fn wait_file(p: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !p.exists() {
        if std::time::Instant::now() > deadline {
            std::process::exit(9);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_file(w: &Value) {
    let path = Path::new(text(w, "path", ".sortie/status")).to_path_buf();
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Err(e) = std::fs::write(&path, text(w, "content", "")) {
        eprintln!("fake-agent: write {}: {e}", path.display());
    }
}

fn run_sh(script: &str) {
    match std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(std::process::Stdio::null())
        .status()
    {
        Ok(st) if st.success() => {}
        other => eprintln!("fake-agent: sh {script:?}: {other:?}"),
    }
}

/// SIGKILL (`"KILL"`) or SIGTERM to itself, then waits for it.
fn kill_self(sig: &str) {
    let signal = if sig == "KILL" {
        rustix::process::Signal::KILL
    } else {
        rustix::process::Signal::TERM
    };
    let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
    sleep_forever();
}

/// With `pct` % chance, an error result and exit 1.
fn fail_percent(pct: u64, sid: &str) {
    if random_below(100) < pct {
        out_line(&json!({"type": "result", "subtype": "error_during_execution", "is_error": true,
            "result": "random failure", "session_id": sid, "duration_ms": 20, "duration_api_ms": 10, "num_turns": 1}).to_string());
        std::process::exit(1);
    }
}

fn run_step(step: &Value, sid: &str) {
    let step = substitute(step, sid);
    if let Some(a) = step.get("init") {
        let id = text(a, "session_id", sid);
        out_line(&json!({"type": "system", "subtype": "init", "session_id": id, "cwd": cwd(), "tools": ["Bash", "Read", "Edit"]}).to_string());
    } else if let Some(a) = step.get("assistant") {
        out_line(&assistant_line(a, sid).to_string());
    } else if let Some(a) = step.get("result") {
        out_line(&result_line(a, sid).to_string());
    } else if let Some(v) = step.get("emit") {
        out_line(&v.to_string());
    } else if let Some(s) = step.get("raw").and_then(Value::as_str) {
        out_line(s);
    } else if let Some(s) = step.get("stderr").and_then(Value::as_str) {
        eprintln!("{s}");
    } else if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
        std::thread::sleep(Duration::from_millis(ms));
    } else if let Some(p) = step.get("wait_file").and_then(Value::as_str) {
        wait_file(Path::new(p));
    } else if let Some(n) = step.get("big_line_bytes").and_then(Value::as_u64) {
        big_line(n);
    } else if let Some(p) = step.get("cat_file").and_then(Value::as_str) {
        cat_file(Path::new(p));
    } else if let Some(w) = step.get("write_file") {
        write_file(w);
    } else if let Some(script) = step.get("sh").and_then(Value::as_str) {
        run_sh(script);
    } else if step.get("spawn_grandchild").is_some() {
        spawn_grandchild();
    } else if step.get("ignore_sigterm").is_some() {
        ignore_sigterm();
    } else if step.get("hang").is_some() {
        sleep_forever();
    } else if let Some(code) = step.get("exit").and_then(Value::as_i64) {
        std::process::exit(i32::try_from(code).unwrap_or(1));
    } else if let Some(sig) = step.get("kill_self").and_then(Value::as_str) {
        kill_self(sig);
    } else if let Some(pct) = step.get("fail_percent").and_then(Value::as_u64) {
        fail_percent(pct, sid);
    } else if let Some(range) = step.get("sleep_random_ms").and_then(Value::as_array) {
        let lo = range.first().and_then(Value::as_u64).unwrap_or(0);
        let hi = range.get(1).and_then(Value::as_u64).unwrap_or(lo).max(lo);
        std::thread::sleep(Duration::from_millis(lo + random_below(hi - lo + 1)));
    } else if let Some(l) = step.get("log_turn") {
        log_turn(text(l, "path", "turns.log"), text(l, "phase", ""), sid);
    } else if let Some(a) = step.get("spawn_setsid_grandchild") {
        spawn_setsid_grandchild(text(a, "pid_file", "grandchild.pid"));
    } else if let Some(a) = step.get("probe_access") {
        probe_access(a);
    } else if let Some(a) = step.get("http_get") {
        http_get(a);
    } else {
        eprintln!("fake-agent: unknown step {step}");
        std::process::exit(3);
    }
}

/// A number in `0..n` (`n` > 0), seeded from the pid and the time: good enough to make turns
/// fail or sleep at random, different in every process.
fn random_below(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // splitmix64 over pid and time.
    let mut z = nanos ^ (u64::from(std::process::id()) << 32);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z % n.max(1)
}

fn log_turn(path: &str, phase: &str, sid: &str) {
    let state: Value = std::fs::read_to_string(".sortie/state.json")
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let rec = json!({
        "phase": phase, "pid": std::process::id(), "cwd": cwd(), "session_id": sid,
        "turn": state.get("turn_number").cloned().unwrap_or(Value::Null),
        "attempt": state.get("attempt").cloned().unwrap_or(Value::Null),
        "started_at": state.get("started_at").cloned().unwrap_or(Value::Null),
    });
    append_line(Path::new(path), &rec.to_string());
}

fn cwd() -> String {
    std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn big_line(n: u64) {
    let chunk = vec![b'x'; 64 * 1024];
    let mut out = std::io::stdout().lock();
    let mut left = n;
    while left > 0 {
        let take = usize::try_from(left.min(chunk.len() as u64)).unwrap_or(chunk.len());
        if out.write_all(&chunk[..take]).is_err() {
            std::process::exit(141);
        }
        left -= take as u64;
    }
    let _ = out.write_all(b"\n").and_then(|_| out.flush());
}

fn ignore_sigterm() {
    // A handler that only sets a flag replaces the default "terminate" action.
    let flag = Arc::new(AtomicBool::new(false));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGTERM, flag) {
        eprintln!("fake-agent: cannot ignore SIGTERM: {e}");
    }
}

fn spawn_grandchild() {
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("fake-agent: no current exe");
        return;
    };
    match std::process::Command::new(exe)
        .env("FAKE_AGENT_GRANDCHILD", "1")
        .env_remove("FAKE_AGENT_SCENARIO")
        .stdin(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => eprintln!("fake-agent: grandchild pid {}", child.id()),
        Err(e) => eprintln!("fake-agent: spawn grandchild: {e}"),
    }
}

fn spawn_setsid_grandchild(pid_file: &str) {
    use std::os::unix::process::CommandExt;
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("fake-agent: no current exe");
        return;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.env("FAKE_AGENT_GRANDCHILD", "1")
        .env_remove("FAKE_AGENT_SCENARIO")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| rustix::process::setsid().map(|_| ()).map_err(Into::into));
    }
    match cmd.spawn() {
        Ok(child) => {
            if let Err(e) = std::fs::write(pid_file, child.id().to_string()) {
                eprintln!("fake-agent: write {pid_file}: {e}");
            }
        }
        Err(e) => eprintln!("fake-agent: spawn setsid grandchild: {e}"),
    }
}

fn grandchild() -> ! {
    ignore_sigterm();
    sleep_forever()
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
