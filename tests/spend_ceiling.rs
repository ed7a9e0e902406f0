//! Spend ceilings in-process with a manual clock: a window whose recorded run costs (plus the
//! live estimate of running sessions) reached its ceiling holds every dispatch with its hold
//! reason, shows in the state document (`spend_ceiling`, the held entry, the
//! `spend_ceiling_reached` attention item), and lifts exactly when the window resets (the
//! next 00:00 UTC, Monday, the 1st) or on the tick after a reload raises the ceiling. Run rows
//! with costs are written through the store's own write API.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sortie::clock::Clock;
use sortie::domain::{RescheduleReason, RunStatus, SpendWindow};
use sortie::http::attention::{item_id, items};
use sortie::http::views::attention::AttentionKind;
use sortie::http::views::state::StateDoc;
use sortie::orchestrator::dispatch_pass::HoldReason;
use sortie::orchestrator::snapshot::Snapshot;
use sortie::store::{RunRecord, Store};

use common::in_process::{InProcess, START_MS, mock_orchestrator, step_until};

/// 2027-01-15T00:00:00Z, the day of [`START_MS`] (a Friday, 08:00 UTC).
const DAY_START_MS: i64 = 1_799_971_200_000;
/// 2027-01-16T00:00:00Z.
const NEXT_DAY_MS: i64 = 1_800_057_600_000;
/// Monday 2027-01-18T00:00:00Z.
const NEXT_MONDAY_MS: i64 = 1_800_230_400_000;
/// 2027-02-01T00:00:00Z.
const NEXT_MONTH_MS: i64 = 1_801_440_000_000;

const ISSUES: &str = r#"[{"id": "1", "identifier": "S-1", "title": "t", "state": "To Do"}]"#;

/// A finished run of another issue that ended at `completed_at_ms` and cost `usd`.
fn record_cost(store: &Store, completed_at_ms: i64, usd: f64, cost_status: &str) {
    let mut r = RunRecord::new(RunStatus::Succeeded);
    r.issue_id = "old".into();
    r.identifier = "OLD-1".into();
    r.attempt = 1;
    r.agent_kind = "mock".into();
    r.workspace = "/nowhere".into();
    r.started_at_ms = completed_at_ms - 60_000;
    r.completed_at_ms = completed_at_ms;
    r.tokens_measured = true;
    r.input_tokens = 1_000;
    r.total_tokens = 1_000;
    r.usage_completeness = "complete".into();
    r.estimated_cost_usd = Some(usd);
    r.cost_status = cost_status.into();
    store.writer().record_run(r, Vec::new()).unwrap();
}

/// The orchestrator over one issue with `ceilings` (agent keys) and a run of another issue
/// that cost $0.05 an hour before the start, recorded before the first tick.
fn held_setup(dir: &std::path::Path, ceilings: &str) -> InProcess {
    let p = mock_orchestrator(dir, ISSUES, ceilings);
    record_cost(&p.store, START_MS - 3_600_000, 0.05, "estimated");
    p
}

/// Moves the clock to `at_ms` and steps until a poll tick ran at that time (a refresh asks
/// for one, so a move shorter than the poll interval still gets its tick).
fn tick_at(p: &mut InProcess, at_ms: i64) -> Arc<Snapshot> {
    let now = p.clock.now_ms();
    assert!(at_ms >= now, "the clock only moves forward");
    p.clock.advance(Duration::from_millis((at_ms - now) as u64));
    p.handle
        .tx
        .send(sortie::orchestrator::OrchMsg::Refresh { reply: None })
        .unwrap();
    step_until(&mut p.orch, "a poll tick at the new time", |s| {
        s.health.poll.at_ms == Some(at_ms)
    });
    p.orch.snapshot_now()
}

fn held_reason<'a>(snap: &'a Snapshot, identifier: &str) -> Option<&'a HoldReason> {
    snap.held
        .iter()
        .find(|h| h.issue.identifier == identifier)
        .map(|h| &h.reason)
}

/// The state document as `GET /api/v1/state` builds it from the snapshot.
fn state_doc(snap: &Snapshot) -> Value {
    let items = items(snap);
    let unacked = items
        .iter()
        .filter(|i| i.view.acknowledged_at.is_none())
        .count();
    let views = items.into_iter().map(|i| i.view).collect();
    serde_json::to_value(StateDoc::build(
        snap,
        "test",
        &BTreeMap::new(),
        views,
        unacked,
    ))
    .unwrap()
}

