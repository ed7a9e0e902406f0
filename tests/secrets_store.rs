//! Issue 34, "mask before storing", through the real binary: an agent that prints its
//! environment and an issue title that holds a token leave no secret in the database file, its
//! WAL, the log, any `/api/v1/*` answer or `/metrics`; the database, WAL, shared-memory and
//! lock files are 0600 and the directory sortie creates for them 0700; a database an older
//! build wrote in clear is scrubbed at start (and its files tightened), so a restart without
//! the secret cannot serve it; `sortie scrub` masks what a daemon did not know.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Daemon, Project, set_server_port};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// The agent kind's key variable (the fake agent plays claude-code): the agent has it.
const AGENT_KEY: (&str, &str) = ("ANTHROPIC_API_KEY", "sk-ant-kindkey-7f3a9c41");
/// A webhook secret.
const HOOK_SECRET: (&str, &str) = ("SORTIE_WEBHOOK_SECRET_GITHUB", "whsec-github-5b1e7d22");
/// An unrelated secret-looking variable of the daemon's environment.
const DB_PASSWORD: (&str, &str) = ("BUILD_DB_PASSWORD", "db-password-c4d2e8aa");
/// The tracker token, referenced by WORKFLOW.md as `$SORTIE_TEST_TRACKER_TOKEN`.
const TRACKER_TOKEN: (&str, &str) = ("SORTIE_TEST_TRACKER_TOKEN", "trk-token-0a9b8c7d");
/// A secret only the `.env` file holds.
const DOTENV_SECRET: (&str, &str) = ("SORTIE_WEBHOOK_SECRET_GITLAB", "dotenv-secret-9e8d7c6b");

const ENV_SECRETS: [(&str, &str); 4] = [AGENT_KEY, HOOK_SECRET, DB_PASSWORD, TRACKER_TOKEN];

fn all_secrets() -> Vec<&'static str> {
    ENV_SECRETS
        .iter()
        .chain([&DOTENV_SECRET])
        .map(|(_, v)| *v)
        .collect()
}

