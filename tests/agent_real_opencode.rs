//! The real OpenCode CLI (the pinned `opencode-ai` package) as far as it goes offline. Without
//! network it never prints a JSON line and never exits, so sortie's startup deadline must stop
//! it, say why, leave no process behind and not retry faster than the backoff. Its argument
//! parser must accept every flag sortie passes. HOME, XDG and TMPDIR point into a temp dir, so
//! the CLI writes nothing outside it.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::processes_in;
use common::real_cli::real_cli;
use common::{Setup, holds_within, wait_for};
use serde_json::{Map, Value, json};
use sortie::agent::opencode::argv::{export_args, run_args};

/// The isolated home of one test: HOME, XDG dirs and TMPDIR inside `root`.
fn isolated_env(root: &Path) -> Vec<(String, String)> {
    let home = root.join("home");
    let vars = [
        ("HOME", home.clone()),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CACHE_HOME", home.join(".cache")),
        ("XDG_STATE_HOME", home.join(".local/state")),
        ("TMPDIR", home.join("tmp")),
    ];
    for (_, dir) in &vars {
        std::fs::create_dir_all(dir).unwrap();
    }
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.display().to_string()))
        .collect()
}

struct Ran {
    code: Option<i32>,
    stderr: String,
}

/// Runs the CLI in its own process group, killing the group if it outlives `limit`.
fn run_cli(
    cli: &Path,
    args: &[String],
    cwd: &Path,
    env: &[(String, String)],
    limit: Duration,
) -> Ran {
    let mut cmd = Command::new(cli);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let pgid = child.id() as i32;
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut { stderr }, &mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The group goes either way, so nothing the CLI started survives the test.
    let _ = rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pgid).unwrap(),
        rustix::process::Signal::KILL,
    );
    let _ = child.wait();
    Ran {
        code,
        stderr: reader.join().unwrap_or_default(),
    }
}

fn rejected_a_flag(stderr: &str) -> bool {
    let s = stderr.to_lowercase();
    s.contains("unknown argument")
        || s.contains("unknown option")
        || s.contains("run opencode with a message")
}

#[test]
fn the_real_parser_accepts_every_flag_sortie_passes() {
    let Some(cli) = real_cli("opencode") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let env = isolated_env(tmp.path());
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let block: Map<String, Value> = json!({
        "model": "anthropic/claude-sonnet-4-6", "agent": "build", "variant": "high",
        "thinking": true, "pure": true, "dangerously_skip_permissions": true
    })
    .as_object()
    .cloned()
    .unwrap();
    // A session that does not exist makes the CLI stop right after parsing its arguments.
    let args = run_args(&ws, Some("ses_sortie_missing"), &block, Some("--say hello"));
    let ran = run_cli(&cli, &args, &ws, &env, Duration::from_secs(120));
    assert!(
        !rejected_a_flag(&ran.stderr),
        "{args:?} rejected:\n{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("Session not found"),
        "{:?}\n{}",
        ran.code,
        ran.stderr
    );
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);

    let args = export_args("ses_sortie_missing");
    let ran = run_cli(&cli, &args, &ws, &env, Duration::from_secs(120));
    assert!(
        !rejected_a_flag(&ran.stderr),
        "{args:?} rejected:\n{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("Session not found: ses_sortie_missing"),
        "{}",
        ran.stderr
    );
}

fn run_rows(db: &Path) -> Vec<(String, String)> {
    if !db.exists() {
        return Vec::new();
    }
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return Vec::new();
    };
    let Ok(mut st) =
        conn.prepare("SELECT status, COALESCE(error, '') FROM run_history ORDER BY id")
    else {
        return Vec::new();
    };
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

#[test]
fn offline_the_startup_deadline_stops_the_real_cli_and_says_why() {
    let Some(cli) = real_cli("opencode") else {
        return;
    };
    let issues = json!([{"id": "1", "identifier": "R-1", "title": "Real CLI", "state": "To Do", "priority": 1}]);
    let setup = Setup::new("", &issues.to_string());
    let root: PathBuf = setup.path().to_path_buf();
    let env = isolated_env(&root);
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}/ws
agent:
  kind: opencode
  command: {cli}
  max_turns: 1
  read_timeout_ms: 3000
  stall_timeout_ms: 0
