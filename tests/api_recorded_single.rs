//! The single-workflow API, byte for byte: a fixed scenario's answers (status, content type
//! and body) compared with answers recorded from an earlier build
//! (`tests/fixtures/api_single/`). Only values that differ from one run to the next are masked
//! before the comparison: times, durations, process ids, dispatch ids, the scratch folder, the
//! port and the version. Everything else — key order, spacing, wording, which keys are
//! present — must stay as recorded, so a change that alters a single-workflow answer (while
//! adding several workflows, say) fails here.
//!
//! To record afresh after an intended change: `SORTIE_RECORD_API=1 cargo nextest run --test
//! api_recorded_single`, then review the diff of the fixtures.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Setup, issues, mock_workflow};

const WAIT: Duration = Duration::from_secs(30);

/// Keys whose values change from one run to the next (matched as whole key or suffix).
const VOLATILE_SUFFIXES: &[&str] = &[
    "_ms",
    "_at",
    "_secs",
    "_seconds",
    "seconds",
    "_pid",
    "pid",
    "dispatch_id",
    "etag",
    "uptime",
    "chain_id",
    "seconds_running",
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/api_single")
}

fn is_volatile_key(key: &str) -> bool {
    VOLATILE_SUFFIXES.iter().any(|s| key.ends_with(s))
}

/// An RFC 3339 time such as `2026-12-05T03:04:05.123Z`.
fn looks_like_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
}

/// The end (exclusive) of the JSON string starting at `at` (a `"`).
fn string_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The end (exclusive) of the scalar (number, literal) starting at `at`.
fn scalar_end(b: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t') {
        i += 1;
    }
    i
}

