//! What each run cost, through the real binary with the fake Claude Code: the cost frozen on
//! the run row under the `token_rates` in force when it ended (a later edit changes only the
//! runs that end after it), the live estimate of a running session, the cost statuses of an
//! unmeasured run, an unpriced model and a run with one priced and one unpriced model, and a
//! model no rate prices taking the US-dollar amount the agent reported.

mod common;

use std::time::Duration;

use common::Project;
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(30);

/// Rates per million tokens: input, output, cache read, cache write.
const RATES: [f64; 4] = [3.0, 15.0, 0.3, 3.75];

fn token_rates(key: &str, r: [f64; 4]) -> String {
    format!(
        "token_rates:\n  {key}: {{input_per_mtok: {}, output_per_mtok: {}, cache_read_per_mtok: {}, cache_write_per_mtok: {}}}\n",
        r[0], r[1], r[2], r[3]
    )
}

/// The cost of one assistant message's figures (uncached input, output, cache read and cache
/// write, as the agent reports them) under `r`.
fn cost(tokens: [u64; 4], r: [f64; 4]) -> f64 {
    tokens
        .iter()
        .zip(r)
        .map(|(n, rate)| *n as f64 * rate)
        .sum::<f64>()
        / 1e6
}

fn assistant(id: &str, model: &str, t: [u64; 4]) -> Value {
    json!({"assistant": {"id": id, "model": model, "text": "working", "input_tokens": t[0],
        "output_tokens": t[1], "cache_read_tokens": t[2], "cache_write_tokens": t[3]}})
}

fn success() -> Value {
    json!({"result": {"subtype": "success", "text": "ok"}})
}

fn issue(id: &str, ident: &str, state: &str) -> Value {
    json!({"id": id, "identifier": ident, "title": format!("Issue {ident}"), "state": state})
}

/// The issue's newest run as `/api/v1/runs` serves it, once one is recorded.
fn wait_run(d: &common::Daemon, issue_id: &str, n: usize) -> Value {
    let mut found = Value::Null;
    d.wait_until(&format!("run {n} of issue {issue_id}"), T, || {
        let runs = d.get(&format!("/api/v1/runs?issue_id={issue_id}")).json();
        match runs["runs"].as_array() {
            Some(a) if a.len() >= n => {
                found = a[0].clone();
                true
            }
            _ => false,
        }
    });
    found
}

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|g| (g - want).abs() < 1e-9)
}

#[test]
fn a_run_freezes_its_cost_under_the_rates_in_force_when_it_ended() {
    let p = Project::new();
    p.issues(json!([
        issue("1", "C-1", "To Do"),
        issue("2", "C-2", "Backlog")
    ]));
    let tokens = [10_000, 2_000, 5_000, 1_000];
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            assistant("m1", "fake-model-1", tokens),
            success(),
        ],
    );
    p.fake_agent_workflow("", &token_rates("claude-code", RATES));
    let d = p.start();

    let first = wait_run(&d, "1", 1);
    let want = cost(tokens, RATES);
    assert!(close(&first["estimated_cost_usd"], want), "{first}");
    assert_eq!(first["cost_status"], "estimated", "{first}");
    assert_eq!(first["vendor_amounts"], json!([]), "{first}");
    let part = &first["model_usage"][0];
    assert_eq!(first["model_usage"].as_array().map(Vec::len), Some(1));
    assert_eq!(part["model"], "fake-model-1");
    assert!(close(&part["estimated_cost_usd"], want), "{part}");
    assert_eq!(part["cost_status"], "estimated");
    assert_eq!(part["price_source"], "operator");
    assert_eq!(part["unrated_classes"], json!([]));
    assert_eq!(
        part["tokens"]["input_tokens"], 16_000,
        "input counts its cache parts"
    );
    assert_eq!(part["tokens"]["total_tokens"], 18_000);

    // New rates, with a poll interval the state document shows once they are in force.
    let doubled = RATES.map(|r| r * 2.0);
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    let wf = wf
        .replace(
            &token_rates("claude-code", RATES),
            &token_rates("claude-code", doubled),
        )
        .replace("interval_ms: 200", "interval_ms: 250");
    p.write("WORKFLOW.md", &wf);
    d.wait_state("the edited workflow in force", T, |s| {
        s["config"]["polling"]["interval_ms"] == 250
    });
    p.set_issue_state("2", "To Do");
    let second = wait_run(&d, "2", 1);
    assert!(
        close(&second["estimated_cost_usd"], cost(tokens, doubled)),
        "{second}"
    );
    // The earlier run keeps the figure it was recorded with.
    let again = wait_run(&d, "1", 1);
    assert_eq!(again["estimated_cost_usd"], first["estimated_cost_usd"]);
    assert_eq!(again["model_usage"], first["model_usage"]);

    // The issue detail's totals carry the recorded cost.
    let detail = d.get("/api/v1/C-1").json();
    let totals = &detail["history"]["totals"];
    assert!(close(&totals["estimated_cost_usd"], want), "{detail}");
    assert_eq!(totals["cost_status"], "estimated", "{totals}");
    let both = want + cost(tokens, doubled);
    assert!((counted_cost(&d) - both).abs() < 1e-9);
    // The counter resumes from the recorded costs after a restart.
    d.stop();
    let d = p.start();
    assert!((counted_cost(&d) - both).abs() < 1e-9);
    d.stop();
}

