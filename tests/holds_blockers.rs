//! Blocker holds through the real binary: a GitHub candidate's blockers are read by the
//! dispatch pass, lazily and at most four per poll (`blockers_not_read` past the budget), a
//! failed read holds it and every later unread one (`blockers_unresolved`), a full global slot
//! limit reads nothing (the capacity reason), `blocked_by` lists the open blockers in tracker
//! order with their states, and a file tracker's `"blockers_complete": false` holds as
//! `blockers_incomplete`. Each checks the `held[]` row of `GET /api/v1/state`.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, TOKEN};
use common::{Project, Setup};
use serde_json::{Value, json};

const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "wontfix"];
const WAIT: Duration = Duration::from_secs(30);

/// A mock-agent workflow over the fake GitHub, polling every 200 ms, retried reads backing off
/// 10 ms; sessions run for an hour so a dispatched issue keeps its slot.
fn workflow(fake: &FakeGithub, agent_extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done, wontfix]\n  in_progress_state: in-progress\n  handoff_state: review\ngithub:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\n{agent_extra}mock:\n  turn_delay_ms: 3600000\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    )
}

fn deps_path(n: u64) -> String {
    format!("/repos/owner/repo/issues/{n}/dependencies/blocked_by")
}

fn deps_reads(fake: &FakeGithub, n: u64) -> usize {
    fake.requests("GET", &deps_path(n)).len()
}

fn held<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["held"]
        .as_array()?
        .iter()
        .find(|h| h["issue_identifier"] == identifier)
}

fn reason_of(s: &Value, identifier: &str) -> Option<String> {
    held(s, identifier).and_then(|h| h["hold"]["reason"].as_str().map(String::from))
}

/// Checks the fields every hold row serves the same way, and the reason-specific ones as
/// `blockers` and `slot` (`Value::Null` where the reason has none), and the sentences.
fn assert_row(row: &Value, reason: &str, blockers: &Value, slot: &Value, reason_text: &str) {
    let hold = &row["hold"];
    assert_eq!(hold["reason"], reason, "{row}");
    assert_eq!(&hold["blockers"], blockers, "{row}");
    assert_eq!(&hold["slot"], slot, "{row}");
    assert_eq!(hold["reason_text"], reason_text, "{row}");
    assert!(
        hold["release_text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Released when") && t.ends_with('.')),
        "{row}"
    );
    assert!(
        hold["held_since"]
            .as_str()
            .is_some_and(|t| t.len() >= 20 && t.ends_with('Z')),
        "{row}"
    );
    assert_eq!(row["status_text"], hold["reason_text"], "{row}");
}

#[test]
fn a_poll_reads_four_blocker_lists_and_holds_the_rest_as_not_read() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(100, "Blocker under review", &["review"], false);
        for n in 1..=6 {
            s.add_issue(n, &format!("Blocked {n}"), &["backlog"], false);
            s.blocked_by.insert(n, vec![100]);
        }
    });
    let setup = Setup::new(&workflow(&fake, ""), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("three polls", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/issues").len() >= 3
    });
    let s = d.wait_state("six held rows", WAIT, |s| {
        s["held"].as_array().is_some_and(|h| h.len() == 6)
    });
    let blockers = json!([{"issue_id": "100", "issue_identifier": "100", "state": "review"}]);
    for n in ["1", "2", "3", "4"] {
        let row = held(&s, n).unwrap_or(&Value::Null);
        assert_row(
            row,
            "blocked_by",
            &blockers,
            &Value::Null,
            "Blocked by 100 (review)",
        );
    }
    for n in ["5", "6"] {
        let row = held(&s, n).unwrap_or(&Value::Null);
        assert_row(
            row,
            "blockers_not_read",
            &Value::Null,
            &Value::Null,
            "Blockers not read yet",
        );
    }
    // Every poll read the first four in dispatch order and never reached the last two.
    let polls = fake.requests("GET", "/repos/owner/repo/issues").len();
    let first = deps_reads(&fake, 1);
    assert!(
        first >= 1 && first <= polls,
        "{first} reads in {polls} polls"
    );
    for n in 5..=6 {
        assert_eq!(deps_reads(&fake, n), 0, "issue {n}");
    }
    let metrics = d.get("/metrics").body;
    assert!(
        metrics.lines().any(|l| {
            l.starts_with("sortie_candidate_holds_total{reason=\"blockers_not_read\"} ")
                && !l.ends_with(" 0")
        }),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|l| {
            l.starts_with(
                "sortie_tracker_requests_total{operation=\"fetch_blockers\",result=\"success\"} ",
            ) && !l.ends_with(" 0")
        }),
        "{metrics}"
    );
}

