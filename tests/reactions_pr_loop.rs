//! `pr_loop` through the real binary, the fake GitHub forge and the fake agent: what each
//! configured reaction recorded in the issue's pass, served on the `active` entry of
//! `GET /api/v1/state`, on `GET /api/v1/{identifier}` and on each run of `GET /api/v1/runs`.
//! A failing CI check dispatches one fix (`acted`, one continuation) and later escalates
//! (`escalated`), a mergeable pull request is watched and found clean (`quiet`), fresh review
//! comments wait out a long debounce (`unrecorded`); a restart keeps it all; the runs of issue
//! groups and issue history serve `null`; and a failed read of reaction activity serves
//! `null` on the state document and `history_unavailable` on the other two routes.

mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::daemon::Daemon;
use common::fake_github::{self, FakeGithub, check_run_json, review_comment_json, review_json};
use common::reactions::{LABELS, PR, ReactionProject, idle};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str = "  ci_failure:\n    provider: github\n    max_retries: 1\n    escalation: label\n    escalation_label: needs-human\n  review_comments:\n    debounce_ms: 3600000\n    poll_interval_ms: 30000\n  merge_conflicts:\n    poll_interval_ms: 30000\n";

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.set_check_runs(
            sha,
            vec![check_run_json(11, "Test", "completed", Some("failure"))],
        )
    });
}

fn member(result: &str, continuations: u64) -> Value {
    json!({"result": result, "continuations": continuations})
}

/// The `pr_loop` of the one active entry, `Null` when there is none.
fn active_loop(s: &Value) -> Value {
    s["active"]
        .as_array()
        .and_then(|a| a.first())
        .map(|e| e["pr_loop"].clone())
        .unwrap_or(Value::Null)
}

/// The same value on the per-issue route and on every run of the issue on the runs route.
fn assert_served_everywhere(d: &Daemon, expected: &Value) {
    let issue = d.get("/api/v1/1").json();
    assert_eq!(&issue["pr_loop"], expected, "{issue}");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let runs = runs["runs"].as_array().cloned().unwrap_or_default();
    assert!(runs.len() >= 2, "{runs:?}");
    for r in &runs {
        assert_eq!(&r["pr_loop"], expected, "{r}");
    }
}

#[test]
fn each_reaction_of_the_pass_is_served_with_its_result_and_continuations() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_mergeable(PR, Some(true), "clean");
        s.add_review(
            PR,
            review_json(100, "CHANGES_REQUESTED", "", "alice", false),
        );
        let mut c = review_comment_json(
            1001,
            "src/export.rs",
            Some(10),
            Some(12),
            Some(5),
            "please fix",
            "alice",
            false,
        );
        c["created_at"] = sortie::clock::now_rfc3339().into();
        s.add_review_comment(PR, 100, c);
    });
    failing(&fake, "sha1");
    let p = ReactionProject::new(&fake, REACTIONS);
    let d = p.start();

    // The first run hands off; the failing check dispatches one fix, the clean pull request
    // is watched, the review comments wait out their debounce.
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    let acted = json!({
        "ci_failure": member("acted", 1),
        "review_comments": member("unrecorded", 0),
        "merge_conflicts": member("quiet", 0),
    });
    let s = d.wait_state("the pass's reactions served", WAIT, |s| {
        idle(s) && active_loop(s) == acted
    });
    assert_eq!(s["active"][0]["status"], "pending_reactions", "{s}");
    assert_served_everywhere(&d, &acted);

    // The fix's own head fails too: max_retries 1 is spent, so CI escalates.
    fake.with_state(|s| s.set_head(PR, "sha2"));
    failing(&fake, "sha2");
    let escalated = json!({
        "ci_failure": member("escalated", 1),
        "review_comments": member("unrecorded", 0),
        "merge_conflicts": member("quiet", 0),
    });
    d.wait_state("the escalation served", WAIT, |s| {
        active_loop(s) == escalated
    });
    assert_served_everywhere(&d, &escalated);

    // Issue groups and issue history serve null on their runs.
    let groups = d.get("/api/v1/runs/issues").json();
    let group_runs = groups["groups"][0]["runs"].as_array().cloned();
    assert!(
        group_runs.as_ref().is_some_and(|r| !r.is_empty()),
        "{groups}"
    );
    for r in group_runs.unwrap_or_default() {
        assert_eq!(r["pr_loop"], Value::Null, "{r}");
    }
    let issue = d.get("/api/v1/1").json();
    for r in issue["history"]["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        assert_eq!(r["pr_loop"], Value::Null, "{r}");
    }

    // A restart keeps what was recorded.
    drop(d);
    let d = p.start();
    d.wait_state("the escalation after a restart", WAIT, |s| {
        active_loop(s) == escalated
    });
    assert_served_everywhere(&d, &escalated);

    // Reaction activity that cannot be read: null on the state document, 503 elsewhere.
    let db = p.setup.path().join("sortie.db");
    let db = if db.exists() {
        db
    } else {
        find_db(p.setup.path())
    };
    let conn = rusqlite::Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
    conn.execute_batch("ALTER TABLE pr_loop RENAME TO pr_loop_gone")
        .unwrap_or_else(|e| panic!("{e}"));
    d.wait_until("null pr_loop on the state document", WAIT, || {
        let _ = d.post("/api/v1/refresh");
        let s = d.state();
        s["active"]
            .as_array()
            .is_some_and(|a| !a.is_empty() && a.iter().all(|e| e["pr_loop"].is_null()))
    });
    for path in ["/api/v1/1", "/api/v1/runs"] {
        let r = d.get(path);
        assert_eq!(r.status, 503, "{path}");
        assert_eq!(r.json()["error"]["code"], "history_unavailable", "{path}");
    }
}

/// The daemon's database under the project directory.
fn find_db(dir: &std::path::Path) -> std::path::PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "db") {
                return p;
            }
        }
    }
    panic!("no database under {}", dir.display())
}
