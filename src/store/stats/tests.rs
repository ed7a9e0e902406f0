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