fn ts(ms: i64) -> String {
    sortie::clock::rfc3339_ms(ms)
}

fn run_count(dir: &std::path::Path, issue_id: &str) -> i64 {
    let conn = rusqlite::Connection::open(dir.join("sortie.db")).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM run_history WHERE issue_id = ?1",
        [issue_id],
        |r| r.get(0),
    )
    .unwrap()
}

/// Steps until S-1 has been dispatched (running, or its run recorded).
fn wait_dispatched(p: &mut InProcess, dir: &std::path::Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let snap = p.orch.snapshot_now();
        if snap.running.iter().any(|r| r.issue.id == "1") || run_count(dir, "1") > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "S-1 was never dispatched"
        );
        p.orch.step(Duration::from_millis(20));
    }
}

#[test]
fn a_daily_ceiling_holds_dispatch_until_the_next_midnight_utc() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(dir.path(), "  max_daily_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS);
    let daily_hold = HoldReason::SpendCeiling {
        window: SpendWindow::Daily,
        resets_at_ms: NEXT_DAY_MS,
    };
    assert_eq!(held_reason(&snap, "S-1"), Some(&daily_hold));
    assert!(snap.running.is_empty());

    let doc = state_doc(&snap);
    assert_eq!(
        doc["spend_ceiling"],
        json!({
            "daily": {
                "budget_usd": 0.01,
                "used_usd": 0.05,
                "used_usd_complete": true,
                "holds_dispatch": true,
                "resets_at": ts(NEXT_DAY_MS),
            },
            "weekly": null,
            "monthly": null,
        })
    );
    let held = &doc["held"][0];
    assert_eq!(held["issue_identifier"], "S-1");
    assert_eq!(held["hold"]["reason"], "daily_spend_ceiling");
    assert_eq!(held["hold"]["resets_at"], ts(NEXT_DAY_MS));
    assert_eq!(held["hold"]["held_since"], ts(START_MS));
    assert_eq!(held["status_text"], held["hold"]["reason_text"]);
    assert_eq!(held["hold"]["reason_text"], "Daily spend ceiling reached");
    assert_eq!(
        held["hold"]["release_text"],
        "Released when the UTC day ends, or on the next poll tick after `agent.max_daily_cost_usd` is raised above the window's spend or is removed."
    );
    assert_eq!(
        held["status_text_full"],
        "Daily spend ceiling reached. Sortie starts no new agent session until every spend window that holds dispatch clears; running sessions go on."
    );
    assert_eq!(held["hold"]["blockers"], Value::Null);
    assert_eq!(held["hold"]["slot"], Value::Null);
    assert!(held["hold"].get("agent_kind").is_none());

    let items: Vec<&Value> = doc["attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "spend_ceiling_reached")
        .collect();
    assert_eq!(items.len(), 1, "{}", doc["attention"]);
    let item = items[0];
    let id = item_id(
        AttentionKind::SpendCeilingReached,
        &["daily".into(), "2027-01-15T00:00:00Z".into(), "0.01".into()],
    );
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["severity"], "critical");
    assert_eq!(item["since"], ts(START_MS));
    assert_eq!(item["acknowledged_at"], Value::Null);
    assert_eq!(item["reason_text"], "Daily spend ceiling reached");
    assert_eq!(
        item["why_text"],
        "The estimated spend today (UTC) is $0.05, reaching the daily ceiling of $0.01, so poll ticks and retries start no new agent session; running sessions go on."
    );
    assert!(
        item["clears_text"]
            .as_str()
            .unwrap()
            .contains("`agent.max_daily_cost_usd`")
    );
    assert_eq!(item["action"], json!({"kind": "acknowledge"}));
    assert_eq!(
        item["evidence"],
        json!({
            "reason": "daily_spend_ceiling",
            "used_usd": 0.05,
            "used_usd_complete": true,
            "budget_usd": 0.01,
            "resets_at": ts(NEXT_DAY_MS),
            "config_key": "agent.max_daily_cost_usd",
        })
    );
    assert!(item.get("issue_id").is_none(), "an item about the process");
    assert_eq!(doc["counts"]["attention"], 1);

    // The last millisecond of the day still holds, and the hold keeps when it began.
    let snap = tick_at(&mut p, NEXT_DAY_MS - 1);
    assert_eq!(held_reason(&snap, "S-1"), Some(&daily_hold));
    let doc = state_doc(&snap);
    assert_eq!(doc["held"][0]["hold"]["held_since"], ts(START_MS));
    assert_eq!(doc["attention"][0]["since"], ts(START_MS));
    assert_eq!(run_count(dir.path(), "1"), 0);

    // At 00:00 UTC the window is new and empty: the hold lifts and S-1 is dispatched.
    let snap = tick_at(&mut p, NEXT_DAY_MS);
    let daily = snap
        .spend_ceiling
        .as_ref()
        .and_then(|s| s.daily.clone())
        .unwrap();
    assert!(!daily.holds_dispatch);
    assert_eq!(daily.resets_at_ms, NEXT_DAY_MS + 86_400_000);
    assert!(held_reason(&snap, "S-1").is_none());
    let doc = state_doc(&snap);
    assert!(
        doc["attention"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["kind"] != "spend_ceiling_reached")
    );
    wait_dispatched(&mut p, dir.path());
}