/// The database's path in these projects: in a directory sortie creates.
fn db(p: &Project) -> PathBuf {
    p.path("state/sortie.db")
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

/// `grep -c`: how many lines of the file hold `needle` (0 for a missing file).
fn grep_count(path: &Path, needle: &str) -> usize {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| line.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .count()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A project over the file tracker and the fake agent whose database lives in `state/`.
fn project(issues: Value) -> Project {
    let p = Project::new();
    p.issues(issues);
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  api_key: $SORTIE_TEST_TRACKER_TOKEN",
        "  max_retry_backoff_ms: 600000\n",
        "db_path: ./state/sortie.db",
    );
    p.write(
        "sortie.env",
        &format!("{}={}\n", DOTENV_SECRET.0, DOTENV_SECRET.1),
    );
    p
}

/// Starts the daemon with the secrets in its environment (`secrets`) and the `.env` file.
fn start(p: &Project, secrets: &[(&str, &str)]) -> Daemon {
    std::fs::create_dir_all(p.path("markers")).expect("markers dir");
    let secrets: Vec<(String, String)> = secrets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    common::spawn(&p.path("sortie.log"), Some(p.port()), |port| {
        set_server_port(&p.workflow(), port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.dir.path())
            .args(["--env-file", "sortie.env"])
            .arg(p.workflow())
            .env("FAKE_AGENT_SCENARIO", ".scenario")
            .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
            .env("SORTIE_TEST_MARKERS", p.path("markers"))
            .env_remove("RUST_LOG");
        for (k, v) in &secrets {
            cmd.env(k, v);
        }
        cmd
    })
}

/// The first column of the first row of `sql`, as text ("" when there is none).
fn query_string(path: &Path, sql: &str) -> String {
    if !path.exists() {
        return String::new();
    }
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open db");
    conn.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
        .map(|v| match v {
            rusqlite::types::Value::Text(t) => t,
            rusqlite::types::Value::Integer(i) => i.to_string(),
            _ => String::new(),
        })
        .unwrap_or_default()
}

/// Every dispatch id on record.
fn dispatch_ids(path: &Path) -> Vec<String> {
    if !path.exists() {
        return Vec::new();
    }
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open db");
    let mut st = conn
        .prepare("SELECT dispatch_id FROM run_history WHERE dispatch_id IS NOT NULL ORDER BY id")
        .expect("prepare");
    st.query_map([], |r| r.get::<_, String>(0))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
}

/// Every answer of the API the runs are visible in, by path.
fn api_answers(d: &Daemon, identifiers: &[&str], dispatches: &[String]) -> Vec<(String, String)> {
    let mut paths: Vec<String> = [
        "/api/v1/state",
        "/api/v1/runs",
        "/api/v1/runs/issues",
        "/api/v1/stats",
        "/metrics",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    paths.extend(identifiers.iter().map(|i| format!("/api/v1/{i}")));
    paths.extend(
        dispatches
            .iter()
            .map(|d| format!("/api/v1/runs/{d}/events")),
    );
    let mut out: Vec<(String, String)> = paths
        .into_iter()
        .map(|path| {
            let r = d.get(&path);
            assert_eq!(r.status, 200, "{path}: {}", r.body);
            (path, r.body)
        })
        .collect();
    // The event stream's first frame: the state snapshot.
    let mut s = common::open_stream(d.port, "/api/v1/events", &[]);
    let first = s
        .next_frame(Duration::from_secs(10))
        .expect("a first frame");
    out.push(("/api/v1/events".into(), first.data.to_string()));
    out
}

fn assert_no_secret(what: &str, text: &str) {
    for s in all_secrets() {
        assert!(!text.contains(s), "{s} in {what}:\n{text}");
    }
}

fn assert_files_clean(paths: &[PathBuf]) {
    for path in paths {
        for s in all_secrets() {
            assert_eq!(grep_count(path, s), 0, "{s} in {}", path.display());
        }
    }
}

#[test]
fn an_agent_printing_its_environment_and_a_token_in_a_title_leave_no_secret_on_disk_or_in_answers()
{
    let title = format!(
        "Rotate the token {} and {}",
        TRACKER_TOKEN.1, DOTENV_SECRET.1
    );
    let p = project(json!([
        {"id": "1", "identifier": "S-1", "title": title, "state": "To Do"},
        {"id": "2", "identifier": "S-2", "title": title, "state": "To Do"}
    ]));
    // S-1 prints the environment in a message, a tool call and its result, and succeeds.
    p.scenario(
        "S-1",
        &[
            json!({"init": {}}),
            json!({"stderr": "${ENV}"}),
            json!({"assistant": {"text": "My environment:\n${ENV}",
                "tool": {"name": "Bash", "input": {"command": "env", "output": "${ENV}"}}}}),
            json!({"write_file": {"path": ".sortie/status", "content": "no-change-needed\nEnvironment:\n${ENV}"}}),
            json!({"result": {"subtype": "success", "text": "Printed:\n${ENV}"}}),
        ],
    );
    // S-2 prints it and fails: its retry entry keeps the error and the title.
    p.scenario(
        "S-2",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "${ENV}"}}),
            json!({"result": {"subtype": "error_during_execution", "is_error": true, "text": "failed with ${ENV}"}}),
            json!({"exit": 1}),
        ],
    );
    let d = start(&p, &ENV_SECRETS);
    let db = db(&p);
    d.wait_until("both runs recorded and a retry stored", WAIT, || {
        dispatch_ids(&db).len() >= 2
            && query_string(&db, "SELECT COUNT(*) FROM retry_entries") == "1"
    });
    let dispatches = dispatch_ids(&db);

    let answers = api_answers(&d, &["S-1", "S-2"], &dispatches);
    for (path, body) in &answers {
        assert_no_secret(path, body);
    }
    // The secrets were there and were masked, not lost.
    for (path, body) in answers.iter().filter(|(path, _)| path.ends_with("/events")) {
        if path.starts_with("/api/v1/runs/") {
            assert!(body.contains("[redacted]"), "{path}: {body}");
        }
    }
    let runs = &answers[1].1;
    assert!(
        runs.contains("Rotate the token [redacted] and [redacted]"),
        "{runs}"
    );

    // The files, while the daemon runs (recent writes are in the WAL) and after it stops.
    let files = [db.clone(), with_suffix(&db, "-wal"), p.path("sortie.log")];
    assert_files_clean(&files);
    for (suffix, want) in [
        ("", 0o600),
        ("-wal", 0o600),
        ("-shm", 0o600),
        (".lock", 0o600),
    ] {
        assert_eq!(mode(&with_suffix(&db, suffix)), want, "mode of {suffix:?}");
    }
    assert_eq!(
        mode(&p.path("state")),
        0o700,
        "the directory sortie created"
    );
    let stored = query_string(
        &db,
        "SELECT issue_title FROM run_history ORDER BY id LIMIT 1",
    );
    assert_eq!(stored, "Rotate the token [redacted] and [redacted]");
    let mut d = d;
    assert_eq!(d.terminate(), Some(0));
    assert_files_clean(&files);
}

