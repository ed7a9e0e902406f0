//! Several workflows in one database: handles scoped to two workflows share the writer and the
//! read pool, keep apart the rows of an issue id both know, and a read across every workflow
//! returns both with their workflow; a database of the previous schema migrates with every row
//! kept as the single workflow (`''`).

mod common;

use common::store::*;
use sortie::domain::{OutcomeKind, ParkReason, RetryTrigger, RunStatus};
use sortie::store::stats::{self, Range, StatsRequest};
use sortie::store::{
    AttentionAck, FailureHoldRow, IssueOutcome, ParkedIssue, RetryEntry, RunFilter, RunWrite,
    Scope, SessionMeta, Store, StoreError, UsageHoldRow, connection, migrate,
};

fn retry(attempt: i64) -> RetryEntry {
    RetryEntry {
        issue_id: "i1".into(),
        identifier: "MT-1".into(),
        attempt,
        due_at_ms: T0 + attempt * 1_000,
        trigger: Some(RetryTrigger::Error),
        ..Default::default()
    }
}

fn session(session_id: &str) -> SessionMeta {
    SessionMeta {
        issue_id: "i1".into(),
        session_id: session_id.into(),
        identifier: "MT-1".into(),
        updated_at_ms: T0,
        ..Default::default()
    }
}

fn failure_hold(cause: &str) -> FailureHoldRow {
    FailureHoldRow {
        issue_id: "i1".into(),
        identifier: "MT-1".into(),
        cause: cause.into(),
        runs: 1,
        since_ms: T0,
        ..Default::default()
    }
}

fn usage_hold(resets_at_ms: i64) -> UsageHoldRow {
    UsageHoldRow {
        agent_kind: "claude-code".into(),
        model_only: false,
        model: String::new(),
        resets_at_ms,
        since_ms: T0,
    }
}

/// Writes the same issue id's rows through `store`, each told apart by `tag`.
fn write_issue(store: &Store, tag: i64, dispatch_id: &str) {
    let w = store.writer();
    w.upsert_retry(retry(tag)).unwrap();
    let mut r = run("i1", dispatch_id, T0 + tag * 60_000);
    r.input_tokens = tag;
    w.record_run(r, events(2, T0, 10)).unwrap();
    w.upsert_session(session(&format!("sess-{tag}"))).unwrap();
    w.park(ParkedIssue::new("i1", ParkReason::AgentBlocked))
        .unwrap();
    w.upsert_failure_hold(failure_hold(&format!("cause-{tag}")))
        .unwrap();
    w.upsert_usage_hold(usage_hold(T0 + tag)).unwrap();
    w.set_outcome(IssueOutcome::new("i1", OutcomeKind::HandedOff))
        .unwrap();
    w.acknowledge(AttentionAck {
        item_id: "0123456789abcdef0123456789abcdef".into(),
        kind: "agent_blocked".into(),
        acknowledged_at_ms: T0 + tag,
    })
    .unwrap();
    w.flush().unwrap();
}

