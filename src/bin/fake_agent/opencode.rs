//! The `opencode` mode of `fake-agent` (`FAKE_AGENT_KIND=opencode`, or a symlink named
//! `opencode`): a scripted stand-in for `opencode run --format json` and `opencode export`.
//!
//! Calls it understands, each with exactly the flags sortie passes (any other exits 2):
//!
//! - `opencode --version` prints a version line.
//! - `opencode run --format json --dir <ws> [--session <id>] [--model p/m] [--agent a]
//!   [--variant v] [--thinking] [--pure] [--dangerously-skip-permissions] [-- <prompt…>]` plays a
//!   scenario; without `-- <prompt>` the prompt is read from stdin. The session id is the `--session` value, else `FAKE_AGENT_SESSION_ID`, else
//!   `ses_fake`; `${SESSION_ID}` inside any step string becomes it.
//! - `opencode export --sanitize <id>` prints `FAKE_AGENT_EXPORT` (a file, with `${SESSION_ID}`
//!   replaced), or else an export whose last assistant message carries the default script's
//!   tokens. `FAKE_AGENT_EXPORT_EXIT=<n>` makes it exit `n` without output instead.
//!
//! Both log like the Claude mode: `FAKE_AGENT_ARGV_LOG` gets one JSON line per call
//! (`{"command":"run"|"export","argv":[…],"cwd":"…","turn":N,"session_id":"…","resume":bool,
//! "prompt":"…"}`; `turn` is 0 for an export), `FAKE_AGENT_ENV_LOG` the whole environment.
//! `FAKE_AGENT_STATE_DIR` and `FAKE_AGENT_SCENARIO` work as in the Claude mode (turn-scoped
//! steps, the turn counted per `run`). Besides every step of the Claude mode (`emit`, `raw`,
//! `stderr`, `sleep_ms`, `cat_file`, `hang`, `spawn_grandchild`, `ignore_sigterm`,
//! `big_line_bytes`, `exit`, …) these steps print opencode's envelope lines:
//!
//! | step | line |
//! |---|---|
//! | `{"step_start": {}}` | `step_start` |
//! | `{"text": "…"}` | `text` with that text |
//! | `{"tool": {"name": "bash", "input": {…}, "status": "completed"\|"error", "error": "…", "duration_ms": N}}` | `tool_use` |
//! | `{"step_finish": {"reason": "stop", "input": N, "output": N, "reasoning": N, "cache_read": N, "cache_write": N, "provider": "p", "model": "m"}}` | `step_finish` with tokens (provider/model only when given) |
//! | `{"error": {"name": "ProviderAuthError", "message": "…"}}` | `error` |
//!
//! Without scenario steps for the turn the default script runs: `step_start`, a `text`, a
//! `step_finish` with 100 input and 20 output tokens, exit 0.

use crate::error::FakeError;
use serde_json::{Value, json};
use std::path::Path;

const RUN_VALUE_FLAGS: &[&str] = &[
    "--format",
    "--dir",
    "--session",
    "--model",
    "--agent",
    "--variant",
];
const RUN_BARE_FLAGS: &[&str] = &["--thinking", "--pure", "--dangerously-skip-permissions"];

struct Run {
    session: Option<String>,
    dir: Option<String>,
    prompt: String,
}

/// Plays this mode's scenario.
pub fn run() {
    let argv: Vec<String> = std::env::args().collect();
    match argv.get(1).map(String::as_str) {
        Some("--version") | Some("-v") => println!("1.18.33-fake"),
        Some("run") => match parse_run(&argv[2..]) {
            Ok(r) => play(&argv, r),
            Err(m) => fail(&m.to_string()),
        },
        Some("export") => export(&argv),
        other => fail(&format!("unknown command {other:?}")),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("fake-agent (opencode): {message}");
    std::process::exit(2);
}

fn parse_run(args: &[String]) -> Result<Run, FakeError> {
    let mut run = Run {
        session: None,
        dir: None,
        prompt: String::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            run.prompt = args[i + 1..].join(" ");
            break;
        } else if RUN_VALUE_FLAGS.contains(&a) {
            let v = args
                .get(i + 1)
                .ok_or_else(|| FakeError::Usage(format!("{a} needs a value")))?;
            match a {
                "--format" if v != "json" => {
                    return Err(FakeError::Usage(format!("--format {v} is not json")));
                }
                "--session" => run.session = Some(v.clone()),
                "--dir" => run.dir = Some(v.clone()),
                _ => {}
            }
            i += 1;
        } else if !RUN_BARE_FLAGS.contains(&a) {
            return Err(FakeError::Usage(format!("unknown argument {a:?}")));
        }
        i += 1;
    }
    if run.prompt.is_empty() {
        // OpenCode reads stdin too when it is not a terminal, and appends it to the message.
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut run.prompt)
            .map_err(|e| FakeError::Stdin("stdin", e))?;
    }
    if run.prompt.trim().is_empty() {
        return Err(FakeError::Usage(
            "You must provide a message or a command".into(),
        ));
    }
    Ok(run)
}

fn default_session() -> String {
    std::env::var("FAKE_AGENT_SESSION_ID").unwrap_or_else(|_| "ses_fake".into())
}

fn play(argv: &[String], run: Run) {
    if let Some(dir) = &run.dir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        fail(&format!("Failed to change directory to {dir}: {e}"));
    }
    let resume = run.session.is_some();
    let sid = run.session.clone().unwrap_or_else(default_session);
    let turn = super::next_turn(resume);
    log_call("run", argv, turn, &sid, resume, &run.prompt);
    let steps = super::load_steps(turn).unwrap_or_else(|e| {
        eprintln!("fake-agent: scenario: {e}");
        std::process::exit(3);
    });
    let steps = if steps.is_empty() {
        default_steps()
    } else {
        steps
    };
    for step in steps {
        let step = super::substitute(&step, &sid);
        if !opencode_step(&step, &sid) {
            super::run_step(&step, &sid);
        }
    }
}

