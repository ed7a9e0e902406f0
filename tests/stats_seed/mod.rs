//! The run history both stats test files read: written through the store's own write API
//! (`WriterHandle::record_run`), mixed priced, partial, unpriced and unmeasured runs over two
//! UTC days, plus a recorded CI result and a run outside the range, which the report leaves out.

// Each test binary uses a subset of the helpers.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use sortie::clock::ManualClock;
use sortie::domain::RunStatus;
use sortie::store::{RunRecord, Store};

/// 2026-03-26T14:00:00Z
pub const T0: i64 = 1_774_533_600_000;
pub const SINCE: &str = "2026-03-26";
pub const UNTIL: &str = "2026-03-28T00:00:00Z";

fn base(issue: &str, status: RunStatus, completed_ms: i64, duration_s: i64) -> RunRecord {
    RunRecord {
        issue_id: issue.into(),
        identifier: format!("MT-{issue}"),
        attempt: 1,
        started_at_ms: completed_ms - duration_s * 1000,
        completed_at_ms: completed_ms,
        workflow_file: "WORKFLOW.md".into(),
        agent_kind: "claude-code".into(),
        rule_name: "implement".into(),
        template: "default".into(),
        tokens_measured: true,
        usage_completeness: "complete".into(),
        usage_provenance: Some(json!([{"source": "output", "strategy": "live"}])),
        vendor_amounts: Some(json!([])),
        ..RunRecord::new(status)
    }
}

fn part(model: &str, t: [i64; 5], cost: Option<f64>, status: &str) -> serde_json::Value {
    json!({
        "model": model,
        "tokens": {"input_tokens": t[0], "output_tokens": t[1], "total_tokens": t[2],
                   "cache_read_tokens": t[3], "cache_write_tokens": t[4]},
        "uncached_tokens": t[2] - t[3],
        "estimated_cost_usd": cost,
        "cost_status": status,
        "unrated_classes": [],
        "price_source": "embedded",
    })
}

fn tokens(mut r: RunRecord, t: [i64; 5]) -> RunRecord {
    r.input_tokens = t[0];
    r.output_tokens = t[1];
    r.total_tokens = t[2];
    r.cache_read_tokens = t[3];
    r.cache_write_tokens = t[4];
    r
}

/// The runs, in the order they are recorded.
pub fn runs() -> Vec<RunRecord> {
    let a_tokens = [1000, 200, 1200, 500, 40];
    let mut a = tokens(base("1", RunStatus::Succeeded, T0, 600), a_tokens);
    a.turns_completed = 4;
    a.trigger = Some(String::new());
    a.dispatch_id = Some("AAAA".into());
    a.estimated_cost_usd = Some(1.5);
    a.cost_status = "estimated".into();
    a.model_usage = Some(json!([part("model-a", a_tokens, Some(1.5), "estimated")]));
    a.skills = Some(json!([{"skill": "plan"}, {"skill": "work", "tool_error": true}]));
    a.review_metadata =
        Some(json!({"final_verdict": "pass", "total_iterations": 2, "cap_reached": false}));

    let mut b = tokens(
        base("2", RunStatus::Succeeded, T0 + 3_600_000, 1200),
        [2000, 400, 2400, 0, 0],
    );
    b.turns_completed = 6;
    b.usage_completeness = "lower_bound".into();
    b.unaccounted_turns = 1;
    b.trigger = Some("continuation".into());
    b.dispatch_id = Some("BBBB".into());
    b.estimated_cost_usd = Some(0.5);
    b.cost_status = "partial".into();
    b.model_usage = Some(json!([
        part("model-a", [1500, 300, 1800, 0, 0], Some(0.3), "estimated"),
        part("model-b", [500, 100, 600, 0, 0], Some(0.2), "partial"),
    ]));
    b.review_metadata =
        Some(json!({"final_verdict": "pass", "total_iterations": 3, "cap_reached": true}));

    let mut c = tokens(
        base("3", RunStatus::Failed, T0 + 86_400_000, 300),
        [500, 100, 600, 0, 0],
    );
    c.turns_completed = 2;
    c.reported_model = "model-c".into();
    c.trigger = Some("error".into());
    c.dispatch_id = Some("CCCC".into());
    c.cost_status = "unpriced".into();
    c.model_usage = Some(json!([]));

    let mut d = base("3", RunStatus::Cancelled, T0 + 7_200_000, 0);
    d.tokens_measured = false;
    d.usage_completeness = "unmeasured".into();
    d.unmeasured_cause = Some("ended_early".into());
    d.usage_provenance = Some(json!([]));
    d.cost_status = "unmeasured".into();

    let mut ci = base("4", RunStatus::CiFailed, T0 + 60_000, 10);
    ci.agent_kind = String::new();
    ci.trigger = Some(String::new());
    ci.dispatch_id = Some(String::new());

    let mut old = tokens(
        base("5", RunStatus::Succeeded, T0 - 6 * 86_400_000, 100),
        [10, 10, 20, 0, 0],
    );
    old.estimated_cost_usd = Some(9.0);
    old.cost_status = "estimated".into();
    old.dispatch_id = Some("OLDD".into());
    vec![a, b, c, d, ci, old]
}

/// Writes [`runs`] into a new database at `db` and closes it.
pub fn seed(db: &Path) {
    let store = Store::open(db, Arc::new(ManualClock::new(T0))).unwrap();
    for r in runs() {
        store.writer().record_run(r, Vec::new()).unwrap();
    }
    store.close().unwrap();
}

/// `report` with `generated_at` removed (the one member the route and the command may differ in).
pub fn without_generated_at(mut report: serde_json::Value) -> serde_json::Value {
    report.as_object_mut().map(|m| m.remove("generated_at"));
    report
}

