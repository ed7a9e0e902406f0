//! What the API serves about pull-request reactions through the real binary, on a daemon that
//! has none pending: the empty list and its count, a null `health.scm`, and the check-now
//! route's 404, 405, 403 and (while shutting down) 409 answers.

mod common;

use std::time::Duration;

use common::fake_github::{self, TOKEN};
use common::fake_server::Fault;
use common::{Resp, Setup, issues, mock_workflow, request, wait_for};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn envelope(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "body: {}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "body: {}", r.body);
    assert!(v["error"]["message"].is_string(), "body: {}", r.body);
}

#[test]
fn reactions_without_an_engine_read_empty_and_null() {
    let s = Setup::new(
        &mock_workflow("", ""),
        &issues(&[("r1", "R-1", "To Do"), ("r2", "R-2", "To Do")]),
    );
    let d = s.start(&[]);
    let state = d.wait_state("a completed poll", WAIT, |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });
    assert_eq!(state["pending_reactions"], json!([]));
    assert_eq!(state["counts"]["pending_reactions"], 0);
    assert_eq!(state["health"]["scm"], Value::Null);
    let active = state["active"].as_array().cloned().unwrap_or_default();
    assert!(
        active.iter().all(|e| e.get("reaction_kind").is_none()),
        "{active:?}"
    );
    // The per-issue response always carries the list.
    d.wait_until("the issue known", WAIT, || {
        d.try_get("/api/v1/R-1").is_some_and(|r| r.status == 200)
    });
    let detail = d.get("/api/v1/R-1").json();
    assert_eq!(detail["pending_reactions"], json!([]));
}

#[test]
fn check_now_answers_not_found_for_an_unknown_issue_or_kind() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let r = d.post("/api/v1/reactions/MT-653/ci/check");
    envelope(&r, 404, "reaction_not_found");
    assert_eq!(
        r.json()["error"]["message"],
        "no pending \"ci\" reaction for issue \"MT-653\""
    );
    // Not a reaction kind at all, and a config key (the route takes kinds).
    for kind in ["nope", "ci_failure", "CI"] {
        let r = d.post(&format!("/api/v1/reactions/MT-653/{kind}/check"));
        envelope(&r, 404, "reaction_not_found");
    }
    // Percent-encoded segments are matched decoded.
    let r = d.post("/api/v1/reactions/owner%2Frepo%239/bot-review/check");
    envelope(&r, 404, "reaction_not_found");
    assert_eq!(
        r.json()["error"]["message"],
        "no pending \"bot-review\" reaction for issue \"owner/repo#9\""
    );
    // The body and the query string are ignored.
    let r = request(
        d.port,
        "POST",
        "/api/v1/reactions/MT-653/review/check?now=1",
        &[("Content-Type", "application/json")],
    )
    .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 404, "reaction_not_found");
}