opencode:
  model: anthropic/claude-sonnet-4-6
---
Say hello.
"#,
        root = root.display(),
        cli = cli.display(),
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let _d = setup.start(&env_refs);
    let db = root.join(".sortie.db");
    let (status, error) = wait_for("the first run to end", Duration::from_secs(120), || {
        run_rows(&db).into_iter().find(|(s, _)| s != "running")
    });
    assert_ne!(status, "succeeded", "{error}");
    // Offline, the real CLI usually prints nothing (the startup deadline stops it), and
    // sometimes reports its own failed server call first: either way the run fails and says
    // why, and no process is left behind.
    if error.contains("response_timeout") {
        assert!(error.contains("printed no JSON within 3000 ms"), "{error}");
        assert!(error.contains("no network"), "{error}");
    } else {
        assert!(error.starts_with("turn_failed: "), "{error}");
        assert!(error.len() > "turn_failed: ".len(), "{error}");
    }
    let ws = root.join("ws");
    wait_for("no CLI process left", Duration::from_secs(30), || {
        processes_in(&ws).is_empty().then_some(())
    });
    // The failure waits out the retry backoff (10 s for the first retry): no second run soon.
    assert!(
        !holds_within(Duration::from_secs(4), || run_rows(&db).len() > 1),
        "{:?}",
        run_rows(&db)
    );
}

#[test]
fn offline_the_failure_breaker_holds_the_issue_instead_of_retrying_forever() {
    let Some(cli) = real_cli("opencode") else {
        return;
    };
    let issues = json!([{"id": "1", "identifier": "R-1", "title": "Real CLI", "state": "To Do", "priority": 1}]);
    let setup = Setup::new("", &issues.to_string());
    let root: PathBuf = setup.path().to_path_buf();
    let env = isolated_env(&root);
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do]
  terminal_states: [Done]
file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}/ws
agent:
  kind: opencode
  command: {cli}
  max_turns: 1
  read_timeout_ms: 3000
  stall_timeout_ms: 0
  max_retry_backoff_ms: 100
  max_same_failures: 2
opencode:
  model: anthropic/claude-sonnet-4-6
---
Say hello.
"#,
        root = root.display(),
        cli = cli.display(),
    );
    std::fs::write(root.join("WORKFLOW.md"), wf).unwrap();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let d = setup.start(&env_refs);
    let item = |s: &Value| {
        s["attention"].as_array().and_then(|a| {
            a.iter()
                .find(|i| i["kind"] == "failure_held" && i["issue_identifier"] == "R-1")
                .cloned()
        })
    };
    let s = d.wait_state("the failure hold", Duration::from_secs(120), |s| {
        item(s).is_some()
    });
    let item = item(&s).unwrap_or_default();
    // Offline the CLI prints nothing (two startup deadlines in a row), or reports a failed
    // call whose words are recognised (held at the first run).
    let runs = item["evidence"]["runs"].as_u64().unwrap_or_default() as usize;
    assert!(runs == 1 || runs == 2, "{item}");
    if runs == 2 {
        assert!(
            ["response_timeout", "turn_failed"]
                .contains(&item["evidence"]["cause"].as_str().unwrap_or_default()),
            "{item}"
        );
    }
    assert!(
        s["held"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["hold"]["reason"] == "failure_held")),
        "{s}"
    );
    // Counted from the runs recorded when the hold shows: under load the first run can time
    // out before the CLI reports its failed call, a run of another cause than the evidence's.
    let db = root.join(".sortie.db");
    let recorded = run_rows(&db).len();
    assert!(recorded >= runs, "{:?}", run_rows(&db));
    assert!(
        !holds_within(Duration::from_secs(3), || run_rows(&db).len() > recorded),
        "held, not retried: {:?}",
        run_rows(&db)
    );
}