/// Writes a database as builds before schema 10 did: their schema, their rows in clear, a WAL
/// left behind by a killed process, files readable by everyone.
fn write_legacy_database(path: &Path, secret: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.execute_batch(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);",
    )
    .expect("migrations table");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("sql dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".sql") && n[..3].parse::<i64>().is_ok_and(|v| v <= 9)
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 9);
    for (i, f) in files.iter().enumerate() {
        conn.execute_batch(&std::fs::read_to_string(f).expect("sql"))
            .expect("migration");
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?1, '2026-01-01T00:00:00.000Z')",
            [i as i64 + 1],
        )
        .expect("version");
    }
    let title = format!("Leaked {secret} in a title");
    conn.execute(
        "INSERT INTO run_history (issue_id, identifier, attempt, agent_adapter, workspace,
             started_at, completed_at, status, error, issue_title, dispatch_id)
         VALUES ('1', 'L-1', 1, 'claude-code', '/ws/L-1', '2026-01-01T00:00:00.000Z',
             '2026-01-01T00:01:00.000Z', 'succeeded', NULL, ?1, 'legacy-dispatch')",
        [&title],
    )
    .expect("run");
    let payload = json!({"message": format!("ANTHROPIC_API_KEY={secret}\nPATH=/usr/bin")});
    conn.execute(
        "INSERT INTO agent_events VALUES ('legacy-dispatch', 1, 1767225600000, 'notification', ?1)",
        [payload.to_string()],
    )
    .expect("event");
    conn.execute(
        "INSERT INTO agent_event_runs VALUES ('legacy-dispatch', 1, 1767225660000, 1, 1, 1, 100)",
        [],
    )
    .expect("event run");
    // A row deleted in clear leaves its text in free space.
    conn.execute(
        "INSERT INTO retry_entries (issue_id, identifier, attempt, due_at_ms, error)
         VALUES ('9', 'L-9', 1, 0, ?1)",
        [format!("failed: {secret}")],
    )
    .expect("retry");
    conn.execute("DELETE FROM retry_entries", [])
        .expect("delete");
    // Killed, not closed: the WAL stays with its frames.
    std::mem::forget(conn);
    // The lock file the old daemon left.
    std::fs::write(with_suffix(path, ".lock"), "4242\n").expect("lock file");
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let f = with_suffix(path, suffix);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
}

#[test]
fn a_database_an_older_build_wrote_in_clear_is_scrubbed_at_start_and_stays_clean_after_a_restart() {
    let secret = AGENT_KEY.1;
    let p = project(json!([
        {"id": "1", "identifier": "L-1", "title": "Old", "state": "Done"}
    ]));
    let db = db(&p);
    write_legacy_database(&db, secret);
    assert!(
        grep_count(&with_suffix(&db, "-wal"), secret) > 0,
        "the test writes the secret"
    );

    let mut d = start(&p, &[AGENT_KEY]);
    d.wait_until("the scrub at start", WAIT, || {
        p.log().contains("database scrub finished")
    });
    let log = p.log();
    assert!(log.contains("database file permissions tightened"), "{log}");
    for suffix in ["", "-wal", "-shm", ".lock"] {
        assert_eq!(mode(&with_suffix(&db, suffix)), 0o600, "mode of {suffix:?}");
    }
    for suffix in ["", "-wal", "-shm"] {
        assert_eq!(
            grep_count(&with_suffix(&db, suffix), secret),
            0,
            "{suffix:?}"
        );
    }
    assert_eq!(d.terminate(), Some(0));

    // Restarted without the secret: nothing can mask it any more, and nothing serves it.
    let d = start(&p, &[]);
    let events = d.get("/api/v1/runs/legacy-dispatch/events");
    assert_eq!(events.status, 200, "{}", events.body);
    assert!(!events.body.contains(secret), "{}", events.body);
    assert!(
        events.body.contains("ANTHROPIC_API_KEY=[redacted]"),
        "{}",
        events.body
    );
    let runs = d.get("/api/v1/runs").body;
    assert!(!runs.contains(secret), "{runs}");
    assert!(runs.contains("Leaked [redacted] in a title"), "{runs}");
    let log = p.log();
    assert_eq!(
        log.matches("database scrub started").count(),
        1,
        "the scrub runs once per database:\n{log}"
    );
    for suffix in ["", "-wal", "-shm"] {
        assert_eq!(
            grep_count(&with_suffix(&db, suffix), secret),
            0,
            "{suffix:?}"
        );
    }
}

#[test]
fn sortie_scrub_masks_what_the_daemon_did_not_know_and_refuses_beside_a_daemon() {
    let late = ("LATE_ADDED_TOKEN", "late-token-3c2b1a09");
    let p = project(json!([]));
    let db = db(&p);
    // A first life creates the database; then a value no process knew is stored in clear.
    let d = start(&p, &[]);
    d.wait_until("the scrub at start", WAIT, || {
        p.log().contains("database scrub finished")
    });
    let refused = Command::new(common::SORTIE)
        .current_dir(p.dir.path())
        .args(["scrub", "--env-file", "sortie.env"])
        .arg(p.workflow())
        .output()
        .expect("run sortie scrub");
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("stop the daemon first"), "{err}");
    assert_eq!(d.stop(), Some(0));
    {
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.execute(
            "INSERT INTO attention_acks (item_id, kind, acknowledged_at_ms) VALUES (?1, 'k', 0)",
            [format!("item {}", late.1)],
        )
        .expect("insert");
    }
    assert!(grep_count(&db, late.1) > 0);

    let out = Command::new(common::SORTIE)
        .current_dir(p.dir.path())
        .args(["scrub", "--env-file", "sortie.env"])
        .arg(p.workflow())
        .env(late.0, late.1)
        .output()
        .expect("run sortie scrub");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 rows rewritten"), "{stdout}");
    assert!(stdout.contains("WAL emptied"), "{stdout}");
    for suffix in ["", "-wal"] {
        assert_eq!(
            grep_count(&with_suffix(&db, suffix), late.1),
            0,
            "{suffix:?}"
        );
    }
    let stored = query_string(&db, "SELECT item_id FROM attention_acks");
    assert_eq!(stored, "item [redacted]");
}