#[test]
fn check_now_takes_post_only_and_refuses_other_origins() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let d = s.start(&[]);
    let path = "/api/v1/reactions/MT-653/ci/check";
    let r = d.get(path);
    envelope(&r, 405, "method_not_allowed");
    assert_eq!(r.header("allow"), Some("POST"), "{:?}", r.headers);
    let r = request(d.port, "POST", path, &[("Sec-Fetch-Site", "cross-site")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    let r = request(d.port, "POST", path, &[("Origin", "http://evil.example")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 403, "cross_origin_request_rejected");
    // A same-origin page reaches the route.
    let r = request(d.port, "POST", path, &[("Sec-Fetch-Site", "same-origin")])
        .unwrap_or_else(|| panic!("no answer"));
    envelope(&r, 404, "reaction_not_found");
}

fn sigterm(d: &common::Daemon) {
    if let Some(pid) = rustix::process::Pid::from_raw(d.child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

/// While shutting down, the route refuses with 409 and nothing queued, whatever the kind. A
/// dispatch comment the fake GitHub holds keeps the process answering after the drain began
/// (as for the other actions).
#[test]
fn check_now_while_shutting_down_answers_409_nothing_queued() {
    let fake = fake_github::start(&["backlog", "in-progress", "review", "done"]);
    fake.with_state(|s| s.add_issue(1, "One", &["backlog"], false));
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/comments",
        Fault::Delay(Duration::from_secs(8)),
    );
    let workflow = format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\n  comments: {{on_dispatch: true}}\ngithub:\n  timeout_ms: 20000\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\nmock:\n  model_name: mock-model\n---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    );
    let s = Setup::new(&workflow, "[]");
    let d = s.start(&[("GITHUB_TOKEN", TOKEN)]);
    d.wait_until("the dispatch comment held by the fake", WAIT, || {
        !fake
            .requests("POST", "/repos/owner/repo/issues/1/comments")
            .is_empty()
    });
    d.wait_until("the run handed off", WAIT, || {
        fake.with_state(|g| g.labels(1)) == ["review"]
            && d.try_state()
                .is_some_and(|s| s["running"].as_array().is_some_and(|r| r.is_empty()))
    });
    sigterm(&d);
    d.wait_until("draining", WAIT, || {
        d.try_get("/livez").is_some_and(|r| r.status == 503)
    });
    for kind in ["ci", "not-a-kind"] {
        let r = d.post(&format!("/api/v1/reactions/owner%2Frepo%231/{kind}/check"));
        assert_eq!(r.status, 409, "{}", r.body);
        let body = r.json();
        assert_eq!(body["queued"], false);
        assert!(body["requested_at"].is_string());
        assert_eq!(
            body["outcome_text"],
            "Nothing queued: Sortie is shutting down."
        );
        assert!(body.get("kind").is_none());
    }
    let mut d = d;
    let status = wait_for("the daemon's exit", WAIT, || {
        d.child.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(0));
}

// ---- The handlers over a hand-built snapshot (what the engine will fill) ------------------

mod built {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::{Arc, RwLock};

    use crossbeam_channel::Receiver;
    use serde_json::{Value, json};
    use sortie::clock::SystemClock;
    use sortie::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
    use sortie::http::AppState;
    use sortie::orchestrator::reactions::{LastCheck, ReactionIssue, ReactionPr, ReactionRow};
    use sortie::orchestrator::snapshot::Snapshot;
    use sortie::orchestrator::{CheckNowOutcome, DueReaction, OrchMsg, OrchestratorHandle};
    use sortie::store::Store;

    fn at(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pr(number: u64) -> sortie::scm::PullRequestRef {
        sortie::scm::PullRequestRef {
            owner: "acme".into(),
            repo: "web".into(),
            number,
        }
    }

    /// The seed's escalated CI row of MT-653 and its review row.
    fn rows() -> Vec<ReactionRow> {
        let ci = ReactionRow {
            issue: ReactionIssue {
                id: "mno345".into(),
                identifier: "MT-653".into(),
                display_identifier: String::new(),
                title: "Add the export button".into(),
                url: "https://tracker.example.com/browse/MT-653".into(),
                issue_type: Some("Story".into()),
                labels: Some(vec!["export".into()]),
                state: "In Review".into(),
            },
            kind: ReactionKind::Ci,
            pr: ReactionPr {
                pr: pr(931),
                url: "https://github.com/acme/web/pull/931".into(),
                branch: "sortie/MT-653".into(),
                head_sha: "4f1c2a9e".into(),
            },
            created_at_ms: at("2026-03-26T14:09:30Z"),
            dispatched_at_ms: Some(at("2026-03-26T13:58:03Z")),
            chain_id: String::new(),
            next_poll_at_ms: at("2026-03-26T14:31:40Z"),
            wait: Some(ReactionWait::PollInterval),
            used_attempts: Some(2),
            max_attempts: Some(2),
            escalated_at_ms: Some(at("2026-03-26T14:26:40Z")),
            escalation_trigger: Some(EscalationTrigger::BudgetExhausted),
            watch_from_ms: at("2026-03-26T14:09:30Z"),
            watch_window_ms: 1_800_000,
            last_check: Some(LastCheck::Ci {
                observed_at_ms: at("2026-03-26T14:26:40Z"),
                head_sha: "9b7e3d1c".into(),
                status: CiStatus::Failing,
                failing_checks: vec!["Test".into()],
                failing: 1,
                pending: 0,
                passing: 4,
            }),
            rule_name: "implement".into(),
            agent_kind: "mock".into(),
            configured_model: String::new(),
            backoff_count: 0,
            check_now: None,
        };
        let review = ReactionRow {
            kind: ReactionKind::Review,
            escalated_at_ms: None,
            escalation_trigger: None,
            last_check: None,
            ..ci.clone()
        };
        vec![ci, review]
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            generated_at_ms: at("2026-03-26T14:30:00Z"),
            pending_reactions: Arc::new(rows()),
            ..Default::default()
        }
    }

    /// An `AppState` over `snap` whose orchestrator inbox the test reads (`None`: dropped, so
    /// nothing takes a request).
    fn app(
        snap: Snapshot,
        inbox: bool,
    ) -> (tempfile::TempDir, AppState, Option<Receiver<OrchMsg>>) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = Store::open(&dir.path().join("s.db"), Arc::new(SystemClock))
            .unwrap_or_else(|e| panic!("{e}"));
        let (tx, rx) = crossbeam_channel::unbounded();
        let state = AppState {
            orch: OrchestratorHandle {
                tx,
                snapshot: Arc::new(RwLock::new(Arc::new(snap))),
                metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
                prices: Default::default(),
            },
            store: Arc::new(store),
            clock: Arc::new(SystemClock),
            version: "test",
            stopping: Arc::new(AtomicBool::new(false)),
            sse_open: Arc::new(AtomicUsize::new(0)),
            sse_serial: Arc::new(AtomicUsize::new(0)),
            max_streams: 4,
            state_cache: Default::default(),
            webhooks: Default::default(),
            refusals: Default::default(),
        };
        (dir, state, inbox.then_some(rx))
    }

    #[test]
    fn the_state_document_and_the_issue_serve_the_rows() {
        let snap = snapshot();
        let (_d, app, _rx) = app(snap.clone(), false);
        let (doc, _) = sortie::http::state_doc::view(&app, &snap);
        let v = serde_json::to_value(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["counts"]["pending_reactions"], 2);
        assert_eq!(v["pending_reactions"][0]["kind"], "ci");
        assert_eq!(v["pending_reactions"][1]["kind"], "review");
        assert_eq!(v["active"][0]["status"], "pending_reactions");
        assert_eq!(v["active"][0]["reaction_kind"], "ci");
        let item = &v["attention"][0];
        assert_eq!(item["kind"], "reaction_escalated");
        assert_eq!(item["id"], "cf5210ceffa49562e16b5c7c7a9aeb36");
        assert_eq!(v["counts"]["attention"], 1);

        let d = sortie::http::issue_detail::detail(&app, "MT-653")
            .unwrap_or_else(|e| panic!("{e:?}"))
            .body;
        assert_eq!(d["status"], "pending_reactions");
        assert_eq!(d["status_text"], "CI escalated on #931");
        assert_eq!(
            d["issue"],
            json!({"title": "Add the export button", "url": "https://tracker.example.com/browse/MT-653", "issue_type": "Story", "labels": ["export"], "state": "In Review"})
        );
        assert_eq!(d["pending_reactions"].as_array().map(Vec::len), Some(2));
        for k in ["running", "retry", "budget_exhausted", "parked"] {
            assert_eq!(d[k], Value::Null, "{k}");
        }
    }

    #[test]
    fn check_now_answers_from_the_orchestrator() {
        let (_d, app, rx) = app(snapshot(), true);
        let rx = rx.unwrap_or_else(|| panic!("inbox"));
        let orch = std::thread::spawn(move || {
            let mut asked = Vec::new();
            while let Ok(m) = rx.recv() {
                if let OrchMsg::ReactionCheck {
                    identifier,
                    kind,
                    reply,
                } = m
                {
                    asked.push((identifier.clone(), kind));
                    let out = if identifier == "MT-653" {
                        CheckNowOutcome::Due(DueReaction {
                            issue_id: "mno345".into(),
                            issue_identifier: identifier,
                            display_identifier: String::new(),
                            kind,
                            pr: pr(931),
                        })
                    } else {
                        CheckNowOutcome::NotFound
                    };
                    let _ = reply.send(out);
                }
            }
            asked
        });
        let r = sortie::http::actions::reaction_check(&app, "MT-653", "ci")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(r.status, 202);
        let mut body = r.body;
        assert!(body["requested_at"].is_string());
        body["requested_at"] = json!("t");
        assert_eq!(
            serde_json::to_string(&body).unwrap_or_default(),
            serde_json::to_string(&json!({"queued": true, "requested_at": "t", "issue_id": "mno345", "issue_identifier": "MT-653", "kind": "ci", "pull_request": {"number": 931, "repository": "acme/web"}, "outcome_text": "MT-653: a check of PR #931 for CI is queued for the next poll tick."})).unwrap_or_default()
        );
        let e = sortie::http::actions::reaction_check(&app, "MT-9", "merge-conflict")
            .err()
            .unwrap_or_else(|| panic!("404 expected"));
        assert_eq!(e.status, 404);
        // An unknown kind never reaches the orchestrator.
        let e = sortie::http::actions::reaction_check(&app, "MT-653", "ci_failure")
            .err()
            .unwrap_or_else(|| panic!("404 expected"));
        assert_eq!(e.status, 404);
        drop(app);
        let asked = orch.join().unwrap_or_else(|_| panic!("orch thread"));
        assert_eq!(
            asked,
            [
                ("MT-653".to_string(), ReactionKind::Ci),
                ("MT-9".to_string(), ReactionKind::MergeConflict)
            ]
        );
    }

    #[test]
    fn check_now_not_taken_answers_503() {
        let (_d, app, _) = app(snapshot(), false);
        let e = sortie::http::actions::reaction_check(&app, "MT-653", "ci")
            .err()
            .unwrap_or_else(|| panic!("503 expected"));
        assert_eq!(e.status, 503);
        assert_eq!(e.code, "check_now_unavailable");
    }

    #[test]
    fn an_escalation_is_acknowledged_through_the_acknowledge_route() {
        let (_d, app, rx) = app(snapshot(), true);
        let rx = rx.unwrap_or_else(|| panic!("inbox"));
        let orch = std::thread::spawn(move || {
            let mut kinds = Vec::new();
            while let Ok(m) = rx.recv() {
                if let OrchMsg::Acknowledge { ack, reply, .. } = m {
                    kinds.push(ack.kind.clone());
                    let _ = reply.send(Ok(ack));
                }
            }
            kinds
        });
        let r = sortie::http::actions::acknowledge(&app, "cf5210ceffa49562e16b5c7c7a9aeb36")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body["kind"], "reaction_escalated");
        assert_eq!(r.body["already_acknowledged"], false);
        assert_eq!(r.body["issue_identifier"], "MT-653");
        drop(app);
        let kinds = orch.join().unwrap_or_else(|_| panic!("orch thread"));
        assert_eq!(kinds, ["reaction_escalated"]);
    }
}
