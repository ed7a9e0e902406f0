//! `GET /api/v1/prices` on the real binary: the built-in table in force by default, the
//! `token_rates` layers over it, an operator's own table replacing it, history rows, and
//! `token_rates` edits showing after the reload. The shared download is off in every test here
//! (`common::sortie_command` sets `SORTIE_PRICE_TABLE_FETCH=off`).

mod common;

use std::time::Duration;

use common::{Daemon, Project};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// A workflow whose agent block configures `claude-sonnet-4-5`, with `extra` front matter.
fn project(extra: &str) -> Project {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow(
        "",
        &format!("claude-code:\n  model: claude-sonnet-4-5\n{extra}"),
    );
    p
}

fn prices(d: &Daemon) -> Value {
    let r = d.get("/api/v1/prices");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn row<'a>(doc: &'a Value, kind: &str, model: &str) -> &'a Value {
    doc["models"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .find(|r| r["agent_kind"] == kind && r["model"] == model)
        })
        .unwrap_or_else(|| panic!("no {kind}/{model} row: {doc}"))
}

#[test]
fn the_built_in_table_prices_a_known_model_by_default() {
    let p = project("");
    let d = p.start();
    let doc = prices(&d);
    assert_eq!(doc["table_in_force"]["layer"], "embedded", "{doc}");
    assert!(doc["table_in_force"]["age_days"].as_u64().is_some());
    assert_eq!(doc["operator"], Value::Null);
    let e = &doc["embedded"];
    assert_eq!(
        (e["status"].as_str(), e["in_force"].as_bool()),
        (Some("loaded"), Some(true))
    );
    assert!(
        e["version"].as_str().unwrap().starts_with("litellm-"),
        "{e}"
    );
    assert!(e["models"].as_u64().unwrap() > 100);
    let f = &doc["fetched"];
    assert_eq!(f["status"], "off");
    assert_eq!(f["off_by"], "SORTIE_PRICE_TABLE_FETCH");
    assert_eq!(f["version"], Value::Null);
    assert_eq!(
        f["address"],
        "https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json"
    );
    assert_eq!(
        doc["token_rates"],
        json!({"kind_entries": 0, "model_entries": 0, "version": null})
    );
    let r = row(&doc, "claude-code", "claude-sonnet-4-5");
    assert_eq!(r["layer"], "embedded");
    assert_eq!(r["table_key"], "claude-sonnet-4-5");
    assert_eq!(r["entry_key"], Value::Null);
    assert_eq!(
        r["input"],
        json!({"per_mtok": 3.0, "layer": "embedded", "from_input": false})
    );
    assert_eq!(r["output"]["per_mtok"], 15.0);
    assert_eq!(r["cache_read"]["per_mtok"], 0.3);
    assert_eq!(r["cost_status"], "estimated");
    assert_eq!(r["unrated_classes"], json!([]));
    assert_eq!(
        (r["runs"].as_i64(), &r["last_used_at"]),
        (Some(0), &Value::Null)
    );
    assert_eq!(d.state()["config"]["token_rates"], Value::Null);
    let post = d.post("/api/v1/prices");
    assert_eq!(post.status, 405);
}

