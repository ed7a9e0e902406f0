//! Stage chain observability through the real binary, the file tracker and the fake agent: a
//! two-stage chain (specify → implement) whose funnel and `by_chain` entry `GET /api/v1/stats`
//! and `sortie stats` serve while the second stage runs (the live stage pass a separate
//! process reads from the database) and after it ends, the `stage.advanced` event on the
//! hopping run's events (route and event stream), and the dispatch-rule match counter.

mod common;

use std::time::Duration;

use common::http::open_stream;
use common::{Project, wait_for};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(60);

fn project(gate: &std::path::Path) -> Project {
    let p = Project::new();
    p.write("prompts/specify.md", "SPECIFY {{ .issue.identifier }}\n");
    p.write(
        "prompts/implement.md",
        "IMPLEMENT {{ .issue.identifier }}\n",
    );
    p.fake_agent_workflow(
        "",
        r#"dispatch:
  rules:
    - name: specify
      stage: stage-specify
      next: implement
      template: ./prompts/specify.md
    - name: implement
      stage: stage-implement
      template: ./prompts/implement.md
"#,
    );
    p.issues(json!([{
        "id": "1", "identifier": "ST-1", "title": "Chained work", "state": "To Do",
        "labels": ["stage-specify"]
    }]));
    // The implement stage runs until the test opens the gate; specify runs the default script.
    p.scenario(
        "default",
        &[
            json!({"init": {}, "prompt_contains": "IMPLEMENT"}),
            json!({"wait_file": gate.display().to_string(), "prompt_contains": "IMPLEMENT"}),
            json!({"result": {"subtype": "success", "text": "done"}, "prompt_contains": "IMPLEMENT"}),
        ],
    );
    p
}

/// `sortie stats --format json` on the project's workflow, with no daemon involved.
fn cli_stats(p: &Project) -> Value {
    let out = common::sortie_command()
        .current_dir(p.path(""))
        .args(["stats", "--format", "json"])
        .arg(p.workflow())
        .output()
        .unwrap_or_else(|e| panic!("sortie stats: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stats json: {e}"))
}

fn stage(rule: &str, figures: [u64; 7]) -> Value {
    let [
        passes,
        succeeded,
        advanced,
        not_advanced,
        running,
        queued,
        budget_held,
    ] = figures;
    json!({"rule": rule, "passes": passes, "succeeded": succeeded, "advanced": advanced,
           "not_advanced": not_advanced, "running": running, "queued": queued,
           "budget_held": budget_held})
}

fn funnel(specify: [u64; 7], implement: [u64; 7]) -> Value {
    json!([{"chain": ["specify", "implement"],
            "stages": [stage("specify", specify), stage("implement", implement)]}])
}

