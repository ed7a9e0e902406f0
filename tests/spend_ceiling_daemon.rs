//! Spend ceilings through the real binary: a run that cost more than the daily ceiling ended
//! today, so the daemon holds every dispatch (`spend_ceiling`, the held entry, the
//! acknowledgeable `spend_ceiling_reached` item, the gauges), and a reload that raises the
//! ceiling lifts the hold at the next tick. The run is written through the store's own write
//! API before the daemon starts.

mod common;

use std::time::Duration;

use serde_json::{Value, json};
use sortie::clock::{Clock, SystemClock};
use sortie::domain::RunStatus;
use sortie::store::{RunRecord, Store};

use common::Project;
use common::promtool::promtool_check;

const T: Duration = Duration::from_secs(30);
const DAY_MS: i64 = 86_400_000;

/// Records a finished run of another issue that cost `usd` and ended now.
fn record_costly_run(p: &Project, usd: f64) {
    let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(SystemClock);
    let now = clock.now_ms();
    let store = Store::open(&p.db(), clock).unwrap();
    let mut r = RunRecord::new(RunStatus::Succeeded);
    r.issue_id = "old".into();
    r.identifier = "OLD-1".into();
    r.attempt = 1;
    r.agent_kind = "claude-code".into();
    r.workspace = p.workspace("OLD-1").display().to_string();
    r.started_at_ms = now - 60_000;
    r.completed_at_ms = now;
    r.tokens_measured = true;
    r.input_tokens = 1_000;
    r.total_tokens = 1_000;
    r.usage_completeness = "complete".into();
    r.estimated_cost_usd = Some(usd);
    r.cost_status = "estimated".into();
    store.writer().record_run(r, Vec::new()).unwrap();
    store.close().unwrap();
}

/// Waits out the last two minutes of a UTC day, so the run recorded now and the ticks that
/// read it fall in the same daily window.
fn away_from_midnight() {
    let left = |now: i64| DAY_MS - now.rem_euclid(DAY_MS);
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while left(SystemClock.now_ms()) < 120_000 {
        assert!(std::time::Instant::now() < deadline, "the day never turned");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn next_midnight_rfc3339() -> String {
    let now = SystemClock.now_ms();
    sortie::clock::rfc3339_ms(now - now.rem_euclid(DAY_MS) + DAY_MS)
}

fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

fn project(ceiling: &str) -> Project {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "S-1", "title": "Spend", "state": "To Do"}]));
    p.scenario(
        "S-1",
        &[
            json!({"init": {}}),
            json!({"result": {"subtype": "success", "text": "done", "input_tokens": 10, "output_tokens": 5}}),
        ],
    );
    p.fake_agent_workflow(&format!("  max_daily_cost_usd: {ceiling}\n"), "");
    p
}

fn spend_items(state: &Value) -> Vec<Value> {
    state["attention"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["kind"] == "spend_ceiling_reached")
        .cloned()
        .collect()
}