#[test]
fn a_weekly_window_resets_on_monday() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(dir.path(), "  max_weekly_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS);
    let weekly_hold = HoldReason::SpendCeiling {
        window: SpendWindow::Weekly,
        resets_at_ms: NEXT_MONDAY_MS,
    };
    assert_eq!(held_reason(&snap, "S-1"), Some(&weekly_hold));
    let doc = state_doc(&snap);
    assert_eq!(doc["spend_ceiling"]["daily"], Value::Null);
    assert_eq!(doc["spend_ceiling"]["weekly"]["holds_dispatch"], true);
    assert_eq!(doc["held"][0]["hold"]["reason"], "weekly_spend_ceiling");
    assert_eq!(
        doc["attention"][0]["evidence"]["reason"],
        "weekly_spend_ceiling"
    );
    assert_eq!(
        doc["attention"][0]["evidence"]["config_key"],
        "agent.max_weekly_cost_usd"
    );
    // Saturday and the last millisecond of Sunday are the same week.
    let snap = tick_at(&mut p, NEXT_DAY_MS + 12 * 3_600_000);
    assert_eq!(held_reason(&snap, "S-1"), Some(&weekly_hold));
    let snap = tick_at(&mut p, NEXT_MONDAY_MS - 1);
    assert_eq!(held_reason(&snap, "S-1"), Some(&weekly_hold));
    let snap = tick_at(&mut p, NEXT_MONDAY_MS);
    assert!(held_reason(&snap, "S-1").is_none());
    wait_dispatched(&mut p, dir.path());
}

#[test]
fn a_monthly_window_resets_on_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(dir.path(), "  max_monthly_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS);
    let monthly_hold = HoldReason::SpendCeiling {
        window: SpendWindow::Monthly,
        resets_at_ms: NEXT_MONTH_MS,
    };
    assert_eq!(held_reason(&snap, "S-1"), Some(&monthly_hold));
    let doc = state_doc(&snap);
    assert_eq!(
        doc["attention"][0]["reason_text"],
        "Monthly spend ceiling reached"
    );
    // A Monday within the month does not reset it.
    let snap = tick_at(&mut p, NEXT_MONDAY_MS);
    assert_eq!(held_reason(&snap, "S-1"), Some(&monthly_hold));
    let snap = tick_at(&mut p, NEXT_MONTH_MS - 1);
    assert_eq!(held_reason(&snap, "S-1"), Some(&monthly_hold));
    let snap = tick_at(&mut p, NEXT_MONTH_MS);
    assert!(held_reason(&snap, "S-1").is_none());
    wait_dispatched(&mut p, dir.path());
}