#[test]
fn two_workflows_with_the_same_issue_id_do_not_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("w.db"), clock()).unwrap();
    let (a, b) = (store.scoped("a"), store.scoped("b"));
    assert_eq!((store.workflow(), a.workflow()), ("", "a"));
    write_issue(&a, 1, "DA");
    write_issue(&b, 2, "DB");

    for (handle, tag, name) in [(&a, 1, "a"), (&b, 2, "b")] {
        let read = handle.read_conn().unwrap();
        assert_eq!(read.scope(), &Scope::one(name));
        assert_eq!(read.load_retry_entries().unwrap(), vec![retry(tag)]);
        let runs = read.list_runs(&RunFilter::default(), None, 10).unwrap();
        assert_eq!(runs.runs.len(), 1, "{name}");
        assert_eq!(runs.runs[0].workflow, name);
        assert_eq!(runs.runs[0].input_tokens, tag);
        assert_eq!(read.count_runs_for_issue("i1").unwrap(), 1);
        let session = read.session("i1").unwrap().unwrap();
        assert_eq!(session.session_id, format!("sess-{tag}"));
        let snap = read.warm_start_snapshot().unwrap();
        assert_eq!(snap.retries, vec![retry(tag)]);
        assert_eq!(snap.parks.len(), 1);
        assert_eq!(snap.failure_holds.len(), 1);
        assert_eq!(snap.failure_holds[0].cause, format!("cause-{tag}"));
        assert_eq!(snap.usage_holds, vec![usage_hold(T0 + tag)]);
        assert_eq!(snap.outcomes.len(), 1);
        assert_eq!(snap.acknowledgements.len(), 1);
        assert_eq!(snap.acknowledgements[0].acknowledged_at_ms, T0 + tag);
        assert_eq!(snap.sessions.len(), 1);
        assert_eq!((snap.totals.dispatches, snap.totals.input_tokens), (1, tag));
        let groups = read
            .list_issue_groups(&RunFilter::default(), None, 10)
            .unwrap();
        assert_eq!(groups.groups.len(), 1);
        // The pooled connections read the handle's workflow too.
        let spend = handle.read_pool().with(|c| c.issue_spend("i1")).unwrap();
        assert_eq!(spend.sessions, 1, "{name}");
        // Budget reads on the writer's connection count the handle's runs only.
        let usage = handle.writer().usage_for_issue("i1").unwrap();
        assert_eq!(usage.sessions, 1, "{name}");
        assert_eq!(handle.writer().usage_by_issue().unwrap().len(), 1);
    }
    // A run id of the other workflow is not found through a scoped read.
    let a_read = a.read_conn().unwrap();
    let b_run = b
        .read_conn()
        .unwrap()
        .list_runs(&RunFilter::default(), None, 1);
    let b_run_id = b_run.unwrap().runs[0].run_id;
    assert!(a_read.run(b_run_id).unwrap().is_none());
    assert!(b.read_conn().unwrap().run(b_run_id).unwrap().is_some());

    // The single workflow sees neither.
    let single = store.read_conn().unwrap().warm_start_snapshot().unwrap();
    assert!(single.retries.is_empty() && single.sessions.is_empty());
    assert!(single.failure_holds.is_empty() && single.usage_holds.is_empty());
    assert_eq!(single.totals.dispatches, 0);

    // Deleting in one workflow leaves the other's row.
    a.writer().delete_retry("i1").unwrap();
    a.writer().unpark("i1").unwrap();
    a.writer().delete_failure_hold("i1".into()).unwrap();
    a.writer().delete_usage_hold(usage_hold(0)).unwrap();
    a.writer().flush().unwrap();
    let a_snap = a.read_conn().unwrap().warm_start_snapshot().unwrap();
    assert!(a_snap.retries.is_empty() && a_snap.parks.is_empty());
    assert!(a_snap.failure_holds.is_empty() && a_snap.usage_holds.is_empty());
    let b_snap = b.read_conn().unwrap().warm_start_snapshot().unwrap();
    assert_eq!(b_snap.retries, vec![retry(2)]);
    assert_eq!((b_snap.parks.len(), b_snap.failure_holds.len()), (1, 1));
    assert_eq!(b_snap.usage_holds.len(), 1);
}

