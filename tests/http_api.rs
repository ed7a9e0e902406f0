//! The JSON API driven through the real binary: cross-origin rows, method enforcement, the
//! error envelope, probes, the state document's shape, issue detail, run history, actions.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

fn envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "body: {}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "body: {}", r.body);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(
        r.header("Content-Type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
}

#[test]
fn cross_origin_rows_and_curl_without_origin() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let host = format!("127.0.0.1:{}", d.port);
    let p = d.port;
    // Row 1: GET is served whatever the headers say.
    let r = request(
        p,
        "GET",
        "/livez",
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Origin", "http://evil.example"),
        ],
    );
    assert_eq!(r.map(|r| r.status), Some(200));
    // Row 2: same-origin / none.
    let r = request(
        p,
        "POST",
        "/api/v1/refresh",
        &[("Sec-Fetch-Site", "same-origin")],
    );
    assert_eq!(r.map(|r| r.status), Some(202));
    let r = request(p, "POST", "/api/v1/refresh", &[("Sec-Fetch-Site", "none")]);
    assert_eq!(r.map(|r| r.status), Some(202));
    // Row 3: any other Sec-Fetch-Site, whatever Origin says.
    let origin_ok = format!("http://{host}");
    let r = request(
        p,
        "POST",
        "/api/v1/refresh",
        &[
            ("Sec-Fetch-Site", "same-site"),
            ("Origin", origin_ok.as_str()),
        ],
    )
    .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    // Row 4: curl-style, neither header.
    let r = request(p, "POST", "/api/v1/refresh", &[]);
    assert_eq!(r.map(|r| r.status), Some(202));
    // Row 5: Origin equals Host (scheme ignored, port included).
    let https_origin = format!("https://{host}");
    let r = request(
        p,
        "POST",
        "/api/v1/refresh",
        &[("Origin", https_origin.as_str())],
    );
    assert_eq!(r.map(|r| r.status), Some(202));
    // Row 6: Origin differs from Host.
    let r = request(
        p,
        "POST",
        "/api/v1/refresh",
        &[("Origin", "http://127.0.0.1:1")],
    )
    .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    // Refused before routing: a path that would be 404, and one that would be 405.
    for path in ["/no/such/route", "/livez"] {
        let r = request(p, "POST", path, &[("Sec-Fetch-Site", "cross-site")])
            .unwrap_or_else(|| panic!("no answer"));
        envelope(&r, 403, "cross_origin_request_rejected");
    }
    assert!(d.log_text().contains("cross-origin request rejected"));
}

#[test]
fn method_enforcement_probes_and_redirect() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let r = request(d.port, "DELETE", "/api/v1/state", &[]).unwrap_or_else(|| panic!("none"));
    envelope(&r, 405, "method_not_allowed");
    assert_eq!(r.header("Allow"), Some("GET"));
    assert_eq!(
        r.json()["error"]["message"],
        "method DELETE is not allowed on this endpoint"
    );
    let r = d.get("/api/v1/refresh");
    envelope(&r, 405, "method_not_allowed");
    assert_eq!(r.header("Allow"), Some("POST"));
    let r = d.post("/livez");
    envelope(&r, 405, "method_not_allowed");
    let r = d.get("/nope");
    envelope(&r, 404, "issue_not_found");
    // The dashboard accepts GET and HEAD; the metrics scrape and the icon GET only.
    for (p, allow) in [
        ("/metrics", "GET"),
        ("/ui/", "GET, HEAD"),
        ("/ui/issues/X-1", "GET, HEAD"),
        ("/favicon.ico", "GET"),
    ] {
        assert_eq!(d.get(p).status, 200, "{p}");
        let r = d.post(p);
        envelope(&r, 405, "method_not_allowed");
        assert_eq!(r.header("Allow"), Some(allow), "{p}");
    }
    assert_eq!(d.get("/ui/assets/nope.js").status, 404);
    let r = d.get("/");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("Location"), Some("/ui/"));
    assert!(r.body.is_empty());
    let r = d.get("/livez");
    assert_eq!((r.status, r.json()["status"].clone()), (200, "pass".into()));
    let r = d.get("/readyz");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["status"], "pass");
    assert_eq!(v["checks"]["database"], "pass");
    assert_eq!(v["checks"]["preflight"], "pass");
    assert_eq!(v["checks"]["workflow"], "pass");
    assert!(v["uptime_seconds"].is_number());
    assert!(v["version"].is_string());
}

