//! `GET /api/v1/stats` through the real binary over a seeded run history: the figures, that
//! it answers what `sortie stats --format json` prints for the same absolute range, the 400
//! wording of every refused parameter, and 503 once the database cannot be opened.

mod common;
mod stats_seed;

use common::*;
use serde_json::Value;

fn seeded_daemon() -> (Setup, Daemon) {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    stats_seed::seed(&s.path().join(".sortie.db"));
    let d = s.start(&[]);
    (s, d)
}

fn range_query() -> String {
    format!(
        "/api/v1/stats?since={}&until={}",
        stats_seed::SINCE,
        stats_seed::UNTIL
    )
}

fn cli_json(s: &Setup, args: &[&str]) -> Value {
    let out = sortie_command()
        .arg("stats")
        .args(args)
        .arg(s.path().join("WORKFLOW.md"))
        .current_dir(s.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn stats_route_reports_the_seeded_figures_and_matches_the_command() {
    let (s, d) = seeded_daemon();
    let r = d.get(&range_query());
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("Content-Type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    let route = r.json();
    stats_seed::assert_figures(&route);
    assert_eq!(
        route["workflow_path"],
        s.path().join("WORKFLOW.md").display().to_string()
    );
    assert_eq!(
        route["db_path"],
        s.path().join(".sortie.db").display().to_string()
    );
    let cli = cli_json(
        &s,
        &[
            "--since",
            stats_seed::SINCE,
            "--until",
            stats_seed::UNTIL,
            "--format",
            "json",
        ],
    );
    assert_eq!(
        stats_seed::without_generated_at(route),
        stats_seed::without_generated_at(cli)
    );
}

#[test]
fn stats_route_without_bounds_covers_every_run_and_an_empty_range_is_200() {
    let (_s, d) = seeded_daemon();
    let all = d.get("/api/v1/stats").json();
    assert_eq!(all["since"], Value::Null);
    assert_eq!(all["until"], Value::Null);
    // The old run joins; the recorded CI result never counts.
    assert_eq!(all["summary"]["runs"], 5);
    assert_eq!(all["summary"]["cost_usd"], 11.0);
    let none = d
        .get("/api/v1/stats?since=2020-01-01&until=2020-01-02")
        .json();
    assert_eq!(none["summary"]["runs"], 0);
    assert_eq!(none["summary"]["success_rate"], Value::Null);
    assert_eq!(none["summary"]["tokens"], Value::Null);
    assert_eq!(none["summary"]["cost_usd"], Value::Null);
    assert_eq!(none["spend"]["buckets"], serde_json::json!([]));
    assert_eq!(none["by_status"], serde_json::json!([]));
    // A duration bound counts back from the request: the seeded runs are months old.
    let recent = d.get("/api/v1/stats?since=24h").json();
    assert_eq!(recent["summary"]["runs"], 0);
    assert!(recent["since"].as_str().is_some_and(|t| t.ends_with('Z')));
}

#[test]
fn stats_route_refuses_bad_parameters_with_the_references_wording() {
    let (_s, d) = seeded_daemon();
    let bound = "must be an RFC 3339 timestamp, a date such as 2026-07-01, or a positive duration such as 24h";
    for (query, message) in [
        ("since=7d", format!("parameter \"since\" {bound}")),
        ("since=0s", format!("parameter \"since\" {bound}")),
        ("since=-24h", format!("parameter \"since\" {bound}")),
        (
            "until=2026-07-01T00:00:00",
            format!("parameter \"until\" {bound}"),
        ),
        ("until=yesterday", format!("parameter \"until\" {bound}")),
        (
            "limit=5",
            "parameter \"limit\" is not a parameter of this route".to_string(),
        ),
        (
            "since=24h&since=1h",
            "parameter \"since\" is given more than once".to_string(),
        ),
        (
            "since=2026-07-02&until=2026-07-01",
            "parameter \"since\" must be before until".to_string(),
        ),
    ] {
        let r = d.get(&format!("/api/v1/stats?{query}"));
        assert_eq!(r.status, 400, "{query}: {}", r.body);
        let v = r.json();
        assert_eq!(v["error"]["code"], "invalid_parameter", "{query}");
        assert_eq!(v["error"]["message"], message.as_str(), "{query}");
    }
    let r = d.request("POST", "/api/v1/stats", &[]).unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(r.header("Allow"), Some("GET"));
}

#[test]
fn stats_route_answers_503_when_the_database_cannot_be_opened() {
    let (s, d) = seeded_daemon();
    assert_eq!(d.get("/api/v1/stats").status, 200);
    std::fs::remove_file(s.path().join(".sortie.db")).unwrap();
    let r = d.get("/api/v1/stats");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "history_unavailable");
    // Opened read-only: the route never creates the file.
    assert!(!s.path().join(".sortie.db").exists());
}
