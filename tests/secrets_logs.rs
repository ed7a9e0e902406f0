//! Issue 12, secrets and logs, through the real binary: what a hook inherits, masking of
//! secret-looking variables WORKFLOW.md does not reference, log values that hold quotes and
//! newlines, `issue_id` on every per-issue line, and identifiers written to forge log records.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

/// A value only the process environment holds, under a secret-looking name.
const UNREFERENCED: &str = "unref-key-value-9876";
/// What the failing hook prints.
const QUOTED: &str = "a \"quoted\" line\nsecond line";

/// A project whose `before_run` hook is `script`; `issues` are the backlog.
fn project(script: &str, issues: Value) -> Project {
    let p = Project::new();
    p.issues(issues);
    p.scenario("default", &[json!({"init": {}})]);
    p.fake_agent_workflow("", "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace(
            "  before_remove:",
            &format!("  before_run: {script}\n  before_remove:"),
        ),
    );
    std::fs::create_dir_all(p.path("markers")).unwrap();
    p
}

/// Runs the daemon (`--port 0`, `format`) until `done` holds for its log, then kills it.
fn run_until(p: &Project, format: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let log = std::fs::File::create(p.path("sortie.log")).unwrap();
    let mut child = common::sortie_command()
        .current_dir(p.dir.path())
        .args(["--log-format", format, "--port", "0"])
        .arg(p.workflow())
        .env("UNREFERENCED_API_KEY", UNREFERENCED)
        .env("SORTIE_EXTRA_SETTING", "sortie-extra-visible")
        .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
        .env("SORTIE_TEST_MARKERS", p.path("markers"))
        .env_remove("RUST_LOG")
        .stderr(log)
        .spawn()
        .unwrap();
    let text = wait_for(what, Duration::from_secs(30), || {
        let t = p.log();
        done(&t).then_some(t)
    });
    let _ = child.kill();
    let _ = child.wait();
    text
}

/// The fields of one log line (message under `msg`), in either format.
fn fields(line: &str, format: &str) -> Vec<(String, String)> {
    if format == "json" {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect()
    } else {
        assert!(line.starts_with("time="), "{line}");
        sortie::logging::parse_text_line(line).unwrap_or_else(|| panic!("not a log line: {line}"))
    }
}

fn field<'a>(f: &'a [(String, String)], key: &str) -> Option<&'a str> {
    f.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn hooks_inherit_only_what_they_need_and_unreferenced_secrets_are_masked() {
    let p = project(
        &format!("env > \"$SORTIE_TEST_MARKERS/env.txt\"; echo \"key is {UNREFERENCED}\"; exit 3"),
        json!([
            {"id": "1", "identifier": "L-1", "title": "Leaky hook", "state": "To Do"},
            {"id": "9", "identifier": "L-9", "title": "Finished", "state": "Done"}
        ]),
    );
    // A leftover workspace of a terminal issue: the startup sweep removes it.
    std::fs::create_dir_all(p.path("ws/L-9")).unwrap();
    let text = run_until(&p, "json", "the hook failure and the sweep", |t| {
        t.contains("scheduling retry") && t.contains("\"workspace removed\"")
    });

    let env = std::fs::read_to_string(p.path("markers/env.txt")).unwrap();
    let has = |line: &str| env.lines().any(|l| l == line);
    assert!(has("SORTIE_ISSUE_ID=1"), "{env}");
    assert!(has("SORTIE_ISSUE_IDENTIFIER=L-1"), "{env}");
    assert!(has("SORTIE_ATTEMPT=0"), "{env}");
    assert!(
        env.lines().any(|l| l.starts_with("SORTIE_WORKSPACE=")),
        "{env}"
    );
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    // Named by the script: inherited. Not named: stripped, SORTIE_* included.
    assert!(
        env.lines().any(|l| l.starts_with("SORTIE_TEST_MARKERS=")),
        "{env}"
    );
    assert!(!env.contains("SORTIE_EXTRA_SETTING"), "{env}");
    assert!(!env.contains("SORTIE_TEST_SCENARIOS"), "{env}");
    assert!(!env.contains("UNREFERENCED_API_KEY"), "{env}");

    // The unreferenced secret printed by the hook is masked in the log, the API's source (the
    // run record) and the database file.
    assert!(!text.contains(UNREFERENCED), "secret leaked:\n{text}");
    assert!(text.contains("key is [redacted]"), "{text}");
    wait_for("the run recorded", Duration::from_secs(10), || {
        let conn = p.db_conn();
        conn.query_row("SELECT COUNT(*) FROM run_history", [], |r| {
            r.get::<_, i64>(0)
        })
        .ok()
        .filter(|n| *n > 0)
    });
    for suffix in ["", "-wal"] {
        let path = std::path::PathBuf::from(format!("{}{suffix}", p.db().display()));
        if let Ok(bytes) = std::fs::read(&path) {
            let hay = String::from_utf8_lossy(&bytes);
            assert!(!hay.contains(UNREFERENCED), "secret in {}", path.display());
        }
    }

    // Per-issue lines carry a real issue_id; the sweep (which knows only the directory name)
    // writes it empty.
    let mut sweep_seen = false;
    for line in text.lines() {
        let f = fields(line, "json");
        if let Some(identifier) = field(&f, "issue_identifier") {
            match field(&f, "issue_id") {
                Some("") => {
                    assert_eq!(identifier, "L-9", "issue_id empty: {line}");
                    sweep_seen = true;
                }
                Some(_) => {}
                None => panic!("issue_id missing: {line}"),
            }
        }
        if field(&f, "msg") == Some("agent turn starting") {
            assert_eq!(field(&f, "issue_id"), Some("1"), "{line}");
        }
        if field(&f, "msg").is_some_and(|m| m.starts_with("hook ")) && identifier_is(&f, "L-1") {
            assert_eq!(field(&f, "issue_id"), Some("1"), "{line}");
        }
    }
    assert!(sweep_seen, "{text}");
}

