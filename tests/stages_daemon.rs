//! Dispatch rules and stage chains through the real binary, the file tracker and the fake
//! agent: a three-stage chain (plan → implement → review) advancing by labels, each stage on
//! its own rule's template and agent settings, a failed stage retrying in place, the pass's
//! one `dispatched_at` across a kill -9 between stages, the `stage_hop_unconfirmed` hold,
//! and the hop ceiling stopping a loop.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);

/// The chain's rules; `extra` goes under `dispatch:`.
fn dispatch_yaml(extra: &str) -> String {
    format!(
        r#"claude-code:
  model: base-model
dispatch:
{extra}  rules:
    - name: plan
      stage: stage-plan
      next: implement
      template: ./prompts/plan.md
    - name: implement
      stage: stage-implement
      next: review
      template: ./prompts/implement.md
    - name: review
      stage: stage-review
      template: ./prompts/review.md
      claude-code:
        model: review-model
"#
    )
}

fn project(extra: &str, poll_ms: u64) -> Project {
    let p = Project::new();
    p.write(
        "prompts/plan.md",
        "PLAN {{ .issue.identifier }} current={{ .stage.current }} previous={{ .stage.previous }}\n",
    );
    p.write(
        "prompts/implement.md",
        "IMPLEMENT attempt {{ .attempt }} previous={{ .stage.previous }} outcome={{ .stage.previous_outcome }}\n",
    );
    p.write(
        "prompts/review.md",
        "REVIEW previous={{ .stage.previous }}\n",
    );
    p.fake_agent_workflow("  max_retry_backoff_ms: 300", &dispatch_yaml(extra));
    let wf = std::fs::read_to_string(p.workflow()).expect("workflow");
    p.write(
        "WORKFLOW.md",
        &wf.replace("interval_ms: 200", &format!("interval_ms: {poll_ms}")),
    );
    p.issues(json!([{
        "id": "1", "identifier": "ST-1", "title": "Chained work", "state": "To Do",
        "labels": ["stage-plan"]
    }]));
    p
}

