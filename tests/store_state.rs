//! Retries, sessions, parks, outcomes and acknowledgements across reopen; the warm-start
//! snapshot.

mod common;

use common::store::*;
use sortie::clock::Clock;
use sortie::domain::{OutcomeKind, ParkReason, RetryTrigger};
use sortie::store::{
    AttentionAck, IssueOutcome, ParkedIssue, RetryEntry, SessionMeta, Store, StoreError,
};

fn retry_entry() -> RetryEntry {
    RetryEntry {
        issue_id: "i1".into(),
        identifier: "MT-1".into(),
        display_identifier: "acme/shop#1".into(),
        attempt: 3,
        due_at_ms: T0 + 160_000,
        error: Some("agent exited 1".into()),
        session_id: Some("sess-1".into()),
        agent_kind: "claude-code".into(),
        template: "implement.md".into(),
        rule_name: "implement".into(),
        chain_id: "chain-1".into(),
        stage_previous: "specify".into(),
        stage_previous_outcome: "succeeded".into(),
        trigger: Some(RetryTrigger::Error),
        reaction_kind: String::new(),
        reaction_config_key: String::new(),
        issue_title: "Fix it".into(),
        issue_url: "https://tracker.example.com/MT-1".into(),
        issue_type: "Bug".into(),
        issue_labels: vec!["backend".into(), "p1".into()],
        issue_state: "In Progress".into(),
        configured_model: "model-a".into(),
        dispatched_at_ms: Some(T0 - 60_000),
        reaction_context: None,
    }
}

#[test]
fn retry_entries_round_trip_with_absolute_due_at() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    {
        let store = Store::open(&path, c.clone()).unwrap();
        let w = store.writer();
        w.upsert_retry(retry_entry()).unwrap();
        let mut other = retry_entry();
        other.issue_id = "i2".into();
        other.due_at_ms = T0 - 5_000;
        w.upsert_retry(other).unwrap();
        let mut gone = retry_entry();
        gone.issue_id = "i3".into();
        w.upsert_retry(gone).unwrap();
        w.delete_retry("i3").unwrap();
    }
    // 100 s of downtime: i1 (due in 160 s) has 60 s left; the overdue i2 fires at once.
    c.advance(std::time::Duration::from_secs(100));
    let store = Store::open(&path, c.clone()).unwrap();
    let retries = store.read_conn().unwrap().load_retry_entries().unwrap();
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0].issue_id, "i2", "soonest first");
    assert_eq!(retries[0].remaining_ms(c.now_ms()), 0);
    assert_eq!(retries[1], retry_entry());
    assert_eq!(retries[1].remaining_ms(c.now_ms()), 60_000);
    // Upsert replaces.
    let mut next = retry_entry();
    next.attempt = 4;
    store.writer().upsert_retry(next.clone()).unwrap();
    store.writer().flush().unwrap();
    let retries = store.read_conn().unwrap().load_retry_entries().unwrap();
    assert_eq!(retries[1], next);
}

#[test]
fn acknowledgement_durable_across_reopen_and_first_time_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let id = "0123456789abcdef0123456789abcdef".to_string();
    {
        let store = Store::open(&path, clock()).unwrap();
        let stored = store
            .writer()
            .acknowledge(AttentionAck {
                item_id: id.clone(),
                kind: "parked".into(),
                acknowledged_at_ms: T0,
            })
            .unwrap();
        assert_eq!(stored.acknowledged_at_ms, T0);
        let again = store
            .writer()
            .acknowledge(AttentionAck {
                item_id: id.clone(),
                kind: "parked".into(),
                acknowledged_at_ms: T0 + 5,
            })
            .unwrap();
        assert_eq!(
            again.acknowledged_at_ms, T0,
            "the first acknowledgement wins"
        );
        std::mem::forget(store); // no orderly close: the ack was committed when it returned
    }
    let store = Store::open(&path, clock()).unwrap();
    let acks = store.read_conn().unwrap().load_acknowledgements().unwrap();
    assert_eq!(
        acks,
        vec![AttentionAck {
            item_id: id.clone(),
            kind: "parked".into(),
            acknowledged_at_ms: T0
        }]
    );
    store.writer().delete_acks(vec![id]).unwrap();
    store.writer().flush().unwrap();
    assert!(
        store
            .read_conn()
            .unwrap()
            .load_acknowledgements()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn outcomes_follow_replacement_rules_and_clear() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    let o = |kind: OutcomeKind, at: i64| IssueOutcome {
        observed_at_ms: at,
        ..IssueOutcome::new("i1", kind)
    };
    assert!(w.set_outcome_wait(o(OutcomeKind::Merged, T0)).unwrap());
    assert!(
        !w.set_outcome_wait(o(OutcomeKind::Terminal, T0 + 1))
            .unwrap(),
        "merged stays"
    );
    assert!(
        w.set_outcome_wait(o(OutcomeKind::HandedOff, T0 + 2))
            .unwrap()
    );
    assert!(
        w.set_outcome_wait(o(OutcomeKind::Terminal, T0 + 3))
            .unwrap()
    );
    let read = store.read_conn().unwrap();
    assert_eq!(
        read.load_outcomes().unwrap(),
        vec![o(OutcomeKind::Terminal, T0 + 3)]
    );
    w.clear_outcome("i1").unwrap();
    w.flush().unwrap();
    assert!(read.load_outcomes().unwrap().is_empty());
}

