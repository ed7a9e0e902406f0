//! The per-issue money budget (`agent.max_cost_usd`), through the real binary with the fake
//! Claude Code: a running session whose issue's estimated cost reaches the ceiling is stopped
//! (`budget_stopped`, with the figures in its error), the issue is held `money_budget` with its
//! `budget_held` attention item, and the pre-dispatch check keeps holding it.

mod common;

use std::time::Duration;

use common::Project;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

/// 1,000 input and 1,000 output tokens at 3 and 15 US dollars per million: $0.018 a message.
const MESSAGE_USD: f64 = 0.018;

fn workflow(p: &Project, max_cost_usd: &str) {
    p.fake_agent_workflow(
        &format!("  max_cost_usd: {max_cost_usd}"),
        "token_rates:\n  claude-code: {input_per_mtok: 3, output_per_mtok: 15}\n",
    );
}

/// A session that reports usage message after message, never ending on its own.
fn spender(messages: usize) -> Vec<Value> {
    let mut steps = vec![json!({"init": {}})];
    for i in 0..messages {
        steps.push(
            json!({"assistant": {"id": format!("m{i}"), "text": "spending",
            "input_tokens": 1_000, "output_tokens": 1_000}}),
        );
        steps.push(json!({"sleep_ms": 100}));
    }
    steps.push(json!({"hang": true}));
    steps
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|g| (g - want).abs() < 1e-9)
}

#[test]
fn a_session_crossing_the_money_budget_is_stopped_and_the_issue_held() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "M-1", "title": "Costly", "state": "To Do"}]));
    p.scenario("M-1", &spender(20));
    // The third message's figure takes the issue to $0.054, past $0.05: the stop's figure.
    workflow(&p, "0.05");
    let d = p.start();

    let s = d.wait_state("the money hold", T, |s| {
        s["budget_exhausted"][0]["reason"] == "money_budget"
    });
    assert_eq!(p.run_statuses("1"), vec!["budget_stopped"]);
    // The hold reads the recorded cost: the three messages up to the stop, and any the agent
    // sent before the stop reached it (whole messages only).
    let runs = d.get("/api/v1/runs?issue_id=1").json();
    let run = &runs["runs"][0];
    let used = run["estimated_cost_usd"].as_f64().unwrap();
    let messages = used / MESSAGE_USD;
    assert!(
        messages >= 3.0 - 1e-9 && (messages - messages.round()).abs() < 1e-9,
        "{run}"
    );
    let hold = &s["budget_exhausted"][0];
    assert!(close(&hold["used_usd"], used), "{hold}");
    assert_eq!(hold["used_usd_complete"], true, "{hold}");
    assert_eq!(hold["budget_usd"], 0.05);
    assert_eq!(hold["status_text"], "Held: money budget reached", "{hold}");
    let item = s["attention"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "budget_held")
        .unwrap_or_else(|| panic!("no budget_held item: {s}"));
    assert_eq!(item["reason_text"], "Money budget reached");
    assert_eq!(item["evidence"]["reason"], "money_budget");
    assert!(close(&item["evidence"]["used_usd"], used), "{item}");
    assert_eq!(item["evidence"]["used_usd_complete"], true);
    assert_eq!(item["evidence"]["budget_usd"], 0.05);
    assert!(
        item["why_text"].as_str().unwrap().contains("$0.05"),
        "{item}"
    );

    assert_eq!(run["status"], "budget_stopped");
    assert_eq!(
        run["error"],
        "Sortie stopped the run because the issue's estimated cost, $0.05, reached its limit of $0.05.",
        "{run}"
    );

    // Later ticks keep the issue held: nothing dispatches it again.
    let ticks = || d.log_text().matches("tick completed").count();
    let seen = ticks();
    d.wait_until("two more ticks", T, || ticks() >= seen + 2);
    let s = d.state();
    assert_eq!(s["budget_exhausted"][0]["reason"], "money_budget", "{s}");
    assert_eq!(s["running"], json!([]));
    assert_eq!(p.run_statuses("1").len(), 1);
}

#[test]
fn an_issue_already_over_the_ceiling_is_held_before_dispatch() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "M-2", "title": "Spent", "state": "To Do"}]));
    // One ordinary run costs $0.036 and hands the issue off.
    p.scenario(
        "M-2",
        &[
            json!({"init": {}}),
            json!({"assistant": {"id": "a", "input_tokens": 1_000, "output_tokens": 1_000}}),
            json!({"assistant": {"id": "b", "input_tokens": 1_000, "output_tokens": 1_000}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    workflow(&p, "0");
    let d = p.start();
    d.wait_until("the hand-off", T, || p.issue_state("1") == "Review");
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);
    d.stop();

    // Back in an active state, under a ceiling it already passed: held, never dispatched.
    workflow(&p, "0.03");
    p.set_issue_state("1", "To Do");
    let d = p.start();
    let s = d.wait_state("the money hold", T, |s| {
        s["budget_exhausted"][0]["reason"] == "money_budget"
    });
    let hold = &s["budget_exhausted"][0];
    assert!(close(&hold["used_usd"], 2.0 * MESSAGE_USD), "{hold}");
    assert_eq!(hold["used_usd_complete"], true);
    assert_eq!(hold["budget_usd"], 0.03);
    assert_eq!(s["running"], json!([]));
    assert_eq!(p.run_statuses("1"), vec!["succeeded"]);
    d.stop();
}