/// `sortie_estimated_cost_usd_total` as scraped.
fn counted_cost(d: &common::Daemon) -> f64 {
    let metrics = d.get("/metrics").body;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("sortie_estimated_cost_usd_total "))
        .unwrap_or_else(|| panic!("{metrics}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_running_session_shows_its_live_estimate() {
    let p = Project::new();
    p.issues(json!([issue("1", "L-1", "To Do")]));
    let tokens = [4_000, 1_000, 0, 0];
    let gate = p.path("release");
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            assistant("m1", "fake-model-1", tokens),
            json!({"wait_file": gate.display().to_string()}),
            success(),
        ],
    );
    p.fake_agent_workflow("", &token_rates("claude-code", RATES));
    let d = p.start();
    let s = d.wait_state("a live estimate", T, |s| {
        !s["running"][0]["estimated_cost_usd"].is_null()
    });
    let want = cost(tokens, RATES);
    let row = &s["running"][0];
    assert!(close(&row["estimated_cost_usd"], want), "{row}");
    assert_eq!(row["cost_status"], "estimated");
    assert!(close(&row["issue_estimated_cost_usd"], want), "{row}");
    assert_eq!(row["issue_cost_status"], "estimated");
    assert!(close(&s["active_estimated_cost_usd"], want), "{s}");
    assert_eq!(s["cost_unpriced_running"], 0);
    let detail = d.get("/api/v1/L-1").json();
    assert!(
        close(&detail["running"]["estimated_cost_usd"], want),
        "{detail}"
    );
    std::fs::write(&gate, "").unwrap();
    let run = wait_run(&d, "1", 1);
    assert!(close(&run["estimated_cost_usd"], want), "{run}");
}

#[test]
fn unmeasured_unpriced_and_partial_runs_read_so() {
    let p = Project::new();
    p.issues(json!([
        issue("1", "S-1", "To Do"),
        issue("2", "S-2", "To Do"),
        issue("3", "S-3", "To Do"),
        issue("4", "S-4", "To Do"),
        issue("5", "S-5", "To Do"),
    ]));
    // Only `priced-model` has a rate (a model entry with all four classes).
    p.scenario("S-1", &[json!({"init": {}}), success()]);
    p.scenario(
        "S-2",
        &[
            json!({"init": {}}),
            assistant("m1", "mystery-model", [100, 10, 0, 0]),
            success(),
        ],
    );
    p.scenario(
        "S-3",
        &[
            json!({"init": {}}),
            assistant("m1", "priced-model", [1_000, 100, 0, 0]),
            assistant("m2", "mystery-model", [500, 50, 0, 0]),
            success(),
        ],
    );
    p.scenario(
        "S-4",
        &[
            json!({"init": {}}),
            assistant("m1", "mystery-model", [100, 10, 0, 0]),
            json!({"result": {"subtype": "success", "text": "ok", "total_cost_usd": 0.5}}),
        ],
    );
    // Dollars and no token figure: an unmeasured run that names the unit it reported.
    p.scenario(
        "S-5",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "success", "text": "ok", "total_cost_usd": 0.2}}),
        ],
    );
    p.fake_agent_workflow(
        "  max_concurrent_agents: 5",
        &token_rates("priced-model", RATES),
    );
    let d = p.start();

    let unmeasured = wait_run(&d, "1", 1);
    assert_eq!(
        unmeasured["usage_completeness"], "unmeasured",
        "{unmeasured}"
    );
    assert_eq!(unmeasured["cost_status"], "unmeasured");
    assert!(unmeasured["estimated_cost_usd"].is_null());
    assert_eq!(unmeasured["model_usage"], json!([]));

    let unpriced = wait_run(&d, "2", 1);
    assert_eq!(unpriced["cost_status"], "unpriced", "{unpriced}");
    assert!(unpriced["estimated_cost_usd"].is_null());
    let part = &unpriced["model_usage"][0];
    assert_eq!(part["cost_status"], "unpriced");
    assert_eq!(part["unrated_classes"], json!(["input", "output"]));
    assert!(part["price_source"].is_null());

    let partial = wait_run(&d, "3", 1);
    assert_eq!(partial["cost_status"], "partial", "{partial}");
    assert!(
        close(
            &partial["estimated_cost_usd"],
            cost([1_000, 100, 0, 0], RATES)
        ),
        "{partial}"
    );
    let models: Vec<&str> = partial["model_usage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, vec!["mystery-model", "priced-model"]);

    // A model no rate prices takes the amount the agent reported; no dollar amount is listed.
    let agent = wait_run(&d, "4", 1);
    assert_eq!(agent["cost_status"], "estimated", "{agent}");
    assert!(close(&agent["estimated_cost_usd"], 0.5), "{agent}");
    assert_eq!(agent["model_usage"][0]["price_source"], "agent");
    assert_eq!(agent["vendor_amounts"], json!([]));
    let detail = d.get("/api/v1/S-4").json();
    let totals = &detail["history"]["totals"];
    assert!(close(&totals["agent_priced_usd"], 0.5), "{detail}");
    assert_eq!(totals["agent_priced_models"], json!(["mystery-model"]));

    let amounts = wait_run(&d, "5", 1);
    assert_eq!(amounts["cost_status"], "unmeasured", "{amounts}");
    assert_eq!(amounts["unmeasured_cause"], "amounts_only");
    assert_eq!(amounts["unmeasured_units"], json!(["USD"]));
    assert_eq!(amounts["vendor_amounts"], json!([]));
}