fn default_steps() -> Vec<Value> {
    vec![
        json!({"step_start": {}}),
        json!({"text": "Working on it."}),
        json!({"step_finish": {"reason": "stop", "input": 100, "output": 20}}),
    ]
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(0))
        .unwrap_or(0)
}

fn envelope(ty: &str, sid: &str, part: Value) -> String {
    json!({"type": ty, "timestamp": now_ms(), "sessionID": sid, "part": part}).to_string()
}

/// Prints one of this mode's own steps; false when the step is a shared one.
fn opencode_step(step: &Value, sid: &str) -> bool {
    let part =
        |ty: &str| json!({"id": "prt_fake", "messageID": "msg_fake", "sessionID": sid, "type": ty});
    if step.get("step_start").is_some() {
        super::out_line(&envelope("step_start", sid, part("step-start")));
    } else if let Some(t) = step.get("text").and_then(Value::as_str) {
        let mut p = part("text");
        p["text"] = json!(t);
        super::out_line(&envelope("text", sid, p));
    } else if let Some(t) = step.get("tool") {
        super::out_line(&envelope("tool_use", sid, tool_part(t, sid)));
    } else if let Some(f) = step.get("step_finish") {
        let n = |k: &str| super::num(f, k, 0);
        let tokens = json!({
            "input": n("input"), "output": n("output"), "reasoning": n("reasoning"),
            "cache": {"read": n("cache_read"), "write": n("cache_write")},
            "total": n("input") + n("output") + n("reasoning") + n("cache_read") + n("cache_write"),
        });
        let mut p = part("step-finish");
        p["reason"] = json!(super::text(f, "reason", "stop"));
        p["tokens"] = tokens;
        p["cost"] = json!(0);
        if let (Some(pr), Some(m)) = (f.get("provider"), f.get("model")) {
            p["providerID"] = pr.clone();
            p["modelID"] = m.clone();
        }
        super::out_line(&envelope("step_finish", sid, p));
    } else if let Some(e) = step.get("error") {
        let line = json!({"type": "error", "timestamp": now_ms(), "sessionID": sid,
            "error": {"name": super::text(e, "name", "UnknownError"),
                      "data": {"message": super::text(e, "message", "something failed")}}});
        super::out_line(&line.to_string());
    } else {
        return false;
    }
    true
}

fn tool_part(t: &Value, sid: &str) -> Value {
    let end = now_ms();
    let start = end - i64::try_from(super::num(t, "duration_ms", 5)).unwrap_or(5);
    let status = super::text(t, "status", "completed");
    let mut state = json!({"status": status, "input": t.get("input").cloned().unwrap_or(json!({})),
        "time": {"start": start, "end": end}});
    if status == "error" {
        state["error"] = json!(super::text(t, "error", "tool failed"));
    } else {
        state["output"] = json!(super::text(t, "output", "ok"));
    }
    json!({"id": "prt_tool", "messageID": "msg_fake", "sessionID": sid, "type": "tool",
        "tool": super::text(t, "name", "bash"), "callID": super::text(t, "call_id", "call_fake"),
        "state": state})
}

fn export(argv: &[String]) {
    let args = &argv[2..];
    let (sanitize, ids): (Vec<&String>, Vec<&String>) =
        args.iter().partition(|a| a.as_str() == "--sanitize");
    if sanitize.is_empty() {
        fail("export without --sanitize");
    }
    let [sid] = ids.as_slice() else {
        fail(&format!("export wants one session id, got {ids:?}"));
    };
    if let Some(bad) = ids.iter().find(|a| a.starts_with('-')) {
        fail(&format!("unknown argument {bad:?}"));
    }
    log_call("export", argv, 0, sid, true, "");
    if let Some(code) = std::env::var("FAKE_AGENT_EXPORT_EXIT")
        .ok()
        .and_then(|c| c.parse::<i32>().ok())
    {
        std::process::exit(code);
    }
    let text = match std::env::var_os("FAKE_AGENT_EXPORT") {
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(t) => t.replace("${SESSION_ID}", sid),
            Err(e) => {
                eprintln!("fake-agent: export {}: {e}", Path::new(&path).display());
                std::process::exit(3);
            }
        },
        None => json!({"info": {"id": sid}, "messages": [
            {"info": {"role": "user", "sessionID": sid}},
            {"info": {"role": "assistant", "sessionID": sid, "providerID": "fake", "modelID": "fake-model-1",
                      "tokens": {"input": 100, "output": 20, "total": 120, "cache": {"read": 0, "write": 0}},
                      "cost": 0}}
        ]})
        .to_string(),
    };
    print!("{text}");
}

fn log_call(command: &str, argv: &[String], turn: u64, sid: &str, resume: bool, prompt: &str) {
    if let Some(p) = std::env::var_os("FAKE_AGENT_ARGV_LOG") {
        let rec = json!({
            "command": command, "argv": argv, "cwd": super::cwd(), "turn": turn,
            "session_id": sid, "resume": resume, "prompt": prompt,
        });
        super::append_line(Path::new(&p), &rec.to_string());
    }
    if let Some(p) = std::env::var_os("FAKE_AGENT_ENV_LOG") {
        let env: serde_json::Map<String, Value> = std::env::vars()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        super::append_line(Path::new(&p), &Value::Object(env).to_string());
    }
}