#[test]
fn a_ceiling_raised_by_reload_lifts_the_hold_at_the_next_tick() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(dir.path(), "  max_daily_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS);
    assert!(matches!(
        held_reason(&snap, "S-1"),
        Some(HoldReason::SpendCeiling { .. })
    ));
    let first_id = state_doc(&snap)["attention"][0]["id"].clone();
    // Raised, but still below the spend: held again, under a new item id.
    let wf = dir.path().join("WORKFLOW.md");
    let text = std::fs::read_to_string(&wf).unwrap();
    std::fs::write(
        &wf,
        text.replace("max_daily_cost_usd: 0.01", "max_daily_cost_usd: 0.02"),
    )
    .unwrap();
    let snap = tick_at(&mut p, START_MS + 1_000);
    let doc = state_doc(&snap);
    assert_eq!(doc["spend_ceiling"]["daily"]["budget_usd"], 0.02);
    assert_eq!(doc["held"][0]["hold"]["reason"], "daily_spend_ceiling");
    assert_ne!(
        doc["attention"][0]["id"], first_id,
        "an edited ceiling is a new item"
    );
    assert_eq!(doc["attention"][0]["since"], ts(START_MS + 1_000));
    // Raised above the spend: the next tick dispatches.
    std::fs::write(
        &wf,
        text.replace("max_daily_cost_usd: 0.01", "max_daily_cost_usd: 1"),
    )
    .unwrap();
    let snap = tick_at(&mut p, START_MS + 2_000);
    assert!(held_reason(&snap, "S-1").is_none());
    assert_eq!(
        snap.spend_ceiling
            .as_ref()
            .and_then(|s| s.daily.as_ref())
            .map(|d| d.holds_dispatch),
        Some(false)
    );
    wait_dispatched(&mut p, dir.path());
    // Removed: the member is omitted.
    std::fs::write(&wf, text.replace("  max_daily_cost_usd: 0.01\n", "")).unwrap();
    let snap = tick_at(&mut p, START_MS + 3_000);
    assert!(snap.spend_ceiling.is_none());
    assert!(state_doc(&snap).get("spend_ceiling").is_none());
}

#[test]
fn runs_outside_the_window_and_ci_results_do_not_count_and_a_partial_run_is_a_lower_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = mock_orchestrator(
        dir.path(),
        ISSUES,
        "  max_daily_cost_usd: 1\n  max_weekly_cost_usd: 10\n",
    );
    // Yesterday (Thursday): this week, not today.
    record_cost(&p.store, DAY_START_MS - 1, 5.0, "estimated");
    // Today, a lower bound.
    record_cost(&p.store, DAY_START_MS, 0.25, "partial");
    let mut ci = RunRecord::new(RunStatus::CiFailed);
    ci.issue_id = "old".into();
    ci.identifier = "OLD-1".into();
    ci.agent_kind = "mock".into();
    ci.workspace = "/nowhere".into();
    ci.started_at_ms = START_MS - 10_000;
    ci.completed_at_ms = START_MS - 10_000;
    ci.estimated_cost_usd = Some(100.0);
    p.store.writer().record_run(ci, Vec::new()).unwrap();
    let snap = tick_at(&mut p, START_MS);
    let s = snap.spend_ceiling.clone().unwrap();
    let daily = s.daily.unwrap();
    assert!((daily.used_usd - 0.25).abs() < 1e-9, "{daily:?}");
    assert!(!daily.used_usd_complete);
    assert!(!daily.holds_dispatch);
    let weekly = s.weekly.unwrap();
    assert!((weekly.used_usd - 5.25).abs() < 1e-9, "{weekly:?}");
    assert!(s.monthly.is_none());
    assert!(held_reason(&snap, "S-1").is_none());
    wait_dispatched(&mut p, dir.path());
}

#[test]
fn the_live_estimate_of_running_sessions_counts_and_spend_beats_a_full_slot() {
    let dir = tempfile::tempdir().unwrap();
    let issues = r#"[{"id": "1", "identifier": "S-1", "title": "t", "state": "To Do", "priority": 1},
                    {"id": "2", "identifier": "S-2", "title": "t", "state": "To Do", "priority": 2}]"#;
    // 100 input tokens a turn at $10,000 per million: the running session is $1.00 so far.
    let mut p = mock_orchestrator(
        dir.path(),
        issues,
        "  max_daily_cost_usd: 1\n  max_concurrent_agents: 1\n\
         token_rates:\n  mock: {input_per_mtok: 10000, output_per_mtok: 0}\n\
         mock:\n  turn_delay_ms: 30000\n",
    );
    let snap = tick_at(&mut p, START_MS);
    assert!(snap.running.iter().any(|r| r.issue.id == "1"));
    assert!(matches!(
        held_reason(&snap, "S-2"),
        Some(HoldReason::AgentSlotsFull { .. })
    ));
    // Once the session's usage arrives, the next tick finds the window at its ceiling: S-2
    // shows the spend reason, not the full slot, and S-1 keeps running.
    step_until(&mut p.orch, "the session's usage", |s| {
        s.running
            .iter()
            .any(|r| r.issue.id == "1" && r.tokens_measured)
    });
    let snap = tick_at(&mut p, START_MS + 1_000);
    let daily = snap
        .spend_ceiling
        .as_ref()
        .and_then(|s| s.daily.clone())
        .unwrap();
    assert!((daily.used_usd - 1.0).abs() < 1e-9, "{daily:?}");
    assert!(daily.holds_dispatch);
    assert_eq!(
        held_reason(&snap, "S-2"),
        Some(&HoldReason::SpendCeiling {
            window: SpendWindow::Daily,
            resets_at_ms: NEXT_DAY_MS
        })
    );
    assert!(
        snap.running.iter().any(|r| r.issue.id == "1"),
        "a ceiling never stops a running session"
    );
}