#[test]
fn state_document_shape_of_a_running_session() {
    let (_s, d) = running_mock_daemon("  max_turns: 1\n");
    let s = d.state();
    for k in [
        "generated_at",
        "version",
        "started_at",
        "counts",
        "running",
        "retrying",
        "budget_exhausted",
        "parked",
        "pending_reactions",
        "between_stages",
        "active",
        "held",
        "attention",
        "agent_totals",
        "rate_limits",
        "config",
        "health",
    ] {
        assert!(s.get(k).is_some(), "missing {k}");
    }
    assert_eq!(s["pending_reactions"], serde_json::json!([]));
    assert_eq!(s["between_stages"], serde_json::json!([]));
    assert_eq!(s["rate_limits"], serde_json::json!({}));
    assert_eq!(s["counts"]["running"], 1);
    assert!(s["counts"].get("active").is_none());
    let r = &s["running"][0];
    assert_eq!(r["issue_title"], "Title of T-1");
    assert_eq!(r["issue_labels"], serde_json::json!(["bug"]));
    assert_eq!(r["status_text"], "Turn 1");
    assert_eq!(r["status_text_full"], "Running, turn 1.");
    assert!(r["dispatch_id"].as_str().is_some_and(|d| !d.is_empty()));
    assert_eq!(r["tokens_measured"], true);
    assert_eq!(r["tokens"]["input_tokens"], 100);
    assert_eq!(r["uncached_tokens"], 150);
    assert_eq!(r["usage_arrival"], "incremental");
    assert_eq!(r["model_name"], "mock-model");
    assert_eq!(r["used_sessions"], 0);
    assert_eq!(r["used_tokens"], 150);
    assert_eq!(r["used_tokens_complete"], true);
    assert_eq!(r["budget_tokens"], Value::Null);
    assert_eq!(r["cost_status"], "unpriced");
    assert!(r["stall_off_text"].is_null() != r["quiet_at"].is_null());
    let a = &s["active"][0];
    assert_eq!(a["status"], "running");
    assert_eq!(a["status_text"], r["status_text"]);
    assert_eq!(a["dispatched_at"], r["dispatched_at"]);
    assert!(a.get("reaction_kind").is_none());
    assert_eq!(s["agent_totals"]["running_unreported"], 0);
    assert_eq!(s["agent_totals"]["running_non_reporting"], 0);
    assert_eq!(s["config"]["tracker"]["kind"], "file");
    assert!(s["config"]["tracker"].get("endpoint").is_none());
    assert_eq!(s["config"]["dispatch"]["hop_ceiling"], 10);
    assert_eq!(s["health"]["database"]["status"], "pass");
    assert_eq!(
        s["health"]["poll"]["summary_text"],
        "The latest poll read the tracker without an error."
    );
    assert_eq!(s["health"]["poll"]["outcome"], "succeeded");

    // Issue detail of the running issue, with live recent events.
    let detail = d.get("/api/v1/T-1");
    assert_eq!(detail.status, 200, "{}", detail.body);
    let v = detail.json();
    assert_eq!(v["status"], "running");
    assert_eq!(v["issue"]["title"], "Title of T-1");
    assert_eq!(v["running"]["dispatch_id"], r["dispatch_id"]);
    assert_eq!(v["retry"], Value::Null);
    assert_eq!(v["pending_reactions"], serde_json::json!([]));
    assert!(v["history"].is_null());
    let events = v["recent_events"].as_array().cloned().unwrap_or_default();
    assert!(!events.is_empty());
    assert_eq!(events[0]["event"], "session_started");
    assert!(
        events
            .windows(2)
            .all(|w| w[0]["seq"].as_i64() < w[1]["seq"].as_i64())
    );
    assert!(events.iter().all(|e| e["text"].is_string()));
    assert!(
        v["next_outcomes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|o| o["condition"] == "If the run fails"))
    );
    // Live run events.
    let dispatch = r["dispatch_id"].as_str().unwrap_or("");
    let ev = d.get(&format!("/api/v1/runs/{dispatch}/events"));
    assert_eq!(ev.status, 200);
    assert_eq!(ev.json()["first_seq"], 1);
    // Unknown identifiers and dispatch ids.
    envelope(&d.get("/api/v1/NOPE-1"), 404, "issue_not_found");
    envelope(
        &d.get("/api/v1/runs/AAAA/events"),
        404,
        "run_events_not_retained",
    );
}

#[test]
fn run_history_routes_and_parameter_errors() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_sessions: 1\n",
            "  events_per_turn: 2\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "H-1", "To Do")]),
    );
    let d = s.start(&[]);
    let st = d.wait_state("the budget hold after one session", T, |s| {
        s["budget_exhausted"][0]["issue_identifier"] == "H-1"
    });
    let b = &st["budget_exhausted"][0];
    assert_eq!(b["reason"], "session_budget");
    assert_eq!(b["status_text"], "Held: session budget reached");
    assert_eq!(b["used_sessions"], 1);
    assert_eq!(b["budget_sessions"], 1);
    let item = &st["attention"][0];
    assert_eq!(item["kind"], "budget_held");
    assert_eq!(item["reason_text"], "Session budget reached");
    assert_eq!(st["counts"]["attention"], 1);

    let runs = d.get("/api/v1/runs?issue=H-1");
    assert_eq!(runs.status, 200, "{}", runs.body);
    let v = runs.json();
    let run = &v["runs"][0];
    assert_eq!(run["issue_identifier"], "H-1");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["usage_completeness"], "complete");
    assert_eq!(run["tokens"]["total_tokens"], 150);
    assert_eq!(v["next_cursor"], Value::Null);
    let dispatch = run["dispatch_id"].as_str().unwrap_or("").to_string();
    let ev = d.get(&format!("/api/v1/runs/{dispatch}/events")).json();
    assert_eq!(ev["first_seq"], 1);
    assert!(ev["events"].as_array().is_some_and(|e| e.len() >= 3));
    // Paging and filters.
    assert_eq!(
        d.get("/api/v1/runs?status=failed").json()["runs"],
        serde_json::json!([])
    );
    assert_eq!(
        d.get("/api/v1/runs?limit=1").json()["runs"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let g = d.get("/api/v1/runs/issues").json();
    assert_eq!(g["groups"][0]["issue_id"], "1");
    assert_eq!(g["groups"][0]["status"], "budget_exhausted");
    assert_eq!(g["groups"][0]["totals"]["run_count"], 1);
    assert_eq!(g["groups"][0]["runs"][0]["pr_loop"], Value::Null);
    // 400s name the parameter and the rule.
    for (q, msg) in [
        (
            "limit=0",
            "parameter \"limit\" must be an integer from 1 to 200",
        ),
        (
            "limit=1&limit=2",
            "parameter \"limit\" must not be given more than once",
        ),
        (
            "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z",
            "parameter \"since\" must be before \"until\"",
        ),
    ] {
        let r = d.get(&format!("/api/v1/runs?{q}"));
        envelope(&r, 400, "invalid_parameter");
        assert_eq!(r.json()["error"]["message"], msg);
    }
    envelope(&d.get("/api/v1/runs?isue=H-1"), 400, "invalid_parameter");
    envelope(&d.get("/api/v1/runs?status=done"), 400, "invalid_parameter");
    envelope(
        &d.get("/api/v1/runs/issues?limit=51"),
        400,
        "invalid_parameter",
    );
    envelope(
        &d.get("/api/v1/runs/issues?since=2026-01-01T00:00:00Z"),
        400,
        "invalid_parameter",
    );
    // Detail of the budget-held issue carries its history.
    let detail = d.get("/api/v1/H-1").json();
    assert_eq!(detail["status"], "budget_exhausted");
    assert_eq!(detail["history"]["totals"]["run_count"], 1);
    assert_eq!(detail["history"]["runs"][0]["run_id"], run["run_id"]);
}

#[test]
fn acknowledgement_survives_a_restart() {
    let s = Setup::new(
        &mock_workflow(
            "  max_turns: 1\n  max_sessions: 1\n",
            "  events_per_turn: 1\n",
        )
        .replace("  handoff_state: Review\n", ""),
        &issues(&[("1", "A-1", "To Do")]),
    );
    let d = s.start(&[]);
    let st = d.wait_state("an attention item", T, |s| {
        s["attention"][0]["kind"] == "budget_held"
    });
    let id = st["attention"][0]["id"].as_str().unwrap_or("").to_string();
    envelope(
        &d.post("/api/v1/attention/0123456789abcdef0123456789abcdef/acknowledge"),
        404,
        "attention_item_not_found",
    );
    let r = d.post(&format!("/api/v1/attention/{id}/acknowledge"));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["acknowledged"], true);
    assert_eq!(v["already_acknowledged"], false);
    assert_eq!(v["kind"], "budget_held");
    assert_eq!(v["issue_identifier"], "A-1");
    assert_eq!(
        v["outcome_text"],
        "Acknowledged A-1 (Session budget reached). It comes back only if a new cause appears."
    );
    let first_at = v["acknowledged_at"].clone();
    let again = d
        .post(&format!("/api/v1/attention/{id}/acknowledge"))
        .json();
    assert_eq!(again["already_acknowledged"], true);
    assert_eq!(again["acknowledged_at"], first_at);
    // The state document follows the next published snapshot (a request arriving while it is
    // being rebuilt is served the previous one), so it is waited for.
    let st = d.wait_state("the acknowledgement in the state", T, |s| {
        s["counts"]["attention"] == 0
    });
    assert_eq!(st["counts"]["attention"], 0);
    assert_eq!(st["attention"][0]["acknowledged_at"], first_at);
    assert_eq!(d.stop(), Some(0));

    let d = s.start(&[]);
    let st = d.wait_state("the hold again after restart", T, |s| {
        s["attention"][0]["id"].as_str() == Some(id.as_str())
    });
    assert_eq!(st["attention"][0]["acknowledged_at"], first_at);
    assert_eq!(st["counts"]["attention"], 0);
}