/// Masks the volatile values of a JSON text without re-serializing it: the value of a volatile
/// key becomes `"~"` (a `null` stays `null`; in an object or array under a volatile key, every
/// value), and any string that is a time becomes `"<time>"`.
fn mask_json(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut pending_key: Option<String> = None;
    let mut depth = 0usize;
    // The depth at which a container under a volatile key was opened.
    let mut masked_from: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        if c == b'"' {
            let end = string_end(b, i);
            let raw = &text[i..end];
            let inner = &text[i + 1..end.saturating_sub(1)];
            let mut j = end;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let volatile =
                masked_from.is_some() || pending_key.take().is_some_and(|k| is_volatile_key(&k));
            if j < b.len() && b[j] == b':' {
                out.push_str(raw);
                pending_key = Some(inner.to_string());
            } else if volatile {
                out.push_str("\"~\"");
            } else if looks_like_time(inner) {
                out.push_str("\"<time>\"");
            } else {
                out.push_str(raw);
            }
            i = end;
            continue;
        }
        if c == b'-' || c.is_ascii_alphanumeric() {
            let end = scalar_end(b, i);
            let raw = &text[i..end];
            let volatile =
                masked_from.is_some() || pending_key.take().is_some_and(|k| is_volatile_key(&k));
            if volatile && raw != "null" {
                out.push_str("\"~\"");
            } else {
                out.push_str(raw);
            }
            i = end;
            continue;
        }
        match c {
            b'{' | b'[' => {
                depth += 1;
                if masked_from.is_none() && pending_key.take().is_some_and(|k| is_volatile_key(&k))
                {
                    masked_from = Some(depth);
                }
                pending_key = None;
            }
            b'}' | b']' => {
                if masked_from == Some(depth) {
                    masked_from = None;
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        out.push(c as char);
        i += 1;
    }
    out
}

/// Masks every sample value of a Prometheus text, and the toolchain label of the build
/// information, keeping names, labels, HELP and TYPE lines.
fn mask_samples(text: &str) -> String {
    text.lines()
        .map(|line| match line.rsplit_once(' ') {
            Some((series, _)) if !line.starts_with('#') => {
                let series = match series.split_once("go_version=\"") {
                    Some((head, tail)) => {
                        let rest = tail.split_once('"').map_or("", |(_, r)| r);
                        format!("{head}go_version=\"<toolchain>\"{rest}")
                    }
                    None => series.to_string(),
                };
                format!("{series} ~")
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One answer as recorded: status, content type, then the masked body.
fn recorded_form(status: u16, content_type: &str, body: &str, dir: &Path, port: u16) -> String {
    let body = body
        .replace(&dir.display().to_string(), "<dir>")
        .replace(&format!("127.0.0.1:{port}"), "127.0.0.1:<port>")
        .replace(sortie_version(), "<version>");
    let body = if content_type.starts_with("application/json") {
        mask_json(&body)
    } else if content_type.starts_with("text/plain") {
        mask_samples(&body)
    } else {
        body
    };
    format!("{status}\n{content_type}\n{body}\n")
}

fn sortie_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Compares with (or, with `SORTIE_RECORD_API=1`, writes) the recorded answer `name`.
fn check(name: &str, actual: &str, mismatches: &mut Vec<String>) {
    let path = fixture_dir().join(format!("{name}.txt"));
    if std::env::var_os("SORTIE_RECORD_API").is_some() {
        std::fs::create_dir_all(fixture_dir()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (record with SORTIE_RECORD_API=1)", path.display()));
    if expected != actual {
        let at = expected
            .bytes()
            .zip(actual.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.len().min(actual.len()));
        let from = at.saturating_sub(120);
        mismatches.push(format!(
            "{name}: differs at byte {at}\n  recorded: {:?}\n  now:      {:?}",
            expected
                .get(from..(at + 120).min(expected.len()))
                .unwrap_or(""),
            actual.get(from..(at + 120).min(actual.len())).unwrap_or(""),
        ));
    }
}

/// One issue runs to its handoff (a mock session with fixed token figures); one is terminal,
/// one in a state the workflow does not pick up. Once the run is recorded and nothing runs,
/// nothing changes until the next poll a minute later, so every answer is stable.
#[test]
fn single_workflow_answers_match_the_recording() {
    let mock = "  input_tokens_per_turn: 1200\n  output_tokens_per_turn: 300\n  cache_read_tokens_per_turn: 100\n  session_id: mock-session-1\n";
    let s = Setup::new(
        &mock_workflow("", mock),
        &issues(&[
            ("1", "MT-1", "To Do"),
            ("3", "MT-3", "Done"),
            ("4", "MT-4", "Backlog"),
        ]),
    );
    let d = s.start(&[]);
    d.wait_until("MT-1 handed off and its run recorded", WAIT, || {
        let runs = d.try_get("/api/v1/runs").map(|r| r.json());
        let state = d.try_state();
        runs.is_some_and(|r| {
            r["runs"].as_array().is_some_and(|a| a.len() == 1)
                && r["runs"][0]["issue_outcome"]["kind"] == "handed_off"
        }) && state.is_some_and(|s| {
            s["running"].as_array().is_some_and(Vec::is_empty)
                && s["retrying"].as_array().is_some_and(Vec::is_empty)
        })
    });
    let runs = d.get("/api/v1/runs").json();
    let dispatch_id = runs["runs"][0]["dispatch_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no dispatch_id: {runs}"))
        .to_string();
    let routes = [
        ("state", "/api/v1/state".to_string()),
        ("runs", "/api/v1/runs".to_string()),
        ("runs_issues", "/api/v1/runs/issues".to_string()),
        ("run_events", format!("/api/v1/runs/{dispatch_id}/events")),
        ("stats", "/api/v1/stats".to_string()),
        ("issue_ran", "/api/v1/MT-1".to_string()),
        ("issue_terminal", "/api/v1/MT-3".to_string()),
        ("issue_unknown", "/api/v1/NOPE-9".to_string()),
        ("route_unknown", "/api/v1/runs/x/y/z".to_string()),
        ("metrics", "/metrics".to_string()),
    ];
    let mut mismatches = Vec::new();
    for (name, path) in routes {
        let r = d.get(&path);
        let ctype = r.header("content-type").unwrap_or("").to_string();
        let form = recorded_form(r.status, &ctype, &r.body, s.path(), d.port);
        check(name, &form, &mut mismatches);
    }
    assert!(
        mismatches.is_empty(),
        "single-workflow answers changed:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn masking_keeps_everything_but_volatile_values() {
    let text = r#"{"a_ms": 12, "b": "2026-01-01T00:00:00Z", "c": [1, {"started_at": null}], "d": "x", "pid": 7, "n": -3.5, "duration_seconds": {"p50": 0.1, "n": [2]}, "e": 1}"#;
    assert_eq!(
        mask_json(text),
        r#"{"a_ms": "~", "b": "<time>", "c": [1, {"started_at": null}], "d": "x", "pid": "~", "n": -3.5, "duration_seconds": {"p50": "~", "n": ["~"]}, "e": 1}"#
    );
}
