//! The aggregation over real database files: what it refuses, that it never creates the file,
//! and the figures of a few runs written through the store's write path.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::clock::ManualClock;
use crate::domain::RunStatus;
use crate::store::{RunRecord, Store};

const T0: i64 = 1_774_533_600_000;

fn request(db: &Path) -> StatsRequest<'_> {
    StatsRequest {
        db_path: db,
        workflow_path: "/srv/WORKFLOW.md",
        now_ms: T0,
        range: Range::default(),
        chains: &[],
    }
}

fn run(issue: &str, status: RunStatus, completed_ms: i64, duration_s: i64) -> RunRecord {
    RunRecord {
        issue_id: issue.into(),
        identifier: issue.into(),
        started_at_ms: completed_ms - duration_s * 1000,
        completed_at_ms: completed_ms,
        workspace: "/tmp/ws".into(),
        tokens_measured: true,
        usage_completeness: "complete".into(),
        input_tokens: 100,
        output_tokens: 10,
        total_tokens: 110,
        cache_read_tokens: 200,
        ..RunRecord::new(status)
    }
}

#[test]
fn a_missing_file_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    assert!(matches!(build(&request(&db)), Err(StatsError::Store(_))));
    assert!(!db.exists());
}

#[test]
fn a_database_without_the_run_columns_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    let mut conn = connection::open_read_write(&db).unwrap();
    migrate::apply(&mut conn, &migrate::MIGRATIONS[..5], &ManualClock::new(T0)).unwrap();
    drop(conn);
    let e = build(&request(&db)).err();
    assert!(
        matches!(
            e,
            Some(StatsError::SchemaTooOld {
                found: 5,
                needed: 6
            })
        ),
        "{e:?}"
    );
    let not_sortie = dir.path().join("other.db");
    rusqlite::Connection::open(&not_sortie)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    assert!(matches!(
        build(&request(&not_sortie)),
        Err(StatsError::Store(_))
    ));
}

#[test]
fn figures_of_stored_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    let store = Store::open(&db, Arc::new(ManualClock::new(T0))).unwrap();
    let mut stopped = run("b", RunStatus::BudgetStopped, T0 + 2_000, 30);
    stopped.estimated_cost_usd = Some(0.1);
    stopped.cost_status = "estimated".into();
    for r in [
        run("a", RunStatus::Succeeded, T0, 10),
        run("a", RunStatus::NeedsPerson, T0 + 1_000, 20),
        stopped,
        run("c", RunStatus::CiFailed, T0 + 3_000, 5),
    ] {
        store.writer().record_run(r, Vec::new()).unwrap();
    }
    store.close().unwrap();
    let r = build(&request(&db)).unwrap();
    let s = &r.summary;
    assert_eq!((s.runs, s.issues), (3, 2));
    assert_eq!(
        (s.succeeded, s.failed, s.stopped, s.cancelled),
        (1, 1, 1, 0)
    );
    assert_eq!(s.success_rate, Some(0.3333));
    assert_eq!(
        (s.duration_seconds.p50, s.duration_seconds.p95),
        (Some(20.0), Some(30.0))
    );
    assert_eq!(s.duration_seconds.mean, Some(20.0));
    // Cache reads above the total floor the uncached figure at zero.
    let t = s.tokens.unwrap();
    assert_eq!((t.total, t.cache_read, t.uncached), (330, 600, 0));
    // Two runs carry no cost status at all: they read as unpriced.
    assert_eq!((s.cost_usd, s.cost_unpriced_runs), (Some(0.1), 2));
    assert!(s.cost_lower_bound);
    assert!(!s.tokens_lower_bound);
    assert_eq!(s.cost_per_succeeded_run_usd, Some(0.1));
    assert_eq!(r.generated_at, "2026-03-26T14:00:00Z");
    assert_eq!((r.since.as_deref(), r.until.as_deref()), (None, None));
    // The runs record no agent kind, rule, template, model, trigger or provenance.
    for g in [
        &r.by_adapter,
        &r.by_rule,
        &r.by_template,
        &r.by_model,
        &r.by_trigger,
    ] {
        assert_eq!(g.len(), 1);
    }
    assert_eq!(r.by_adapter[0].name, "<none>");
    assert_eq!(r.by_trigger[0].name, "<unknown>");
    assert_eq!(r.by_origin[0].name, "<unknown>");
    assert_eq!(r.by_provenance[0].name, "<unknown>");
    let statuses: Vec<&str> = r.by_status.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(statuses, ["budget_stopped", "needs_person", "succeeded"]);
    assert_eq!(r.spend.period, "day");
    assert_eq!(r.spend.buckets.len(), 1);
    assert_eq!(r.skill_calls.unrecorded_runs, 3);
}

#[test]
fn a_long_range_buckets_by_month() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    let store = Store::open(&db, Arc::new(ManualClock::new(T0))).unwrap();
    for (i, at) in [T0, T0 + 40 * 86_400_000, T0 + 100 * 86_400_000]
        .into_iter()
        .enumerate()
    {
        let r = run(&format!("i{i}"), RunStatus::Succeeded, at, 60);
        store.writer().record_run(r, Vec::new()).unwrap();
    }
    store.close().unwrap();
    let r = build(&request(&db)).unwrap();
    assert_eq!(r.spend.period, "month");
    let starts: Vec<&str> = r.spend.buckets.iter().map(|b| b.start.as_str()).collect();
    assert_eq!(
        starts,
        [
            "2026-03-01T00:00:00Z",
            "2026-05-01T00:00:00Z",
            "2026-07-01T00:00:00Z"
        ]
    );
    let mut short = request(&db);
    short.range = Range {
        since_ms: Some(T0 - 1),
        until_ms: Some(T0 + 50 * 86_400_000),
    };
    let r = build(&short).unwrap();
    assert_eq!((r.spend.period.as_str(), r.spend.buckets.len()), ("day", 2));
}