#[test]
fn a_due_retry_is_held_by_a_spend_window_without_spending_an_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = mock_orchestrator(
        dir.path(),
        ISSUES,
        "mock:\n  issues:\n    S-1:\n      failing_sessions: 1\n",
    );
    step_until(&mut p.orch, "the failure retry", |s| {
        s.retrying.iter().any(|r| r.issue.id == "1")
    });
    let retry = p
        .orch
        .snapshot_now()
        .retrying
        .iter()
        .find(|r| r.issue.id == "1")
        .cloned()
        .unwrap();
    // A costly run ends and a daily ceiling appears before the retry comes due.
    record_cost(&p.store, START_MS, 0.05, "estimated");
    let wf = dir.path().join("WORKFLOW.md");
    let text = std::fs::read_to_string(&wf).unwrap();
    std::fs::write(
        &wf,
        text.replace(
            "  max_turns: 1\n",
            "  max_turns: 1\n  max_daily_cost_usd: 0.01\n",
        ),
    )
    .unwrap();
    // A tick reloads the workflow and evaluates the window before the retry comes due.
    let snap = tick_at(&mut p, START_MS + 1_000);
    assert!(snap.retrying.iter().any(|r| r.issue.id == "1"));
    let due = retry.due_at_ms;
    p.clock
        .advance(Duration::from_millis((due - p.clock.now_ms()) as u64));
    step_until(&mut p.orch, "the retry put back", |s| {
        s.retrying.iter().any(|r| {
            r.issue.id == "1" && r.error.as_deref() == Some(RescheduleReason::SpendCeiling.as_str())
        })
    });
    let snap = p.orch.snapshot_now();
    let back = snap.retrying.iter().find(|r| r.issue.id == "1").unwrap();
    assert_eq!(back.attempt, retry.attempt, "waiting is not a session");
    // It checks again after the backoff of its attempt (the reset is hours away).
    assert_eq!(back.due_at_ms, p.clock.now_ms() + 10_000);
    assert!(snap.running.is_empty());
    assert_eq!(run_count(dir.path(), "1"), 1);
    let doc = state_doc(&snap);
    assert_eq!(doc["spend_ceiling"]["daily"]["holds_dispatch"], true);
    assert_eq!(doc["retrying"][0]["error"], "spend ceiling reached");
}

#[test]
fn two_holding_windows_raise_two_items_and_the_hold_names_the_later_reset() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(
        dir.path(),
        "  max_daily_cost_usd: 0.01\n  max_monthly_cost_usd: 0.02\n",
    );
    let snap = tick_at(&mut p, START_MS);
    assert_eq!(
        held_reason(&snap, "S-1"),
        Some(&HoldReason::SpendCeiling {
            window: SpendWindow::Monthly,
            resets_at_ms: NEXT_MONTH_MS,
        })
    );
    let doc = state_doc(&snap);
    let reasons: Vec<&Value> = doc["attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["evidence"]["reason"])
        .collect();
    assert_eq!(reasons.len(), 2, "{}", doc["attention"]);
    assert!(reasons.contains(&&json!("daily_spend_ceiling")));
    assert!(reasons.contains(&&json!("monthly_spend_ceiling")));
    assert_eq!(doc["counts"]["attention"], 2);
    // The day turns: the daily window clears, the monthly one still holds.
    let snap = tick_at(&mut p, NEXT_DAY_MS);
    let doc = state_doc(&snap);
    assert_eq!(doc["spend_ceiling"]["daily"]["holds_dispatch"], false);
    assert_eq!(doc["held"][0]["hold"]["reason"], "monthly_spend_ceiling");
    assert_eq!(doc["attention"].as_array().unwrap().len(), 1);
    assert_eq!(run_count(dir.path(), "1"), 0);
}