#[test]
fn a_reached_daily_ceiling_holds_dispatch_until_a_reload_raises_it() {
    away_from_midnight();
    let p = project("0.01");
    record_costly_run(&p, 0.05);
    let d = p.start();

    let state = d.wait_state("the daily window holding S-1", T, |s| {
        s["spend_ceiling"]["daily"]["holds_dispatch"] == true
            && s["held"]
                .as_array()
                .is_some_and(|h| h.iter().any(|e| e["issue_identifier"] == "S-1"))
    });
    assert_eq!(state["spend_ceiling"]["weekly"], Value::Null);
    assert_eq!(state["spend_ceiling"]["monthly"], Value::Null);
    let daily = &state["spend_ceiling"]["daily"];
    assert_eq!(daily["budget_usd"], 0.01);
    assert_eq!(daily["used_usd"], 0.05);
    assert_eq!(daily["used_usd_complete"], true);
    assert_eq!(daily["resets_at"], next_midnight_rfc3339());
    let held = &state["held"][0];
    assert_eq!(held["hold"]["reason"], "daily_spend_ceiling");
    assert_eq!(held["hold"]["resets_at"], daily["resets_at"]);
    assert_eq!(held["status_text"], held["hold"]["reason_text"]);
    assert!(state["running"].as_array().unwrap().is_empty());
    let items = spend_items(&state);
    assert_eq!(items.len(), 1, "{}", state["attention"]);
    let item = &items[0];
    assert_eq!(item["severity"], "critical");
    assert_eq!(item["reason_text"], "Daily spend ceiling reached");
    assert_eq!(item["evidence"]["config_key"], "agent.max_daily_cost_usd");
    assert_eq!(item["evidence"]["resets_at"], daily["resets_at"]);
    assert_eq!(state["counts"]["attention"], 1);
    assert_eq!(p.run_statuses("1"), Vec::<String>::new());

    // The gauges follow the window.
    let metrics = d.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "sortie_spend_ceiling_holding{window=\"daily\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &metrics,
            "sortie_spend_ceiling_budget_usd{window=\"daily\"}"
        ),
        Some(0.01)
    );
    assert_eq!(
        sample(&metrics, "sortie_spend_ceiling_used_usd{window=\"daily\"}"),
        Some(0.05)
    );
    assert!(!metrics.contains("window=\"weekly\""), "{metrics}");
    if let Some((ok, msg)) = promtool_check(&metrics) {
        assert!(ok, "promtool: {msg}");
    }

    // The item can be acknowledged: it stays, no longer counted.
    let id = item["id"].as_str().unwrap().to_string();
    let ack = d.post(&format!("/api/v1/attention/{id}/acknowledge"));
    assert!(ack.is_success(), "{}", ack.body);
    let state = d.wait_state("the acknowledged item", T, |s| {
        spend_items(s)
            .first()
            .is_some_and(|a| !a["acknowledged_at"].is_null())
    });
    assert_eq!(state["counts"]["attention"], 0);
    assert_eq!(spend_items(&state)[0]["id"], id.as_str());

    // Raised above the window's spend: the next tick dispatches S-1.
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    std::fs::write(
        p.workflow(),
        wf.replace("max_daily_cost_usd: 0.01", "max_daily_cost_usd: 5"),
    )
    .unwrap();
    let state = d.wait_state("the raised ceiling", T, |s| {
        s["spend_ceiling"]["daily"]["budget_usd"] == 5.0
    });
    assert_eq!(state["spend_ceiling"]["daily"]["holds_dispatch"], false);
    assert!(spend_items(&state).is_empty());
    d.wait_until("S-1 dispatched and recorded", T, || {
        !p.run_statuses("1").is_empty()
    });
    let metrics = d.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "sortie_spend_ceiling_holding{window=\"daily\"}"),
        Some(0.0)
    );
    d.stop();
}

#[test]
fn without_a_ceiling_the_member_is_omitted_and_the_keys_are_not_named_unsupported() {
    let p = project("0");
    let d = p.start();
    d.wait_until("S-1 dispatched and recorded", T, || {
        !p.run_statuses("1").is_empty()
    });
    let state = d.state();
    assert!(state.get("spend_ceiling").is_none(), "{state}");
    let log = d.log_text();
    assert!(
        !log.contains("field=agent.max_daily_cost_usd"),
        "the daily ceiling is acted on, not named unsupported: {log}"
    );
    d.stop();
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The Overview shows the spend windows, the held issue and the attention item in headless
/// Chromium (tests/browser/spend_ceiling.py). Skips when Chromium or python3 is missing,
/// except under CI.
#[test]
fn the_dashboard_shows_a_held_daily_ceiling() {
    let tools = which("chromium")
        .or_else(|| which("chromium-browser"))
        .zip(which("python3"));
    let Some((chromium, python)) = tools else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser check needs chromium and python3 under CI"
        );
        eprintln!("SKIP spend ceiling browser check: chromium or python3 is missing");
        return;
    };
    away_from_midnight();
    let p = project("0.01");
    record_costly_run(&p, 0.05);
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    std::fs::write(
        p.workflow(),
        wf.replace(
            "  max_daily_cost_usd: 0.01\n",
            "  max_daily_cost_usd: 0.01\n  max_monthly_cost_usd: 100\n",
        ),
    )
    .unwrap();
    let d = p.start();
    d.wait_state("the daily window holding S-1", T, |s| {
        s["spend_ceiling"]["daily"]["holds_dispatch"] == true && !s["held"][0].is_null()
    });
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/spend_ceiling.py");
    let result = std::process::Command::new(python)
        .arg(script)
        .args(["--base", &format!("http://127.0.0.1:{}", d.port)])
        .arg("--out")
        .arg(&out)
        .arg("--chromium")
        .arg(chromium)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    d.stop();
}
