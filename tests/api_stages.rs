//! Rules and stage chains as the API serves them, from a hand-built snapshot over a real store:
//! a running row on a chain's second stage (its position and lineage), an issue between stages
//! held `stage_hop_unconfirmed` (every member of the row), the `active[]` order and statuses,
//! the per-issue response of an issue between stages, `stage_chain` and `last_stage` on run
//! history, and strict OpenAPI validation of each document.

mod common;

use common::app::app_state;
use common::schema_check::validate;
use common::stages::{hop_run, snapshot};
use serde_json::{Value, json};
use sortie::domain::RunStatus;
use sortie::http::openapi;
use sortie::store::RunRecord;

fn state_json(app: &sortie::http::AppState) -> Value {
    let body = app.state_cache.current(app);
    serde_json::from_slice(&body.json).unwrap_or_else(|e| panic!("state body: {e}"))
}

fn strictly_valid(doc: &Value, path: &str, v: &Value) {
    let schema = openapi::response_schema(doc, path, "get", "200")
        .unwrap_or_else(|| panic!("no 200 schema for {path}"));
    validate(schema, v, doc).unwrap_or_else(|e| panic!("{path}: {e}\n{v:#}"));
}

fn position(chain: &[&str], current: &str, hops: u32) -> Value {
    json!({"chain": chain, "current": current, "hop_count": hops, "hop_ceiling": 10})
}

#[test]
fn a_running_row_on_a_second_stage_serves_its_position_and_lineage() {
    let (_dir, app) = app_state(snapshot());
    let v = state_json(&app);
    let r = &v["running"][0];
    assert_eq!(r["rule_name"], "implement");
    assert_eq!(
        r["stage_position"],
        position(&["specify", "implement", "review"], "implement", 1)
    );
    assert_eq!(
        r["stage_lineage"],
        json!({"chain_id": "7q2m4x9b1k5d8f3h6j0n2p4rst", "previous": "specify", "previous_outcome": "succeeded"})
    );
    assert_eq!(r["configured_model"], "claude-sonnet-4-5");
    assert_eq!(r["agent_kind"], sortie::registry::DEFAULT_AGENT_KIND);
    // The running row names its stage because it has a position.
    assert_eq!(r["status_text"], "Turn 7 of implement");
    assert_eq!(r["status_text_full"], "Running on stage implement, turn 7.");

    let retry = &v["retrying"][0];
    assert_eq!(retry["rule_name"], "implement");
    assert_eq!(retry["stage_lineage"]["chain_id"], "c-retry");
    assert_eq!(retry["stage_position"]["current"], "implement");

    // A park on a rule on no chain: a rule name and a null position.
    let p = &v["parked"][0];
    assert_eq!(p["rule_name"], "bugfix");
    assert_eq!(p["stage_position"], Value::Null);
    assert!(p.get("stage_lineage").is_none(), "parks carry no lineage");
    strictly_valid(&openapi::document(), "/api/v1/state", &v);
}