#[test]
fn warm_start_snapshot_restores_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let park = ParkedIssue {
        identifier: "MT-9".into(),
        label: "needs-human".into(),
        label_applied: true,
        parked_at_ms: T0 + 1_234,
        issue_labels: vec!["x".into()],
        run_id: Some(1),
        ..ParkedIssue::new("p1", ParkReason::AgentBlocked)
    };
    let session = SessionMeta {
        issue_id: "i1".into(),
        session_id: "sess-1".into(),
        agent_pid: Some("4242".into()),
        total_tokens: 99,
        model_name: "model-a".into(),
        api_requests_measured: true,
        started_at_ms: Some(T0),
        updated_at_ms: T0 + 1,
        dispatch_id: Some("D1".into()),
        ..Default::default()
    };
    {
        let store = Store::open(&path, clock()).unwrap();
        let w = store.writer();
        w.upsert_retry(retry_entry()).unwrap();
        w.park(park.clone()).unwrap();
        let mut p2 = park.clone();
        p2.issue_id = "p2".into();
        w.park(p2).unwrap();
        w.unpark("p2").unwrap();
        w.upsert_session(session.clone()).unwrap();
        w.set_outcome(IssueOutcome {
            observed_at_ms: T0,
            state: "Review".into(),
            ..IssueOutcome::new("i1", OutcomeKind::HandedOff)
        })
        .unwrap();
        w.record_run(run("i1", "D1", T0), vec![]).unwrap();
        store.close().unwrap();
    }
    let store = Store::open(&path, clock()).unwrap();
    let snap = store.read_conn().unwrap().warm_start_snapshot().unwrap();
    assert_eq!(snap.retries, vec![retry_entry()]);
    let mut expected_park = park;
    expected_park.parked_at_ms = T0 + 1_000; // whole seconds
    assert_eq!(snap.parks, vec![expected_park]);
    assert_eq!(snap.sessions, vec![session]);
    assert_eq!(snap.outcomes.len(), 1);
    assert_eq!(snap.outcomes[0].state, "Review");
    assert_eq!(snap.totals.dispatches, 1);
    assert!(snap.acknowledgements.is_empty());
}

#[test]
fn sessions_left_running_by_a_killed_process_are_folded_into_the_totals_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    let live = |issue: &str, dispatch: Option<&str>, input: i64| SessionMeta {
        issue_id: issue.into(),
        session_id: format!("s-{issue}"),
        input_tokens: input,
        output_tokens: 10,
        total_tokens: input + 10,
        updated_at_ms: 1,
        dispatch_id: dispatch.map(str::to_string),
        ..Default::default()
    };
    w.upsert_session(live("a", Some("D1"), 100)).unwrap();
    w.upsert_session(live("b", Some("D2"), 50)).unwrap();
    // An ended session (dispatch id cleared at exit) is not lost.
    w.upsert_session(live("c", None, 999)).unwrap();
    assert_eq!(w.absorb_lost_sessions(5, Default::default()).unwrap(), 2);
    let t = store.read_conn().unwrap().aggregate_totals().unwrap();
    assert_eq!(
        (t.input_tokens, t.output_tokens, t.dispatches),
        (150, 20, 2)
    );
    // Idempotent: the rows are marked lost and never counted again.
    assert_eq!(w.absorb_lost_sessions(6, Default::default()).unwrap(), 0);
    let t = store.read_conn().unwrap().aggregate_totals().unwrap();
    assert_eq!(t.input_tokens, 150);
    let s = store.read_conn().unwrap().session("a").unwrap().unwrap();
    assert_eq!(
        (s.dispatch_id, s.exit_type.as_deref()),
        (None, Some("lost"))
    );
}

