//! Crash safety, every launched session counts (issue 11, point 2), through the real binary:
//! a session is on record before its agent is spawned, so one killed with sortie counts toward
//! `max_sessions` after the restart, and its token figures (persisted while it ran) keep the
//! served totals from falling.

mod common;

use std::time::Duration;

use common::{Daemon, FAKE_AGENT, Project, wait_for};
use serde_json::json;

fn one_issue(p: &Project) {
    p.issues(json!([{"id": "1", "identifier": "S-1", "title": "Count me", "state": "To Do", "priority": 1}]));
}

fn argv_count(p: &Project) -> usize {
    std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn metric(d: &Daemon, name_and_labels: &str) -> f64 {
    let body = d.get_ok("/metrics").expect("metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(name_and_labels).map(str::trim))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Running processes of this project's agents (the fake-agent binary, logging to this
/// project's argv file), by pid.
fn agent_pids(p: &Project) -> Vec<u32> {
    let needle = format!("FAKE_AGENT_ARGV_LOG={}", p.path("argv.log").display());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let is_agent = std::fs::read_link(format!("/proc/{pid}/exe"))
                .map(|exe| exe.to_string_lossy().starts_with(FAKE_AGENT))
                .unwrap_or(false);
            let running = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| {
                    let state = t.get(t.rfind(')')? + 1..)?.split_whitespace().next()?;
                    Some(state != "Z" && state != "X")
                })
                .unwrap_or(false);
            is_agent
                && running
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_session_killed_with_sortie_counts_toward_the_session_budget_and_keeps_its_tokens() {
    let p = Project::new();
    one_issue(&p);
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "working", "input_tokens": 700, "output_tokens": 30}}),
            json!({"hang": true}),
        ],
    );
    p.fake_agent_workflow_full("", "  max_sessions: 1", "");
    let mut d = p.start();
    // Figures reach the live session row while the session runs (batched).
    wait_for(
        "the live session's figures",
        Duration::from_secs(30),
        || {
            (p.db_i64("SELECT COALESCE(MAX(input_tokens), 0) FROM session_metadata WHERE dispatch_id IS NOT NULL") == 700)
            .then_some(())
        },
    );
    // The served and scraped totals follow the stored figures at the next publish.
    let figures = |d: &Daemon| {
        (
            d.state()["agent_totals"]["input_tokens"]
                .as_u64()
                .unwrap_or(0),
            metric(d, "sortie_tokens_total{type=\"input\"}"),
        )
    };
    wait_for("the served figures", Duration::from_secs(30), || {
        (figures(&d) == (700, 700.0)).then_some(())
    });
    let (served, scraped) = figures(&d);
    assert_eq!((served, scraped), (700, 700.0));
    // The keeper stops the agent once sortie is gone; whether it has yet is a race this test
    // does not depend on: the restart must count the session either way.
    d.kill9();

    let mut d = p.start();
    let s = d.wait_state("the session budget hold", Duration::from_secs(30), |s| {
        s["budget_exhausted"]
            .as_array()
            .is_some_and(|b| b.iter().any(|e| e["reason"] == "session_budget"))
    });
    assert_eq!(s["counts"]["running"], 0, "{s}");
    assert_eq!(argv_count(&p), 1, "no second agent for a spent budget");
    assert!(agent_pids(&p).is_empty(), "the old agent still runs");
    assert!(s["agent_totals"]["input_tokens"].as_u64().unwrap() >= served);
    assert!(metric(&d, "sortie_tokens_total{type=\"input\"}") >= scraped);
    let runs = d.get("/api/v1/runs?issue=S-1").json();
    let list = runs["runs"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{runs}");
    assert_eq!(list[0]["status"], "cancelled");
    assert_eq!(list[0]["error"], "interrupted: sortie restarted");
    assert_eq!(list[0]["tokens"]["input_tokens"], 700);

    // A second restart records nothing twice and the totals still do not fall.
    d.kill9();
    let mut d = p.start();
    let s = d.wait_state("a completed poll", Duration::from_secs(20), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert_eq!(s["agent_totals"]["input_tokens"].as_u64(), Some(served));
    assert_eq!(p.run_statuses("1"), vec!["cancelled"]);
    assert_eq!(d.terminate(), Some(0));
}

#[test]
fn a_session_killed_before_its_agent_said_anything_is_still_counted_and_stopped() {
    let p = Project::new();
    one_issue(&p);
    // The agent never prints a line: no pid or session id reaches sortie.
    p.scenario("default", &[json!({"hang": true})]);
    p.fake_agent_workflow_full("", "  max_sessions: 1", "");
    let mut d = p.start();
    wait_for("the agent started", Duration::from_secs(30), || {
        (argv_count(&p) == 1 && agent_pids(&p).len() == 1).then_some(())
    });
    d.kill9();

    let mut d = p.start();
    d.wait_state("the session budget hold", Duration::from_secs(30), |s| {
        s["budget_exhausted"]
            .as_array()
            .is_some_and(|b| b.iter().any(|e| e["reason"] == "session_budget"))
    });
    assert_eq!(argv_count(&p), 1);
    assert_eq!(p.run_statuses("1"), vec!["cancelled"]);
    // Found by the token in its environment, since no pid was ever reported.
    assert!(agent_pids(&p).is_empty(), "the old agent still runs");
    assert_eq!(d.terminate(), Some(0));
}