#[test]
fn a_between_stages_row_serves_every_member_with_its_hold() {
    let (_dir, app) = app_state(snapshot());
    let v = state_json(&app);
    assert_eq!(v["counts"]["between_stages"], 2);
    let rows = v["between_stages"]
        .as_array()
        .unwrap_or_else(|| panic!("between_stages is a list"));
    let ids: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["issue_identifier"].as_str())
        .collect();
    assert_eq!(ids, vec!["MT-655", "MT-660"], "sorted by identifier");
    let got = &rows[0];
    let want = json!({
        "issue_id": "stu901",
        "issue_identifier": "MT-655",
        "issue_title": "Plan the export schema",
        "issue_url": "https://tracker.example.com/browse/MT-655",
        "issue_type": "Story",
        "issue_labels": ["export", "stage-implement"],
        "state": "In Progress",
        "source_rule": "specify",
        "target_rule": "implement",
        "target_label": "stage-implement",
        "hopped_at": "2026-03-26T14:28:15.000Z",
        "dispatched_at": "2026-03-26T14:03:41.000Z",
        "rule_name": "implement",
        "stage_position": position(&["specify", "implement", "review"], "implement", 1),
        "agent_kind": sortie::registry::DEFAULT_AGENT_KIND,
        "configured_model": "claude-sonnet-4-5",
        "hold": {
            "reason": "stage_hop_unconfirmed",
            "held_since": "2026-03-26T14:29:00.000Z",
            "blockers": null,
            "slot": null,
            "resets_at": null,
            "reason_text": "Stage label stage-implement not seen on the issue yet",
            "release_text": "Released when a poll reads the issue with the label stage-implement, or finds it outside the active states.",
        },
        "status_text": "Between stages: specify to implement",
        "status_text_full": "Moved from stage specify to stage implement, and Sortie added `stage-implement`; implement starts when a poll tick reads that label on the issue.",
    });
    assert_eq!(got, &want);
    // Member order as the reference lists it, read on the served bytes.
    let text = String::from_utf8_lossy(&app.state_cache.current(&app).json).into_owned();
    let from = text.find("\"source_rule\":\"specify\"").unwrap_or(0);
    let order = [
        "\"source_rule\"",
        "\"target_rule\"",
        "\"target_label\"",
        "\"hopped_at\"",
        "\"dispatched_at\"",
        "\"rule_name\"",
        "\"stage_position\"",
        "\"agent_kind\"",
        "\"configured_model\"",
        "\"hold\"",
        "\"status_text\"",
    ];
    let mut last = from;
    for k in order {
        let pos = text[last..]
            .find(k)
            .unwrap_or_else(|| panic!("{k} missing or out of order"));
        last += pos;
    }
    assert_eq!(rows[1]["hold"], Value::Null);
    strictly_valid(&openapi::document(), "/api/v1/state", &v);
}