#[test]
fn a_two_stage_chain_serves_its_funnel_its_stage_event_and_the_rule_counter() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let gate = tmp.path().join("go");
    let p = project(&gate);
    let d = p.start();
    let s = d.wait_state("the implement stage runs", LONG, |s| {
        s["running"][0]["rule_name"] == "implement"
    });
    let chain_id = s["running"][0]["stage_lineage"]["chain_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(chain_id.len(), 26, "{s}");

    // While implement runs: the route and the command serve the same funnel, the running pass
    // read from the live stage passes the daemon keeps in the database.
    let running = funnel([1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0]);
    let mut from_route = Value::Null;
    d.wait_until("the route's funnel shows the running pass", LONG, || {
        from_route = d.get("/api/v1/stats").json();
        from_route["chain_funnels"] == running
    });
    wait_for("the command's funnel shows the running pass", LONG, || {
        (cli_stats(&p)["chain_funnels"] == running).then_some(())
    });
    // The body the OpenAPI document describes, strictly.
    let doc = sortie::http::openapi::document();
    let schema = sortie::http::openapi::response_schema(&doc, "/api/v1/stats", "get", "200")
        .unwrap_or_else(|| panic!("no stats schema"));
    common::schema_check::validate(schema, &from_route, &doc)
        .unwrap_or_else(|e| panic!("stats body: {e}\n{from_route:#}"));
    let by_chain = &from_route["by_chain"];
    assert_eq!(by_chain.as_array().map(Vec::len), Some(1), "{by_chain}");
    let entry = &by_chain[0];
    assert_eq!(entry["name"], chain_id.as_str());
    assert_eq!(entry["issue_identifier"], "ST-1");
    assert_eq!(entry["rules"], json!(["specify"]));
    assert_eq!(
        (entry["hops_made"].clone(), entry["hops_not_made"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(
        (entry["runs"].clone(), entry["succeeded"].clone()),
        (json!(1), json!(1))
    );

    // The hop is an event of the run that made it: on the run events route and the stream.
    let runs = d.get("/api/v1/runs").json();
    let specify = runs["runs"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["rule_name"] == "specify"))
        .cloned()
        .unwrap_or_else(|| panic!("no specify run: {runs}"));
    let dispatch = specify["dispatch_id"].as_str().unwrap_or_default();
    let events = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    let last = events["events"]
        .as_array()
        .and_then(|e| e.last())
        .cloned()
        .unwrap_or_else(|| panic!("no events: {events}"));
    assert_eq!(last["event"], "stage.advanced", "{events}");
    for (k, want) in [
        ("issue_identifier", json!("ST-1")),
        ("source_rule", json!("specify")),
        ("target_rule", json!("implement")),
        ("target_label", json!("stage-implement")),
        ("chain_id", json!(chain_id)),
        ("hop_count", json!(1)),
        ("hop_ceiling", json!(10)),
        ("result", json!("advanced")),
    ] {
        assert_eq!(last[k], want, "{k}: {last}");
    }
    assert!(last.get("reason").is_none(), "{last}");
    assert_eq!(
        last["text"],
        "Moved from stage specify to stage implement, and Sortie added `stage-implement`."
    );
    let mut st = open_stream(d.port, &format!("/api/v1/events?run={dispatch}"), &[]);
    let frames = st.until(LONG, |f| {
        f.event == "agent_event" && f.data["event"] == "stage.advanced"
    });
    let streamed = frames.last().map(|f| f.data.clone()).unwrap_or_default();
    assert_eq!(streamed["event"], "stage.advanced", "{frames:?}");
    assert_eq!(streamed["target_rule"], "implement");

    // Each poll-tick dispatch counted its rule.
    let metrics = d.get("/metrics").body;
    for rule in ["specify", "implement"] {
        let line = format!("sortie_dispatch_rule_match_total{{layer=\"rule\",rule=\"{rule}\"}} 1");
        assert!(metrics.lines().any(|l| l == line), "{line}\n{metrics}");
    }

    // Once implement ends the chain hands off: the pass leaves the live table.
    std::fs::write(&gate, "").unwrap_or_else(|e| panic!("{e}"));
    wait_for("the chain ends on the handoff state", LONG, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let done = funnel([1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]);
    d.wait_until("the route's funnel shows the finished pass", LONG, || {
        d.get("/api/v1/stats").json()["chain_funnels"] == done
    });
    wait_for("the command's funnel shows the finished pass", LONG, || {
        (cli_stats(&p)["chain_funnels"] == done).then_some(())
    });
    let v = d.get("/api/v1/stats").json();
    assert_eq!(v["by_chain"][0]["rules"], json!(["specify", "implement"]));
    assert_eq!(v["by_chain"][0]["runs"], 2);
    d.stop();
}

#[test]
fn a_workflow_without_chains_serves_empty_chain_lists() {
    let p = Project::new();
    p.fake_agent_workflow("", "");
    p.issues(json!([{"id": "1", "identifier": "NC-1", "title": "Plain", "state": "To Do"}]));
    p.scenario("default", &[]);
    let d = p.start();
    wait_for("the run hands off", LONG, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let v = d.get("/api/v1/stats").json();
    assert_eq!(
        (v["by_chain"].clone(), v["chain_funnels"].clone()),
        (json!([]), json!([]))
    );
    let metrics = d.get("/metrics").body;
    let line = "sortie_dispatch_rule_match_total{layer=\"fallback\",rule=\"<none>\"} 1";
    assert!(metrics.lines().any(|l| l == line), "{metrics}");
    d.stop();
}

/// A chain whose second stage's settings block reads its model from the environment.
fn var_project() -> Project {
    let p = Project::new();
    p.fake_agent_workflow(
        "",
        r#"dispatch:
  rules:
    - name: specify
      stage: stage-specify
      next: implement
    - name: implement
      stage: stage-implement
      claude-code:
        model: "${SORTIE_TEST_STAGE_MODEL}"
        system_prompt: "reviewed by $SORTIE_TEST_NEVER_SET_VAR"
"#,
    );
    p.issues(json!([{
        "id": "1", "identifier": "ST-1", "title": "Chained work", "state": "To Do",
        "labels": ["stage-specify"]
    }]));
    p.scenario("default", &[]);
    p
}

#[test]
fn a_rule_settings_block_reads_the_environment_and_names_an_unset_variable() {
    let p = var_project();
    let out = common::sortie_command()
        .current_dir(p.path(""))
        .args(["validate", "--format", "json"])
        .arg(p.workflow())
        .env("SORTIE_TEST_STAGE_MODEL", "stage-model")
        .env_remove("SORTIE_TEST_NEVER_SET_VAR")
        .output()
        .unwrap_or_else(|e| panic!("sortie validate: {e}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "validate json ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(v["valid"], true, "{v}");
    let unresolved: Vec<&Value> = v["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter(|w| w["check"] == "unresolved_extension_var")
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(unresolved.len(), 1, "{v}");
    assert_eq!(
        unresolved[0]["message"],
        "dispatch.rules[1].claude-code.system_prompt: references $SORTIE_TEST_NEVER_SET_VAR, which is not set in the environment; it resolves to an empty string"
    );

    // The daemon runs the implement stage on the model the variable names.
    let d = p.start_with_env(&[("SORTIE_TEST_STAGE_MODEL", "stage-model")]);
    wait_for("the chain ends on the handoff state", LONG, || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let models: Vec<String> = std::fs::read_to_string(p.path("argv.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|c| {
            let argv: Vec<String> = c["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            argv.iter()
                .position(|a| a == "--model")
                .and_then(|i| argv.get(i + 1).cloned())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(models, vec![String::new(), "stage-model".to_string()]);
    let v = d.get("/api/v1/runs?rule=implement").json();
    assert_eq!(v["runs"][0]["configured_model"], "stage-model", "{v}");
    d.stop();
}