#[test]
fn hour_buckets_carry_tokens_outcomes_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    let store = Store::open(&db, Arc::new(ManualClock::new(T0))).unwrap();
    const HOUR: i64 = 3_600_000;
    let mut priced = run("a", RunStatus::Succeeded, T0 + 60_000, 10);
    priced.estimated_cost_usd = Some(0.25);
    priced.cost_status = "estimated".into();
    for r in [
        priced,
        run("b", RunStatus::Failed, T0 + 120_000, 10),
        run("c", RunStatus::Cancelled, T0 + 2 * HOUR + 5, 10),
    ] {
        store.writer().record_run(r, Vec::new()).unwrap();
    }
    store.close().unwrap();
    let mut req = request(&db);
    req.range.since_ms = Some(T0 - HOUR);
    let r = build_by(&req, Some(Period::Hour)).unwrap();
    assert_eq!(r.spend.period, "hour");
    let b = &r.spend.buckets;
    let starts: Vec<&str> = b.iter().map(|b| b.start.as_str()).collect();
    assert_eq!(starts, ["2026-03-26T14:00:00Z", "2026-03-26T16:00:00Z"]);
    assert_eq!(
        (b[0].runs, b[0].succeeded, b[0].failed, b[0].cancelled),
        (2, 1, 1, 0)
    );
    assert_eq!(
        b[0].tokens.map(|t| (t.input, t.output, t.total)),
        Some((200, 20, 220))
    );
    assert_eq!(b[0].cost_usd, Some(0.25));
    assert_eq!((b[1].runs, b[1].cancelled, b[1].cost_usd), (1, 1, None));
    // Without a period, the same runs fall into one day, with the same figures summed.
    let day = build(&req).unwrap();
    assert_eq!(day.spend.period, "day");
    assert_eq!(day.spend.buckets[0].runs, 3);
    assert_eq!(day.spend.buckets[0].tokens.map(|t| t.total), Some(330));
    // Hours over a range wider than 31 days, or without a since, do not fit.
    assert!(!Period::Hour.fits(&Range::default(), T0));
    let wide = Range {
        since_ms: Some(T0 - 32 * 86_400_000),
        until_ms: None,
    };
    assert!(!Period::Hour.fits(&wide, T0));
    assert!(Period::Day.fits(&Range::default(), T0));
}

fn staged(issue: &str, chain: &str, rule: &str, target: &str, result: &str, at: i64) -> RunRecord {
    RunRecord {
        chain_id: chain.into(),
        rule_name: rule.into(),
        stage_target: target.into(),
        stage_result: result.into(),
        ..run(issue, RunStatus::Succeeded, at, 10)
    }
}

#[test]
fn chains_group_passes_with_a_hop_and_funnel_each_stage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(".sortie.db");
    let store = Store::open(&db, Arc::new(ManualClock::new(T0))).unwrap();
    let mut failed = staged("b", "pb", "specify", "", "", T0 + 4_000);
    failed.status = RunStatus::Failed;
    for r in [
        staged("a", "pa", "specify", "implement", "advanced", T0),
        staged("a", "pa", "implement", "", "", T0 + 1_000),
        staged("b", "pb", "specify", "implement", "ceiling", T0 + 2_000),
        failed,
        // A pass on no chain: neither listed nor funnelled.
        staged("c", "pc", "", "", "", T0 + 3_000),
    ] {
        store.writer().record_run(r, Vec::new()).unwrap();
    }
    store.close().unwrap();
    let chains = vec![vec!["specify".to_string(), "implement".to_string()]];
    let r = build(&StatsRequest {
        chains: &chains,
        ..request(&db)
    })
    .unwrap();
    let by: Vec<_> = r
        .by_chain
        .iter()
        .map(|c| {
            (
                c.group.name.as_str(),
                c.group.runs,
                c.issue_identifier.as_str(),
                c.rules.clone(),
                c.hops_made,
                c.hops_not_made,
            )
        })
        .collect();
    assert_eq!(
        by,
        vec![
            (
                "pa",
                2,
                "a",
                vec!["specify".into(), "implement".into()],
                1,
                0
            ),
            ("pb", 2, "b", vec!["specify".into()], 0, 1),
        ]
    );
    let v = serde_json::to_value(&r.chain_funnels).unwrap();
    assert_eq!(
        v,
        serde_json::json!([{"chain": ["specify", "implement"], "stages": [
            {"rule": "specify", "passes": 2, "succeeded": 2, "advanced": 1, "not_advanced": 1,
             "running": 0, "queued": 0, "budget_held": 0},
            {"rule": "implement", "passes": 1, "succeeded": 1, "advanced": 0, "not_advanced": 0,
             "running": 0, "queued": 0, "budget_held": 0}]}])
    );
    // A by_chain entry carries every member of a breakdown group, then its own.
    let first = serde_json::to_value(&r.by_chain[0]).unwrap();
    assert_eq!(first["name"], "pa");
    assert_eq!(first["share"], 0.4);
}