#[test]
fn a_read_across_workflows_returns_both_with_their_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let store = Store::open(&path, clock()).unwrap();
    write_issue(&store.scoped("a"), 1, "DA");
    write_issue(&store.scoped("b"), 2, "DB");
    let all = store.read_conn().unwrap().with_scope(Scope::All);

    let retries = all.retries_in().unwrap();
    assert_eq!(
        retries
            .iter()
            .map(|r| r.workflow.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(retries[1].row, retry(2));
    let runs = all.list_runs(&RunFilter::default(), None, 10).unwrap();
    let mut run_workflows: Vec<_> = runs.runs.iter().map(|r| r.workflow.clone()).collect();
    run_workflows.sort();
    assert_eq!(run_workflows, ["a", "b"]);
    assert_eq!(all.count_runs_for_issue("i1").unwrap(), 2);
    let groups = all.list_issue_groups(&RunFilter::default(), None, 10);
    assert_eq!(groups.unwrap().groups.len(), 2, "one group per workflow");
    let holds = all.failure_holds_in().unwrap();
    let hold_of = |w: &str| holds.iter().find(|h| h.workflow == w).map(|h| &h.row.cause);
    assert_eq!(hold_of("a").map(String::as_str), Some("cause-1"));
    assert_eq!(hold_of("b").map(String::as_str), Some("cause-2"));
    let usage = all.usage_holds_in().unwrap();
    assert_eq!(
        usage
            .iter()
            .map(|h| (h.workflow.as_str(), h.row.resets_at_ms))
            .collect::<Vec<_>>(),
        [("a", T0 + 1), ("b", T0 + 2)]
    );
    assert_eq!(all.parks_in().unwrap().len(), 2);
    let acks = all.acknowledgements_in().unwrap();
    assert_eq!(
        acks.iter().map(|a| a.workflow.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(all.sessions_in().unwrap().len(), 2);
    let pooled = store.read_pool_in(Scope::All).with(|c| c.issue_spend("i1"));
    assert_eq!(pooled.unwrap().sessions, 2);
    let (a_spend, all_spend) = (
        store
            .scoped("a")
            .writer()
            .window_spend(T0, T0 + DAY_MS)
            .unwrap(),
        store
            .writer()
            .window_spend_in(Scope::All, T0, T0 + DAY_MS)
            .unwrap(),
    );
    assert_eq!((a_spend.runs, all_spend.runs), (1, 2));

    let totals = all.aggregate_totals().unwrap();
    assert_eq!((totals.dispatches, totals.input_tokens), (2, 3));
    assert_eq!(totals.exits.get("succeeded"), Some(&2));
    let by_workflow = all.aggregate_totals_by_workflow().unwrap();
    assert_eq!(
        by_workflow
            .iter()
            .map(|t| (t.workflow.as_str(), t.row.dispatches, t.row.input_tokens))
            .collect::<Vec<_>>(),
        [("a", 1, 1), ("b", 1, 2)]
    );

    // The run statistics: every workflow, one, and the single workflow of this database.
    let req = StatsRequest {
        db_path: &path,
        workflow_path: "WORKFLOW.md",
        now_ms: T0 + DAY_MS,
        range: Range::default(),
        chains: &[],
    };
    let count = |scope: &Scope| stats::build_in(&req, None, scope).unwrap().summary.runs;
    assert_eq!(count(&Scope::All), 2);
    assert_eq!(count(&Scope::one("b")), 1);
    assert_eq!(count(&Scope::single()), 0);
}

#[test]
fn a_kept_write_commits_under_its_own_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let c = clock();
    let store = Store::open(&path, c.clone()).unwrap();
    let (a, b) = (store.scoped("a"), store.scoped("b"));
    // Another connection holds the write lock: every write fails with SQLITE_BUSY after the
    // writer's busy timeout and is kept, in order.
    let lock = raw(&path);
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    a.writer().upsert_retry(retry(1)).unwrap();
    let kept = b.writer().record(RunWrite {
        run: run("i1", "DB", T0),
        events: Vec::new(),
        session: Some(session("sess-b")),
    });
    assert!(
        matches!(kept, Err(StoreError::WriteKept { .. })),
        "{kept:?}"
    );
    lock.execute_batch("ROLLBACK").unwrap();
    c.advance(std::time::Duration::from_secs(30));
    store.writer().flush().unwrap();
    store.writer().ping().unwrap();

    let a_read = a.read_conn().unwrap();
    assert_eq!(a_read.load_retry_entries().unwrap(), vec![retry(1)]);
    assert_eq!(a_read.count_runs_for_issue("i1").unwrap(), 0);
    let b_read = b.read_conn().unwrap();
    assert!(b_read.load_retry_entries().unwrap().is_empty());
    assert_eq!(b_read.count_runs_for_issue("i1").unwrap(), 1);
    assert_eq!(b_read.session("i1").unwrap().unwrap().session_id, "sess-b");
    assert_eq!(b_read.aggregate_totals().unwrap().dispatches, 1);
    assert!(a_read.session("i1").unwrap().is_none());
}

/// Every table migration 016 rebuilds, with one row each as the previous schema stored it.
const V15_ROWS: &str = "
    INSERT INTO retry_entries (issue_id, identifier, attempt, due_at_ms, error)
        VALUES ('i1', 'MT-1', 2, 1774533700000, 'boom');
    INSERT INTO run_history (issue_id, identifier, attempt, agent_adapter, workspace,
        started_at, completed_at, status, dispatch_id)
        VALUES ('i1', 'MT-1', 1, 'claude-code', '/ws/MT-1', '2026-03-26T14:00:00.000Z',
                '2026-03-26T14:05:00.000Z', 'succeeded', 'D1');
    INSERT INTO session_metadata (issue_id, session_id, updated_at_ms, identifier)
        VALUES ('i1', 'sess-1', 1774533600000, 'MT-1');
    INSERT INTO aggregate_metrics (key, total_tokens, dispatches)
        VALUES ('agent_totals', 30, 1);
    INSERT INTO aggregate_exits (exit_type, count) VALUES ('succeeded', 1);
    INSERT INTO parked_issues (issue_id, identifier, reason, parked_at_ms)
        VALUES ('i1', 'MT-1', 'agent_blocked', 1774533600000);
    INSERT INTO issue_outcomes (issue_id, kind, observed_at_ms)
        VALUES ('i1', 'handed_off', 1774533600000);
    INSERT INTO attention_acks (item_id, kind, acknowledged_at_ms)
        VALUES ('0123456789abcdef0123456789abcdef', 'agent_blocked', 1774533600000);
    INSERT INTO agent_usage_holds (agent_kind, resets_at_ms, since_ms)
        VALUES ('claude-code', 1774537200000, 1774533600000);
    INSERT INTO reaction_escalations (issue_id, kind, escalated_at_ms, escalation_trigger,
        identifier, pr_owner, pr_repo, pr_number)
        VALUES ('i1', 'ci', 1774533600000, 'budget_exhausted', 'MT-1', 'acme', 'shop', 7);
    INSERT INTO reaction_fingerprints (issue_id, kind, fingerprint, updated_at_ms)
        VALUES ('i1', 'ci', 'f1', 1774533600000);
    INSERT INTO reaction_given_comments (issue_id, pr_key, comment_id)
        VALUES ('i1', 'acme/shop#7', 'c1');
    INSERT INTO stage_hops (issue_id, identifier, hop_count) VALUES ('i1', 'MT-1', 1);
    INSERT INTO failure_holds (issue_id, identifier, cause, runs, since_ms)
        VALUES ('i1', 'MT-1', 'agent_auth_failed', 1, 1774533600000);
    INSERT INTO triage_answers (issue_id, kind, fingerprint, answer, answered_at_ms)
        VALUES ('i1', 'ci', 'f1', 'ignore', 1774533600000);
    INSERT INTO live_stage_passes (issue_id, kind, rule_name, since_ms)
        VALUES ('i1', 'session', 'implement', 1774533600000);
    INSERT INTO handoff_absence (issue_id, withheld_in_a_row, updated_at_ms)
        VALUES ('i1', 2, 1774533600000);
    INSERT INTO pr_loop (issue_id, chain_id, reaction_key, acted, updated_at_ms)
        VALUES ('i1', 'c1', 'ci_failure', 1, 1774533600000);
";

const KEYED_TABLES: [&str; 18] = [
    "retry_entries",
    "run_history",
    "session_metadata",
    "aggregate_metrics",
    "aggregate_exits",
    "parked_issues",
    "issue_outcomes",
    "attention_acks",
    "agent_usage_holds",
    "reaction_escalations",
    "reaction_fingerprints",
    "reaction_given_comments",
    "stage_hops",
    "failure_holds",
    "triage_answers",
    "live_stage_passes",
    "handoff_absence",
    "pr_loop",
];

#[test]
fn a_database_of_the_previous_schema_keeps_every_row_as_the_single_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    let previous = migrate::MIGRATIONS
        .iter()
        .position(|m| m.name == "016_workflow_keys")
        .unwrap();
    {
        let mut conn = connection::open_read_write(&path).unwrap();
        migrate::apply(&mut conn, &migrate::MIGRATIONS[..previous], c.as_ref()).unwrap();
        conn.execute_batch(V15_ROWS).unwrap();
        for table in KEYED_TABLES {
            assert_eq!(count(&conn, &format!("SELECT COUNT(*) FROM {table}")), 1);
        }
    }
    let store = Store::open(&path, c.clone()).unwrap();
    let raw = raw(&path);
    assert_eq!(migrate::current_version(&raw).unwrap(), 16);
    for table in KEYED_TABLES {
        assert_eq!(
            count(
                &raw,
                &format!("SELECT COUNT(*) FROM {table} WHERE workflow = ''")
            ),
            1,
            "{table}: its row kept, as the single workflow"
        );
    }
    let read = store.read_conn().unwrap();
    assert_eq!(read.integrity_check().unwrap(), "ok");
    let snap = read.warm_start_snapshot().unwrap();
    assert_eq!(snap.retries.len(), 1);
    assert_eq!(snap.retries[0].error.as_deref(), Some("boom"));
    assert_eq!((snap.sessions.len(), snap.parks.len()), (1, 1));
    assert_eq!((snap.outcomes.len(), snap.acknowledgements.len()), (1, 1));
    assert_eq!((snap.usage_holds.len(), snap.failure_holds.len()), (1, 1));
    assert_eq!(snap.stage_hops.len(), 1);
    assert_eq!(snap.handoff_absence, vec![("i1".to_string(), 2)]);
    assert_eq!(snap.reactions.escalations.len(), 1);
    assert_eq!(snap.reactions.fingerprints.len(), 1);
    assert_eq!(snap.reactions.given.len(), 1);
    assert_eq!(snap.reactions.triage_answers.len(), 1);
    assert_eq!((snap.totals.total_tokens, snap.totals.dispatches), (30, 1));
    assert_eq!(snap.totals.exits.get("succeeded"), Some(&1));
    let runs = read.list_runs(&RunFilter::default(), None, 10).unwrap();
    assert_eq!(runs.runs.len(), 1);
    assert_eq!(runs.runs[0].workflow, "");
    assert_eq!(runs.runs[0].status, RunStatus::Succeeded);
    let pass = read
        .pr_loop(&[("i1".to_string(), "c1".to_string())])
        .unwrap();
    assert_eq!(pass.len(), 1);

    // Another workflow starts empty, and the same issue id gets rows of its own beside them.
    let other = store.scoped("other");
    assert!(
        other
            .read_conn()
            .unwrap()
            .warm_start_snapshot()
            .unwrap()
            .retries
            .is_empty()
    );
    other.writer().upsert_retry(retry(5)).unwrap();
    other
        .writer()
        .record_run(run("i1", "D2", T0), Vec::new())
        .unwrap();
    assert_eq!(count(&raw, "SELECT COUNT(*) FROM retry_entries"), 2);
    let single = store.read_conn().unwrap();
    assert_eq!(single.load_retry_entries().unwrap()[0].attempt, 2);
    assert_eq!(single.count_runs_for_issue("i1").unwrap(), 1);
    assert_eq!(single.aggregate_totals().unwrap().dispatches, 1);
}