#[test]
fn a_lost_session_is_priced_under_the_rates_in_force_as_a_lower_bound() {
    use sortie::pricing::{ClassRates, RateBook, RateEntry, TokenRates};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    let lost = |issue: &str, kind: &str, input: i64| SessionMeta {
        issue_id: issue.into(),
        identifier: issue.to_uppercase(),
        session_id: format!("s-{issue}"),
        agent_kind: kind.into(),
        model_name: "model-x".into(),
        input_tokens: input,
        output_tokens: 100_000,
        total_tokens: input + 100_000,
        cache_read_tokens: 200_000,
        api_request_count: 3,
        updated_at_ms: 1,
        dispatch_id: Some(format!("D-{issue}")),
        ..Default::default()
    };
    w.upsert_session(lost("a", "claude-code", 1_000_000))
        .unwrap();
    w.upsert_session(lost("b", "codex", 1_000_000)).unwrap();
    let mut rates = TokenRates::default();
    let entry = RateEntry {
        rates: ClassRates {
            input_per_mtok: Some(3.0),
            output_per_mtok: Some(15.0),
            cache_read_per_mtok: Some(0.3),
            cache_write_per_mtok: None,
        },
        per_kind: true,
    };
    rates.entries.insert("claude-code".into(), entry);
    let book = std::sync::Arc::new(RateBook::new(rates, Vec::new()));
    assert_eq!(w.absorb_lost_sessions(5, book.clone()).unwrap(), 2);
    let page = store
        .read_conn()
        .unwrap()
        .list_runs(&Default::default(), None, 10)
        .unwrap();
    let run = |id: &str| page.runs.iter().find(|r| r.issue_id == id).unwrap().clone();
    // 800k uncached input at $3, 200k cache reads at $0.3, 100k output at $15 (per million).
    let a = run("a");
    let expected = 0.8 * 3.0 + 0.2 * 0.3 + 0.1 * 15.0;
    assert!(
        (a.estimated_cost_usd.unwrap() - expected).abs() < 1e-9,
        "{a:?}"
    );
    assert_eq!(
        a.cost_status, "partial",
        "a killed session's figures are a lower bound"
    );
    assert_eq!(a.price_source, "operator");
    assert_eq!(a.rates_version, book.version());
    let usage = a.model_usage.unwrap();
    assert_eq!(usage[0]["model"], "model-x");
    assert_eq!(usage[0]["cost_status"], "estimated");
    // No rate prices the other kind's model: recorded unpriced, its classes named.
    let b = run("b");
    assert_eq!(
        (b.cost_status.as_str(), b.estimated_cost_usd),
        ("unpriced", None)
    );
    assert_eq!(
        b.model_usage.unwrap()[0]["unrated_classes"],
        serde_json::json!(["input", "output", "cache_read"])
    );
}

#[test]
fn stored_vocabulary_words_read_back_typed_and_an_unknown_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    {
        let store = Store::open(&path, clock()).unwrap();
        store.writer().upsert_retry(retry_entry()).unwrap();
        store.close().unwrap();
    }
    let trigger_after = |word: Option<&str>| {
        raw(&path)
            .execute("UPDATE retry_entries SET retry_trigger = ?1", [word])
            .unwrap();
        let store = Store::open(&path, clock()).unwrap();
        let snap = store.read_conn().unwrap().warm_start_snapshot();
        snap.map(|s| s.retries[0].trigger)
    };
    // Words other Sortie builds schedule read back although this build never writes them.
    assert_eq!(
        trigger_after(Some("usage_limit")).unwrap(),
        Some(RetryTrigger::UsageLimit)
    );
    assert_eq!(
        trigger_after(Some("ci_fix")).unwrap(),
        Some(RetryTrigger::CiFix)
    );
    // No trigger recorded, as NULL or as an empty word.
    assert_eq!(trigger_after(None).unwrap(), None);
    assert_eq!(trigger_after(Some("")).unwrap(), None);
    let e = trigger_after(Some("paused")).unwrap_err();
    assert!(e.to_string().contains("\"paused\""), "{e}");
    let StoreError::Sqlite { source, .. } = &e else {
        panic!("not a statement error: {e:?}");
    };
    assert_eq!(
        sortie::store::unknown_word(source),
        Some(&sortie::domain::UnknownWord {
            vocabulary: "RetryTrigger",
            word: "paused".into()
        })
    );
}