#[test]
fn a_restart_keeps_the_item_id_and_its_acknowledgement_and_takes_a_new_since() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = held_setup(dir.path(), "  max_daily_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS);
    let before = state_doc(&snap)["attention"][0].clone();
    let id = before["id"].as_str().unwrap().to_string();
    let (tx, rx) = crossbeam_channel::bounded(1);
    p.handle
        .tx
        .send(sortie::orchestrator::OrchMsg::Acknowledge {
            ack: sortie::store::AttentionAck {
                item_id: id.clone(),
                kind: "spend_ceiling_reached".into(),
                acknowledged_at_ms: START_MS,
            },
            release_issue: None,
            reply: tx,
        })
        .unwrap();
    p.orch.step(Duration::from_millis(20));
    rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    drop(p);

    // Restarted a minute later, in the same window: the same item, acknowledged, newly dated.
    let mut p = mock_orchestrator(dir.path(), ISSUES, "  max_daily_cost_usd: 0.01\n");
    let snap = tick_at(&mut p, START_MS + 60_000);
    let doc = state_doc(&snap);
    let item = &doc["attention"][0];
    assert_eq!(item["id"], id.as_str());
    assert_eq!(item["since"], ts(START_MS + 60_000));
    assert_eq!(item["acknowledged_at"], ts(START_MS));
    assert_eq!(doc["counts"]["attention"], 0);
    assert_eq!(doc["held"][0]["hold"]["held_since"], ts(START_MS + 60_000));
}

#[test]
fn the_window_query_counts_only_runs_that_ended_in_it_and_flags_unfrozen_ones() {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(sortie::clock::ManualClock::new(START_MS));
    let store = Store::open(&dir.path().join("sortie.db"), clock).unwrap();
    let w = store.writer();
    let empty = w.window_spend(DAY_START_MS, NEXT_DAY_MS).unwrap();
    assert_eq!((empty.usd, empty.runs, empty.incomplete_runs), (0.0, 0, 0));
    record_cost(&store, DAY_START_MS, 1.5, "estimated");
    record_cost(&store, NEXT_DAY_MS - 1, 0.5, "unpriced");
    // At the end: the next window's.
    record_cost(&store, NEXT_DAY_MS, 7.0, "estimated");
    let got = w.window_spend(DAY_START_MS, NEXT_DAY_MS).unwrap();
    assert_eq!((got.usd, got.runs, got.incomplete_runs), (2.0, 2, 1));
    // A run recorded before costs were frozen: complete only when it spent nothing.
    let mut legacy = RunRecord::new(RunStatus::Failed);
    legacy.issue_id = "l".into();
    legacy.identifier = "L-1".into();
    legacy.agent_kind = "mock".into();
    legacy.workspace = "/nowhere".into();
    legacy.started_at_ms = START_MS - 1;
    legacy.completed_at_ms = START_MS;
    legacy.tokens_measured = true;
    w.record_run(legacy.clone(), Vec::new()).unwrap();
    let got = w.window_spend(START_MS, START_MS + 1).unwrap();
    assert_eq!((got.runs, got.incomplete_runs), (1, 0));
    legacy.total_tokens = 10;
    legacy.input_tokens = 10;
    legacy.completed_at_ms = START_MS + 1;
    w.record_run(legacy, Vec::new()).unwrap();
    let got = w.window_spend(START_MS + 1, START_MS + 2).unwrap();
    assert_eq!((got.runs, got.incomplete_runs), (1, 1));
}

#[test]
fn spend_sentences_state_the_cost_against_the_ceiling_and_a_lower_bound_as_at_least() {
    use sortie::http::wording::{attention_spend_ceiling, spend_ceiling_hold, usd};
    assert_eq!(usd(41.27), "$41.27");
    assert_eq!(usd(0.05), "$0.05");
    assert_eq!(usd(0.004), "$0.0040");
    assert_eq!(usd(0.0), "$0.00");
    assert_eq!(usd(f64::NAN), "$0.00");
    let w = attention_spend_ceiling(SpendWindow::Weekly, 212.5, false, 200.0);
    assert_eq!(w.reason, "Weekly spend ceiling reached");
    assert_eq!(
        w.why,
        "The estimated spend this week (UTC, from Monday) is at least $212.50, reaching the weekly ceiling of $200.00, so poll ticks and retries start no new agent session; running sessions go on."
    );
    assert_eq!(
        w.clears,
        "Clears when the UTC week ends, or on the next poll tick after `agent.max_weekly_cost_usd` is raised above the window's spend or is removed."
    );
    let (reason, release, full) = spend_ceiling_hold(SpendWindow::Monthly);
    assert_eq!(reason, "Monthly spend ceiling reached");
    assert!(!reason.ends_with('.') && release.ends_with('.') && full.ends_with('.'));
    assert!(release.contains("when the UTC month ends"));
}