/// The prompts the fake agent received, in order, with the argv of each call.
fn calls(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn prompts(p: &Project) -> Vec<String> {
    calls(p)
        .iter()
        .map(|c| c["prompt"].as_str().unwrap_or("").to_string())
        .collect()
}

fn labels(p: &Project) -> Vec<String> {
    p.read_issues()[0]["labels"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `(rule_name, chain_id, dispatched_at, stage_previous, stage_target, stage_result, status)`
/// of every run, oldest first.
fn runs(p: &Project) -> Vec<[String; 7]> {
    let conn = p.db_conn();
    let mut st = conn
        .prepare(
            "SELECT rule_name, chain_id, COALESCE(dispatched_at, ''), stage_previous, stage_target,
                    stage_result, status FROM run_history ORDER BY id",
        )
        .expect("query");
    st.query_map([], |r| {
        Ok([
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ])
    })
    .expect("rows")
    .map(|r| r.expect("row"))
    .collect()
}

#[test]
fn a_three_stage_chain_advances_by_labels_with_each_rules_prompt_and_settings() {
    let p = project("", 200);
    // The implement stage fails its first attempt, then succeeds on the retry.
    p.scenario(
        "default",
        &[
            json!({"init": {}, "prompt_contains": "IMPLEMENT attempt 0"}),
            json!({"result": {"subtype": "error_during_execution", "is_error": true, "text": "boom"},
                   "prompt_contains": "IMPLEMENT attempt 0"}),
            json!({"exit": 1, "prompt_contains": "IMPLEMENT attempt 0"}),
        ],
    );
    let d = p.start();
    wait_for("the chain ends on the handoff state", LONG, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let got = prompts(&p);
    assert_eq!(
        got.len(),
        4,
        "plan, implement (failed), implement, review: {got:?}"
    );
    assert!(
        got[0].starts_with("PLAN ST-1 current=plan previous=\n"),
        "{}",
        got[0]
    );
    assert!(
        got[1].starts_with("IMPLEMENT attempt 0 previous=plan outcome=succeeded"),
        "{}",
        got[1]
    );
    assert!(
        got[2].starts_with("IMPLEMENT attempt 1 previous=plan outcome=succeeded"),
        "the retry stays on its stage: {}",
        got[2]
    );
    assert!(
        got[3].starts_with("REVIEW previous=implement"),
        "{}",
        got[3]
    );
    // The review rule's settings block sets its model; the others run the top-level one.
    let models: Vec<String> = calls(&p)
        .iter()
        .map(|c| {
            let argv: Vec<&str> = c["argv"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            argv.iter()
                .position(|a| *a == "--model")
                .and_then(|i| argv.get(i + 1))
                .map(|m| m.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        models,
        vec!["base-model", "base-model", "base-model", "review-model"]
    );
    // Labels: the hop added each next stage's label and removed the previous one.
    assert_eq!(labels(&p), vec!["stage-review"]);
    // Run history: one pass (chain id, dispatched_at) for every stage; the hops' results.
    let rows = runs(&p);
    assert_eq!(rows.len(), 4);
    let rules: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(rules, vec!["plan", "implement", "implement", "review"]);
    assert!(
        rows.iter().all(|r| r[1] == rows[0][1] && r[1].len() == 26),
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|r| r[2] == rows[0][2] && !r[2].is_empty()),
        "{rows:?}"
    );
    assert_eq!(
        (rows[0][4].as_str(), rows[0][5].as_str()),
        ("implement", "advanced")
    );
    assert_eq!(rows[1][6], "failed");
    assert_eq!(
        (rows[2][4].as_str(), rows[2][5].as_str()),
        ("review", "advanced")
    );
    assert_eq!(rows[3][3], "implement");
    // The served runs carry rule and stage; the filters select them.
    let by_rule = d.get("/api/v1/runs?rule=implement").json();
    let served = by_rule["runs"].as_array().map_or(0, Vec::len);
    assert_eq!(served, 2, "{by_rule}");
    let by_stage = d.get("/api/v1/runs?stage=review").json();
    assert_eq!(
        by_stage["runs"].as_array().map_or(0, Vec::len),
        1,
        "{by_stage}"
    );
    assert_eq!(
        by_stage["runs"][0]["stage_chain"],
        json!(["plan", "implement", "review"])
    );
    // The handoff reset the hop count: nothing is between stages.
    let s = d.state();
    assert_eq!(s["between_stages"], json!([]));
    assert_eq!(
        s["config"]["dispatch"]["chains"],
        json!([["plan", "implement", "review"]])
    );
}

#[test]
fn a_pass_keeps_one_dispatched_at_across_a_kill_between_stages() {
    // A slow poll leaves the issue between stages long enough to kill sortie there.
    let p = project("", 3_000);
    p.scenario("default", &[]);
    let mut d = p.start();
    let s = d.wait_state("the issue between stages", LONG, |s| {
        s["between_stages"].as_array().is_some_and(|a| a.len() == 1)
    });
    let row = &s["between_stages"][0];
    assert_eq!(row["source_rule"], "plan");
    assert_eq!(row["target_rule"], "implement");
    assert_eq!(row["target_label"], "stage-implement");
    assert_eq!(row["stage_position"]["hop_count"], 1);
    let dispatched_at = row["dispatched_at"].clone();
    assert!(dispatched_at.is_string(), "{row}");
    d.kill9();
    let d = p.start();
    let s = d.wait_state("the hop restored", LONG, |s| {
        s["between_stages"].as_array().is_some_and(|a| a.len() == 1)
            || s["counts"]["running"].as_u64() == Some(1)
    });
    if let Some(row) = s["between_stages"].as_array().and_then(|a| a.first()) {
        assert_eq!(
            row["dispatched_at"], dispatched_at,
            "the restart keeps the pass's date"
        );
    }
    wait_for("the chain ends on the handoff state", LONG, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let rows = runs(&p);
    let rules: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(rules, vec!["plan", "implement", "review"], "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r[1] == rows[0][1] && r[2] == rows[0][2]),
        "{rows:?}"
    );
}

#[test]
fn an_unconfirmed_hop_holds_and_the_ceiling_stops_a_loop() {
    // One hop in a row at most: a second hop without leaving the active states is refused.
    // Polls come only from the test's refreshes, so no poll can read the hop's label before
    // the test has taken it off.
    let p = project("  max_consecutive_hops: 2\n", 600_000);
    let wf = std::fs::read_to_string(p.workflow()).expect("workflow");
    p.write(
        "WORKFLOW.md",
        &wf.replace(
            "interval_ms: 600000",
            "interval_ms: 600000\n  min_interval_ms: 1",
        ),
    );
    // The implement stage waits until the test lets it finish.
    let gate = p.path("markers/go");
    p.scenario(
        "default",
        &[
            json!({"init": {}, "prompt_contains": "IMPLEMENT"}),
            json!({"wait_file": gate.display().to_string(), "prompt_contains": "IMPLEMENT"}),
            json!({"assistant": {"text": "ok", "input_tokens": 1, "output_tokens": 1}, "prompt_contains": "IMPLEMENT"}),
            json!({"result": {"subtype": "success", "text": "ok"}, "prompt_contains": "IMPLEMENT"}),
        ],
    );
    let d = p.start();
    let refreshed = |pred: &dyn Fn(&Value) -> bool, s: &Value| {
        let held = pred(s);
        if !held {
            d.post("/api/v1/refresh");
        }
        held
    };
    d.wait_state("implement running", LONG, |s| {
        refreshed(&|s| s["running"][0]["rule_name"] == "implement", s)
    });
    // Implement hops to review (hop 2); a person then takes every stage label off before
    // the next poll reads the hop's label.
    std::fs::write(&gate, "").expect("gate");
    wait_for("hopped to review", LONG, || {
        labels(&p).iter().any(|l| l == "stage-review").then_some(())
    });
    d.wait_state("the hop on record", LONG, |s| {
        s["running"] == json!([]) && s["between_stages"][0]["target_rule"] == "review"
    });
    let mut issues = p.read_issues();
    issues[0]["labels"] = json!([]);
    p.issues(issues);
    let s = d.wait_state("the unconfirmed hop hold", LONG, |s| {
        refreshed(
            &|s| s["between_stages"][0]["hold"]["reason"] == "stage_hop_unconfirmed",
            s,
        )
    });
    let hold = &s["between_stages"][0]["hold"];
    assert!(hold["held_since"].is_string(), "{hold}");
    assert!(
        hold["reason_text"]
            .as_str()
            .unwrap_or("")
            .contains("stage-review"),
        "{hold}"
    );
    assert_eq!(
        s["held"],
        json!([]),
        "an issue between stages is not in held[]"
    );
    // The person puts the issue back on the plan stage: plan runs again, and its hop would
    // be the third in a row, past the ceiling of 2: the exit takes the handoff write.
    let mut issues = p.read_issues();
    issues[0]["labels"] = json!(["stage-plan"]);
    p.issues(issues);
    // The handoff write (tracker thread) and the run's stage columns (database writer) are
    // applied by different threads: wait for both before reading the row.
    wait_for("the ceiling falls back to the handoff", LONG, || {
        let done = p.issue_state("1") == "Review";
        if !done {
            d.post("/api/v1/refresh");
        }
        let recorded = runs(&p)
            .last()
            .is_some_and(|r| r[0] == "plan" && !r[5].is_empty());
        (done && recorded).then_some(())
    });
    let rows = runs(&p);
    let last = rows.last().expect("runs");
    assert_eq!(last[0], "plan");
    assert_eq!(
        (last[4].as_str(), last[5].as_str()),
        ("implement", "ceiling"),
        "{rows:?}"
    );
    assert!(
        p.log().contains("stage hop not made"),
        "the ceiling is logged"
    );
    // The refused hop is a `stage.not_advanced` event of the plan run that was due it.
    let plan = d.get("/api/v1/runs?rule=plan").json();
    let dispatch = plan["runs"][0]["dispatch_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut last = Value::Null;
    d.wait_until("the stage.not_advanced event", LONG, || {
        let ev = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
        last = ev["events"]
            .as_array()
            .and_then(|e| e.last())
            .cloned()
            .unwrap_or_default();
        last["event"] == "stage.not_advanced"
    });
    assert_eq!(
        (
            &last["reason"],
            &last["result"],
            &last["hop_count"],
            &last["hop_ceiling"]
        ),
        (&json!("ceiling"), &json!("ceiling"), &json!(2), &json!(2)),
        "{last}"
    );
    assert_eq!(
        last["text"],
        "Stayed on stage plan: a hop to implement would pass the hop ceiling of 2, so the issue was handed off."
    );
}