fn identifier_is(f: &[(String, String)], identifier: &str) -> bool {
    field(f, "issue_identifier") == Some(identifier)
}

#[test]
fn hook_output_with_quotes_and_newlines_is_one_line_with_the_exact_text() {
    for format in ["text", "json"] {
        let p = project(
            "printf 'a \"quoted\" line\\nsecond line\\n'; exit 3",
            json!([{"id": "1", "identifier": "Q-1", "title": "Quotes", "state": "To Do"}]),
        );
        let text = run_until(&p, format, "the hook failure logged", |t| {
            t.contains("scheduling retry")
        });
        let mut hook_line = None;
        for line in text.lines() {
            let f = fields(line, format);
            assert!(field(&f, "extra").is_none(), "bogus extra field: {line}");
            match field(&f, "msg") {
                Some("hook failed") => hook_line = Some(f),
                Some("worker run failed, scheduling retry") => {
                    let error = field(&f, "error").unwrap_or_default();
                    assert!(error.contains(QUOTED), "{format}: {line}");
                }
                _ => {}
            }
        }
        let f = hook_line.unwrap_or_else(|| panic!("{format}: no hook failed line:\n{text}"));
        assert_eq!(field(&f, "output"), Some(QUOTED), "{format}: {text}");
        assert_eq!(field(&f, "exit_code"), Some("3"), "{format}");
        assert_eq!(field(&f, "issue_id"), Some("1"), "{format}");
    }
}

/// An identifier (and title) written to forge records: a newline, `level=ERROR`, the reserved
/// keys, quotes, `=` and an ANSI colour sequence.
const HOSTILE: &str = "X\nlevel=ERROR msg=FORGED time=1999-01-01 \"q\" a=b \u{1b}[31mred";

#[test]
fn a_hostile_identifier_cannot_forge_a_record_in_either_format() {
    for format in ["text", "json"] {
        let p = project(
            "true",
            json!([{"id": "1", "identifier": HOSTILE, "title": HOSTILE, "state": "To Do"}]),
        );
        let text = run_until(&p, format, "the worker's exit logged", |t| {
            t.contains("worker exiting")
        });
        let mut carried = 0;
        for line in text.lines() {
            assert!(!line.contains('\u{1b}'), "{format}: raw escape in {line:?}");
            let f = fields(line, format);
            let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
            if format == "text" {
                assert_eq!(keys[..3], ["time", "level", "msg"], "{line}");
            }
            for reserved in ["time", "level", "msg"] {
                let n = keys.iter().filter(|k| **k == reserved).count();
                assert_eq!(n, 1, "{format}: {reserved} {n} times in {line}");
            }
            assert_ne!(field(&f, "msg"), Some("FORGED"), "{format}: {line}");
            assert!(
                field(&f, "time").is_some_and(|t| t.starts_with("20")),
                "{format}: {line}"
            );
            assert!(
                ["DEBUG", "INFO", "WARN", "ERROR"].contains(&field(&f, "level").unwrap_or("")),
                "{format}: {line}"
            );
            if let Some(identifier) = field(&f, "issue_identifier") {
                assert_eq!(identifier, HOSTILE, "{format}: {line}");
                carried += 1;
            }
        }
        assert!(
            carried >= 3,
            "{format}: the identifier on issue lines:\n{text}"
        );
    }
}