#[test]
fn a_failed_blocker_read_holds_it_and_every_later_unread_issue() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(100, "Blocker under review", &["review"], false);
        for n in 1..=3 {
            s.add_issue(n, &format!("Blocked {n}"), &["backlog"], false);
            s.blocked_by.insert(n, vec![100]);
        }
        s.failing.insert(deps_path(2));
    });
    let setup = Setup::new(&workflow(&fake, ""), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    let s = d.wait_state("three held rows", WAIT, |s| {
        s["held"].as_array().is_some_and(|h| h.len() == 3)
    });
    let blockers = json!([{"issue_id": "100", "issue_identifier": "100", "state": "review"}]);
    assert_row(
        held(&s, "1").unwrap_or(&Value::Null),
        "blocked_by",
        &blockers,
        &Value::Null,
        "Blocked by 100 (review)",
    );
    for n in ["2", "3"] {
        assert_row(
            held(&s, n).unwrap_or(&Value::Null),
            "blockers_unresolved",
            &Value::Null,
            &Value::Null,
            "Blockers could not be read",
        );
    }
    assert!(deps_reads(&fake, 2) >= 1);
    assert_eq!(deps_reads(&fake, 3), 0, "no read after the failure");
    assert!(
        d.log_text()
            .contains("msg=\"blocker read failed\" issue_id=2 issue_identifier=2"),
        "{}",
        d.log_text()
    );

    // The endpoint recovers: the next poll reads both lists.
    fake.with_state(|s| {
        s.failing.clear();
    });
    d.wait_state("both read on a later poll", WAIT, |s| {
        reason_of(s, "2").as_deref() == Some("blocked_by")
            && reason_of(s, "3").as_deref() == Some("blocked_by")
    });
}

#[test]
fn a_full_global_slot_limit_holds_for_capacity_without_reading_blockers() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(100, "Blocker under review", &["review"], false);
        s.add_issue(1, "Runs", &["backlog"], false);
        for n in 2..=3 {
            s.add_issue(n, &format!("Blocked {n}"), &["backlog"], false);
            s.blocked_by.insert(n, vec![100]);
        }
    });
    let setup = Setup::new(&workflow(&fake, "  max_concurrent_agents: 1\n"), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("three polls", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/issues").len() >= 3
    });
    let s = d.wait_state("1 running, the others held", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "1"
            && s["held"].as_array().is_some_and(|h| h.len() == 2)
    });
    let slot = json!({"scope": "global", "used": 1, "limit": 1});
    for n in ["2", "3"] {
        assert_row(
            held(&s, n).unwrap_or(&Value::Null),
            "agent_slots_full",
            &Value::Null,
            &slot,
            "All 1 agent slots are in use",
        );
    }
    assert_eq!(deps_reads(&fake, 1), 1, "the dispatched issue's one read");
    assert_eq!(deps_reads(&fake, 2), 0);
    assert_eq!(deps_reads(&fake, 3), 0);
}

#[test]
fn blocked_by_lists_the_open_blockers_in_tracker_order_with_their_states() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(103, "Under review", &["review"], false);
        s.add_issue(102, "Done", &["done"], true);
        // Closed, yet its label names an active state: it still blocks.
        s.add_issue(101, "Closed mid-work", &["in-progress"], true);
        s.add_issue(1, "Blocked", &["backlog"], false);
        s.blocked_by.insert(1, vec![103, 102, 101]);
    });
    let setup = Setup::new(&workflow(&fake, ""), "[]");
    let d = setup.start(&[("GITHUB_TOKEN", TOKEN)]);
    let s = d.wait_state("1 held", WAIT, |s| reason_of(s, "1").is_some());
    let blockers = json!([
        {"issue_id": "103", "issue_identifier": "103", "state": "review"},
        {"issue_id": "101", "issue_identifier": "101", "state": "in-progress"},
    ]);
    let row = held(&s, "1").unwrap_or(&Value::Null);
    assert_row(
        row,
        "blocked_by",
        &blockers,
        &Value::Null,
        "Blocked by 103 (review), 101 (in-progress)",
    );
    assert_eq!(
        row["hold"]["release_text"],
        "Released when every blocker reaches a terminal state."
    );
    assert_eq!(row["display_identifier"], "owner/repo#1");
    assert_eq!(row["state"], "backlog");
}

#[test]
fn a_file_issue_with_an_incomplete_blocker_list_is_held() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "I-1", "title": "Partial list", "state": "To Do", "priority": 1,
         "blocked_by": [{"id": "9", "identifier": "X-9", "state": "Done"}],
         "blockers_complete": false},
    ]));
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow("", "");
    let d = p.start();
    let s = d.wait_state("I-1 held", WAIT, |s| reason_of(s, "I-1").is_some());
    assert_row(
        held(&s, "I-1").unwrap_or(&Value::Null),
        "blockers_incomplete",
        &Value::Null,
        &Value::Null,
        "The tracker returned an incomplete blocker list",
    );
    assert!(p.run_statuses("1").is_empty());

    // The list is declared complete: the issue is dispatched.
    let mut v = p.read_issues();
    v[0]["blockers_complete"] = json!(true);
    p.issues(v);
    d.wait_state("I-1 running", WAIT, |s| {
        s["running"][0]["issue_identifier"] == "I-1"
    });
}