#[test]
fn a_kind_entry_beats_the_table_and_prices_its_unset_cache_rates_at_the_input_rate() {
    let p = project("token_rates:\n  claude-code: {input_per_mtok: 2, output_per_mtok: 10}\n");
    let d = p.start();
    let doc = prices(&d);
    let r = row(&doc, "claude-code", "claude-sonnet-4-5");
    assert_eq!(r["layer"], "kind_entry", "{r}");
    assert_eq!(r["entry_key"], "claude-code");
    assert_eq!(r["table_key"], "claude-sonnet-4-5");
    assert_eq!(
        r["output"],
        json!({"per_mtok": 10.0, "layer": "kind_entry", "from_input": false})
    );
    assert_eq!(
        r["cache_read"],
        json!({"per_mtok": 2.0, "layer": "kind_entry", "from_input": true})
    );
    assert_eq!(r["cache_write"]["from_input"], true);
    assert_eq!(r["cost_status"], "estimated");
    assert_eq!(doc["token_rates"]["kind_entries"], 1);
    assert!(
        doc["token_rates"]["version"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let cfg = &d.state()["config"]["token_rates"];
    assert_eq!(
        cfg["claude-code"],
        json!({"input_per_mtok": 2.0, "output_per_mtok": 10.0, "cache_read_per_mtok": null,
               "cache_write_per_mtok": null, "complete": true, "per_kind": true}),
        "{cfg}"
    );
}

#[test]
fn a_model_entry_takes_its_unset_classes_from_the_table() {
    let p = project("token_rates:\n  claude-sonnet-4-5: {output_per_mtok: 20}\n");
    let d = p.start();
    let doc = prices(&d);
    let r = row(&doc, "claude-code", "claude-sonnet-4-5");
    assert_eq!(r["layer"], "model_entry", "{r}");
    assert_eq!(r["entry_key"], "claude-sonnet-4-5");
    assert_eq!(
        r["output"],
        json!({"per_mtok": 20.0, "layer": "model_entry", "from_input": false})
    );
    assert_eq!(
        r["input"],
        json!({"per_mtok": 3.0, "layer": "embedded", "from_input": false})
    );
    assert_eq!(r["cache_write"]["layer"], "embedded");
    assert_eq!(doc["token_rates"]["model_entries"], 1);
    let cfg = &d.state()["config"]["token_rates"]["claude-sonnet-4-5"];
    assert_eq!(
        (cfg["complete"].as_bool(), cfg["per_kind"].as_bool()),
        (Some(false), Some(false))
    );
}

#[test]
fn a_replace_file_table_replaces_the_lower_tables() {
    let p = project("price_table:\n  replace_file: mine.json\n");
    p.write(
        "mine.json",
        r#"{"claude-sonnet-4-5": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#,
    );
    let d = p.start();
    let doc = prices(&d);
    assert_eq!(doc["table_in_force"]["layer"], "operator_table", "{doc}");
    let op = &doc["operator"];
    assert_eq!(
        (op["status"].as_str(), op["in_force"].as_bool()),
        (Some("loaded"), Some(true))
    );
    assert_eq!(op["file"], "mine.json");
    assert_eq!(op["models"], 1);
    assert!(op["version"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(doc["embedded"]["in_force"], false);
    assert_eq!(doc["embedded"]["status"], "loaded");
    let r = row(&doc, "claude-code", "claude-sonnet-4-5");
    assert_eq!(r["layer"], "operator_table");
    assert_eq!(r["input"]["per_mtok"], 1.0);
    assert_eq!(r["cache_read"]["per_mtok"], Value::Null);
    assert_eq!(r["cost_status"], "partial");
    assert_eq!(r["unrated_classes"], json!(["cache_read", "cache_write"]));
}

#[test]
fn a_replace_file_that_breaks_on_reload_keeps_the_previous_table_and_shows_failing() {
    let p = project("price_table:\n  replace_file: mine.json\n");
    p.write(
        "mine.json",
        r#"{"claude-sonnet-4-5": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}"#,
    );
    let d = p.start();
    let first = prices(&d)["operator"]["as_of"].clone();
    p.write("mine.json", "{ not json");
    // A write of the workflow file makes the watcher reload at once.
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    std::fs::write(p.workflow(), wf + "\n").unwrap();
    let doc = wait_prices(&d, "the failed load shown", |doc| {
        doc["operator"]["status"] == "failing"
    });
    let op = &doc["operator"];
    assert!(op["in_force"].as_bool().unwrap());
    assert_eq!(op["as_of"], first);
    let err = op["error"].as_str().unwrap();
    assert!(err.contains("price_table.replace_file: mine.json"), "{err}");
    assert!(!err.contains(&p.path("").display().to_string()), "{err}");
    assert_eq!(
        row(&doc, "claude-code", "claude-sonnet-4-5")["input"]["per_mtok"],
        1.0
    );
}

fn wait_prices(d: &Daemon, what: &str, mut cond: impl FnMut(&Value) -> bool) -> Value {
    common::wait_for(what, WAIT, || {
        let doc = prices(d);
        cond(&doc).then_some(doc)
    })
}

#[test]
fn a_token_rates_edit_shows_on_the_next_request_after_the_reload_and_an_invalid_rate_keeps_its_previous_value()
 {
    let p = project("token_rates:\n  claude-code: {input_per_mtok: 2, output_per_mtok: 10}\n");
    let d = p.start();
    assert_eq!(
        row(&prices(&d), "claude-code", "claude-sonnet-4-5")["output"]["per_mtok"],
        10.0
    );
    p.fake_agent_workflow(
        "",
        "claude-code:\n  model: claude-sonnet-4-5\ntoken_rates:\n  claude-code: {input_per_mtok: cheap, output_per_mtok: 12}\n",
    );
    let doc = wait_prices(&d, "the edited output rate", |doc| {
        row(doc, "claude-code", "claude-sonnet-4-5")["output"]["per_mtok"] == 12.0
    });
    let r = row(&doc, "claude-code", "claude-sonnet-4-5");
    assert_eq!(
        r["input"]["per_mtok"], 2.0,
        "the invalid rate keeps the previous one"
    );
    let cfg = &d.state()["config"]["token_rates"]["claude-code"];
    assert_eq!(
        (
            cfg["input_per_mtok"].as_f64(),
            cfg["output_per_mtok"].as_f64()
        ),
        (Some(2.0), Some(12.0))
    );
}

#[test]
fn a_run_that_spent_tokens_lists_its_model_first_with_its_use() {
    let p = Project::new();
    p.issues(
        json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do", "priority": 1}]),
    );
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 100, "output_tokens": 20, "model": "gpt-5"}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "claude-code:\n  model: claude-sonnet-4-5\n");
    let d = p.start();
    let doc = wait_prices(&d, "the run's model listed", |doc| {
        doc["models"]
            .as_array()
            .is_some_and(|m| m.iter().any(|r| r["model"] == "gpt-5"))
    });
    let models = doc["models"].as_array().unwrap();
    assert_eq!(models[0]["model"], "gpt-5", "{doc}");
    assert_eq!(models[0]["runs"], 1);
    assert!(models[0]["last_used_at"].as_str().is_some());
    assert_eq!(models[0]["layer"], "embedded");
    assert_eq!(models[1]["model"], "claude-sonnet-4-5");
    assert_eq!(models[1]["runs"], 0);
}

#[test]
fn a_history_read_that_fails_is_503() {
    let p = project("");
    let d = p.start();
    assert_eq!(d.get("/api/v1/prices").status, 200);
    let c = rusqlite::Connection::open(p.db()).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.execute_batch("ALTER TABLE run_history RENAME TO run_history_gone")
        .unwrap();
    let r = d.get("/api/v1/prices");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "history_unavailable");
}