#[test]
fn an_outcome_word_this_build_does_not_know_is_replaced_by_a_new_observation() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path, clock()).unwrap();
    let w = store.writer();
    let handed_off = IssueOutcome {
        observed_at_ms: T0,
        state: "Review".into(),
        ..IssueOutcome::new("i1", OutcomeKind::HandedOff)
    };
    assert!(w.set_outcome_wait(handed_off).unwrap());
    raw(&path)
        .execute("UPDATE issue_outcomes SET kind = 'abandoned'", [])
        .unwrap();
    let terminal = IssueOutcome {
        observed_at_ms: T0 + 1,
        ..IssueOutcome::new("i1", OutcomeKind::Terminal)
    };
    assert!(w.set_outcome_wait(terminal.clone()).unwrap());
    let read = store.read_conn().unwrap();
    assert_eq!(read.load_outcomes().unwrap(), vec![terminal]);
}

#[test]
fn a_lost_session_becomes_an_interrupted_run_that_budgets_count_and_is_recovered_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir), clock()).unwrap();
    let w = store.writer();
    w.upsert_session_wait(SessionMeta {
        issue_id: "a".into(),
        identifier: "A-1".into(),
        session_id: "sess-a".into(),
        attempt: 2,
        input_tokens: 300,
        output_tokens: 20,
        total_tokens: 320,
        api_request_count: 1,
        started_at_ms: Some(T0),
        updated_at_ms: T0 + 5,
        dispatch_id: Some("DA".into()),
        agent_pgid: Some(4242),
        agent_start_ticks: Some(99),
        agent_kind: "claude-code".into(),
        workspace: "/ws/A-1".into(),
        sortie_instance: "1-2".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        w.absorb_lost_sessions(T0 + 1_000, Default::default())
            .unwrap(),
        1
    );
    let read = store.read_conn().unwrap();
    // The run counts toward `max_sessions` and `max_tokens` like any finished one.
    assert_eq!(read.count_runs_for_issue("a").unwrap(), 1);
    assert_eq!(read.uncached_tokens_for_issue("a").unwrap(), 320);
    let run = read.run(1).unwrap().unwrap();
    assert_eq!(run.status.as_str(), "cancelled");
    assert_eq!(run.error.as_deref(), Some(sortie::store::INTERRUPTED_ERROR));
    assert_eq!((run.identifier.as_str(), run.attempt), ("A-1", 3));
    assert_eq!(run.session_id.as_deref(), Some("sess-a"));
    assert_eq!(run.dispatch_id.as_deref(), Some("DA"));
    assert_eq!(read.aggregate_totals().unwrap().input_tokens, 300);
    // The warm start finds it once, with its group, and marks it recovered.
    let pending = w.interrupted_sessions().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].agent_pgid, pending[0].agent_start_ticks),
        (Some(4242), Some(99))
    );
    w.session_recovered("a").unwrap();
    assert!(w.interrupted_sessions().unwrap().is_empty());
    assert_eq!(
        w.absorb_lost_sessions(T0 + 2_000, Default::default())
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .read_conn()
            .unwrap()
            .count_runs_for_issue("a")
            .unwrap(),
        1
    );
}

#[test]
fn a_burst_of_queued_writes_commits_in_order_and_survives_reopen() {
    // Writes sent faster than the writer commits are grouped into one transaction; the
    // group must keep their order (an upsert followed by a delete of the same row) and
    // every write must be durable once the store is closed.
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let c = clock();
    {
        let store = Store::open(&path, c.clone()).unwrap();
        let w = store.writer();
        for n in 0..1_000 {
            let mut e = retry_entry();
            e.issue_id = format!("i{n}");
            e.due_at_ms = T0 + n;
            w.upsert_retry(e).unwrap();
            if n % 10 == 0 {
                w.delete_retry(&format!("i{n}")).unwrap();
            }
        }
        let mut last = retry_entry();
        last.issue_id = "i999".into();
        last.attempt = 9;
        w.upsert_retry(last).unwrap();
    }
    let store = Store::open(&path, c.clone()).unwrap();
    let retries = store.read_conn().unwrap().load_retry_entries().unwrap();
    assert_eq!(retries.len(), 900);
    assert!(
        retries
            .iter()
            .all(|r| r.issue_id != "i0" && r.issue_id != "i990")
    );
    let last = retries.iter().find(|r| r.issue_id == "i999").unwrap();
    assert_eq!(last.attempt, 9, "the later upsert wins");
}