#[test]
fn active_lists_each_issue_once_by_place_with_its_deciding_status() {
    let (_dir, app) = app_state(snapshot());
    let v = state_json(&app);
    let active: Vec<(String, String)> = v["active"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["issue_identifier"].as_str().unwrap_or("").to_string(),
                        e["status"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // MT-660 is placed by its hop's dispatch (13:20), the earliest, and is parked by precedence.
    assert_eq!(
        active,
        vec![
            ("MT-660".to_string(), "parked".to_string()),
            ("MT-649".to_string(), "running".to_string()),
            ("MT-650".to_string(), "retrying".to_string()),
            ("MT-655".to_string(), "between_stages".to_string()),
        ]
    );
    let between = &v["active"][3];
    assert_eq!(between["rule_name"], "implement");
    assert_eq!(between["configured_model"], "claude-sonnet-4-5");
    assert_eq!(between["dispatched_at"], "2026-03-26T14:03:41.000Z");
    assert_eq!(
        between["status_text"],
        "Between stages: specify to implement"
    );
    assert_eq!(
        between["stage_position"],
        position(&["specify", "implement", "review"], "implement", 1)
    );
    assert!(between.get("reaction_kind").is_none());
    assert_eq!(v["active"][0]["rule_name"], "bugfix");
    assert_eq!(v["active"][0]["stage_position"], Value::Null);
    assert_eq!(v["active"][0]["dispatched_at"], "2026-03-26T13:50:00.000Z");
}

fn record(app: &sortie::http::AppState, r: RunRecord) {
    app.store
        .writer()
        .record_run(r, Vec::new())
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_issue_between_stages_answers_with_its_row_and_next_stage() {
    let (_dir, app) = app_state(snapshot());
    record(&app, hop_run());
    let v = sortie::http::issue_detail::detail(&app, "MT-655")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .body;
    assert_eq!(v["status"], "between_stages");
    assert_eq!(v["status_text"], "Between stages: specify to implement");
    for k in [
        "running",
        "retry",
        "budget_exhausted",
        "parked",
        "workspace",
    ] {
        assert_eq!(v[k], Value::Null, "{k}");
    }
    assert_eq!(v["pending_reactions"], json!([]));
    assert_eq!(
        v["attempts"],
        json!({"restart_count": 0, "current_retry_attempt": 0})
    );
    assert_eq!(
        v["issue"],
        json!({"title": "Plan the export schema", "url": "https://tracker.example.com/browse/MT-655",
               "issue_type": "Story", "labels": ["export", "stage-implement"], "state": "In Progress"})
    );
    assert_eq!(
        v["between_stages"]["hold"]["reason"],
        "stage_hop_unconfirmed"
    );
    assert_eq!(
        v["next_outcomes"],
        json!([{"condition": "When a poll tick reads `stage-implement` on the issue", "text": "Stage implement starts in a new session."}])
    );
    let run = &v["history"]["runs"][0];
    assert_eq!(run["stage_target"], "implement");
    assert_eq!(run["stage_result"], "advanced");
    assert_eq!(
        run["stage_chain"],
        json!(["specify", "implement", "review"])
    );
    assert_eq!(
        v["history"]["last_stage"],
        json!({"chain": ["specify", "implement", "review"], "rule": "specify"})
    );
    assert_eq!(v["history"]["hops"][0]["target_rule"], "implement");
    let doc = openapi::document();
    strictly_valid(&doc, "/api/v1/{identifier}", &v);

    // A parked issue that is between stages too: parked decides, the row is still served.
    let v = sortie::http::issue_detail::detail(&app, "MT-660")
        .unwrap_or_else(|e| panic!("{e:?}"))
        .body;
    assert_eq!(v["status"], "parked");
    assert_eq!(v["between_stages"]["issue_identifier"], "MT-660");
    assert_eq!(v["between_stages"]["hold"], Value::Null);
    strictly_valid(&doc, "/api/v1/{identifier}", &v);
}

#[test]
fn runs_serve_the_chain_of_their_rule_and_the_rule_and_stage_filters_select() {
    let (_dir, app) = app_state(snapshot());
    record(&app, hop_run());
    let plain = RunRecord {
        issue_id: "zz1".into(),
        identifier: "MT-700".into(),
        attempt: 1,
        started_at_ms: 1_000,
        completed_at_ms: 2_000,
        ..RunRecord::new(RunStatus::Failed)
    };
    record(&app, plain);
    let list = |q: &str| {
        sortie::http::runs::list_runs(&app, &format!("/api/v1/runs{q}"))
            .unwrap_or_else(|e| panic!("{q}: {e:?}"))
            .body
    };
    let all = list("");
    let idents: Vec<&str> = all["runs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["issue_identifier"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(idents, vec!["MT-700", "MT-655"]);
    assert_eq!(all["runs"][0]["stage_chain"], Value::Null, "no rule");
    assert!(all["runs"][0].get("rule_name").is_none());
    assert_eq!(
        all["runs"][1]["stage_chain"],
        json!(["specify", "implement", "review"])
    );
    assert_eq!(all["runs"][1]["chain_id"], "4k8d2m6x0b3f7h1j5n9p2r6tsv");
    assert!(all["runs"][1].get("stage_previous").is_none());
    let one = |q: &str| {
        let v = list(q);
        v["runs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["issue_identifier"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(one("?rule=specify"), vec!["MT-655"]);
    assert_eq!(one("?rule=%3Cnone%3E"), vec!["MT-700"]);
    assert_eq!(one("?rule="), vec!["MT-700", "MT-655"], "empty is absent");
    assert_eq!(one("?stage=implement"), vec!["MT-655"]);
    assert!(one("?stage=specify").is_empty(), "stage names the target");
    strictly_valid(&openapi::document(), "/api/v1/runs", &all);
}