/// The figures [`runs`] must produce over [`SINCE`]..[`UNTIL`].
pub fn assert_figures(r: &serde_json::Value) {
    assert_eq!(r["since"], "2026-03-26T00:00:00Z");
    assert_eq!(r["until"], "2026-03-28T00:00:00Z");
    assert_eq!(r["schema_tier"], "full");
    assert_eq!(r["warnings"], json!([]));
    let s = &r["summary"];
    assert_eq!(
        (
            &s["runs"],
            &s["issues"],
            &s["succeeded"],
            &s["failed"],
            &s["stopped"],
            &s["cancelled"]
        ),
        (
            &json!(4),
            &json!(3),
            &json!(2),
            &json!(1),
            &json!(0),
            &json!(1)
        ),
        "{s}"
    );
    assert_eq!(s["success_rate"], 0.5);
    assert_eq!(
        s["duration_seconds"],
        json!({"p50": 600.0, "p95": 1200.0, "mean": 700.0, "samples": 3})
    );
    assert_eq!(s["mean_turns_succeeded"], 5.0);
    assert_eq!(
        s["tokens"],
        json!({"input": 3500, "output": 700, "total": 4200, "cache_read": 500, "cache_write": 40, "uncached": 3700})
    );
    assert_eq!(s["cost_usd"], 2.0);
    assert_eq!(s["cost_per_succeeded_run_usd"], 1.0);
    for (k, v) in [
        ("zero_duration_runs", 1),
        ("duration_excluded_runs", 1),
        ("cost_unpriced_runs", 1),
        ("cost_partial_runs", 1),
        ("tokens_unmeasured_runs", 1),
        ("tokens_lower_bound_runs", 1),
    ] {
        assert_eq!(s[k], v, "{k}");
    }
    assert_eq!(s["tokens_lower_bound"], true);
    assert_eq!(s["cost_lower_bound"], true);
    assert_eq!(s["agent_priced_usd"], json!(null));
    assert_eq!(s["unmeasured_cause"], "ended_early");

    let spend = &r["spend"];
    assert_eq!(spend["period"], "day");
    let b = &spend["buckets"];
    assert_eq!(b[0]["start"], "2026-03-26T00:00:00Z");
    assert_eq!((&b[0]["runs"], &b[0]["cost_usd"]), (&json!(3), &json!(2.0)));
    assert_eq!(b[0]["cost_lower_bound"], true);
    assert_eq!(b[1]["start"], "2026-03-27T00:00:00Z");
    assert_eq!(
        (&b[1]["runs"], &b[1]["cost_usd"]),
        (&json!(1), &json!(null))
    );
    assert_eq!(b[1]["cost_unpriced_runs"], 1);
    assert_eq!(b[1]["cost_lower_bound"], false);

    let names = |k: &str| -> Vec<(String, u64)> {
        r[k].as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["name"].as_str().unwrap().to_string(),
                    g["runs"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let pairs = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    };
    assert_eq!(
        names("by_status"),
        pairs(&[("succeeded", 2), ("cancelled", 1), ("failed", 1)])
    );
    assert_eq!(names("by_adapter"), pairs(&[("claude-code", 4)]));
    assert_eq!(names("by_rule"), pairs(&[("implement", 4)]));
    assert_eq!(names("by_template"), pairs(&[("default", 4)]));
    assert_eq!(
        names("by_model"),
        pairs(&[
            ("model-a", 2),
            ("<none>", 1),
            ("model-b", 1),
            ("model-c", 1)
        ])
    );
    assert_eq!(
        names("by_trigger"),
        pairs(&[
            ("<none>", 1),
            ("<unknown>", 1),
            ("continuation", 1),
            ("error", 1)
        ])
    );
    assert_eq!(
        names("by_origin"),
        pairs(&[("retry", 2), ("<unknown>", 1), ("poll_tick", 1)])
    );
    assert_eq!(
        names("by_provenance"),
        pairs(&[("output:live", 3), ("<none>", 1)])
    );
    assert_eq!(r["by_chain"], json!([]));
    assert_eq!(r["chain_funnels"], json!([]));

    let model_a = &r["by_model"][0];
    assert_eq!(model_a["cost_usd"], 1.8);
    assert_eq!(model_a["tokens"]["total"], 3000);
    assert_eq!(model_a["share"], 0.5);
    assert_eq!(model_a["cost_per_succeeded_run_usd"], 0.9);
    let model_b = &r["by_model"][2];
    assert_eq!(
        (&model_b["cost_partial_runs"], &model_b["cost_lower_bound"]),
        (&json!(1), &json!(true))
    );
    let unmeasured = &r["by_provenance"][1];
    assert_eq!(unmeasured["tokens"], json!(null));
    assert_eq!(unmeasured["tokens_lower_bound"], false);
    assert_eq!(unmeasured["cost_usd"], json!(null));
    assert_eq!(unmeasured["unmeasured_cause"], "ended_early");
    assert_eq!(unmeasured["duration_seconds"]["samples"], 0);
    let cancelled = &r["by_status"][1];
    assert_eq!(cancelled["share"], 0.25);
    assert_eq!(cancelled["success_rate"], 0.0);

    assert_eq!(
        r["skill_calls"],
        json!({"unrecorded_runs": 3, "by_skill": [
            {"name": "plan", "calls": 1, "runs": 1, "tool_errors": 0},
            {"name": "work", "calls": 1, "runs": 1, "tool_errors": 1},
        ]})
    );
    assert_eq!(
        r["self_review"],
        json!({"runs_with_metadata": 2, "by_final_verdict": [{"name": "pass", "runs": 2}],
               "cap_reached_runs": 1, "mean_iterations": 2.5, "unparsed_runs": 0})
    );
}