#[test]
fn refresh_and_retry_now() {
    let s = Setup::new(
        &mock_workflow("  max_turns: 1\n", "  turn_outcomes: [failed]\n"),
        &issues(&[("1", "R-1", "To Do")]),
    );
    let d = s.start(&[]);
    let st = d.wait_state("a queued retry", T, |s| {
        s["retrying"][0]["issue_identifier"] == "R-1"
    });
    let row = &st["retrying"][0];
    assert_eq!(row["attempt"], 1);
    assert!(
        row["status_text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Retry 1 in "))
    );
    assert_eq!(row["paused"], false);
    envelope(
        &d.post("/api/v1/retries/NOPE-9/run"),
        404,
        "retry_not_found",
    );
    let r = d.post("/api/v1/retries/R-1/run");
    assert_eq!(r.status, 202, "{}", r.body);
    let v = r.json();
    assert_eq!(v["queued"], true);
    assert_eq!(v["issue_id"], "1");
    assert_eq!(v["attempt"], 1);
    assert_eq!(v["outcome_text"], "Retry 1 of R-1 is due now.");

    let r = d.post("/api/v1/refresh");
    assert_eq!(r.status, 202);
    let v = r.json();
    assert_eq!(v["operations"], serde_json::json!(["poll", "reconcile"]));
    assert!(v["coalesced"].is_boolean());
    // Two refreshes back to back: the second joins the first when the orchestrator has not
    // yet run it (it may have; both answers are then "queued").
    let a = d.post("/api/v1/refresh").json();
    let b = d.post("/api/v1/refresh").json();
    for v in [&a, &b] {
        let expected = if v["coalesced"] == true {
            "A tracker poll and reconciliation was already queued; this request joined it."
        } else {
            "Tracker poll and reconciliation queued."
        };
        assert_eq!(v["outcome_text"], expected);
    }
    envelope(
        &d.post("/api/v1/reactions/R-1/ci/check"),
        404,
        "reaction_not_found",
    );
}

#[test]
fn the_dashboard_is_served_with_its_caching_and_security_headers() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let index = d.get("/ui/");
    for p in ["/ui/", "/ui/issues/DEMO-1", "/ui/runs"] {
        let r = d.get(p);
        assert_eq!(r.status, 200, "{p}");
        assert_eq!(
            r.header("Content-Type"),
            Some("text/html; charset=utf-8"),
            "{p}"
        );
        assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"), "{p}");
        let csp = r.header("Content-Security-Policy").unwrap_or_default();
        for d in [
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(d), "{p}: {csp}");
        }
        assert_eq!(r.body, index.body, "{p}: every screen path serves the app");
    }
    let etag = index.header("ETag").unwrap_or_else(|| panic!("no ETag"));
    let r = request(
        d.port,
        "GET",
        "/ui/issues/DEMO-1",
        &[("If-None-Match", etag)],
    )
    .unwrap_or_else(|| panic!("no answer"));
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    // The app's script is content-hashed and cached for good.
    let script = index
        .body
        .split("src=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no script in {}", index.body));
    assert!(script.starts_with("/ui/assets/app."), "{script}");
    let r = d.get(script);
    assert_eq!(r.status, 200, "{script}");
    assert_eq!(
        r.header("Cache-Control"),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
}
