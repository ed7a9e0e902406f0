//! Stage hops on real SQLite files: saved, replaced, deleted, restored by the warm-start
//! snapshot after a reopen, and a run row's hop result written after its record.

mod common;

use common::store::*;
use sortie::domain::stage::{StageHop, StageOutcome};
use sortie::store::{StageHopWrite, Store};

fn hop(issue_id: &str, count: u32) -> StageHop {
    StageHop {
        issue_id: issue_id.into(),
        identifier: format!("ST-{issue_id}"),
        display_identifier: String::new(),
        hop_count: count,
        source_rule: "plan".into(),
        target_rule: "implement".into(),
        target_label: "stage-implement".into(),
        previous_outcome: Some(StageOutcome::NoChange),
        source_dispatch_id: "d-1".into(),
        chain_id: "7q2m4x9b1k5d8f3h6j0n2p4rst".into(),
        dispatched_at_ms: Some(T0),
        hopped_at_ms: T0 + 60_000,
        target_observed: false,
        picked_up: false,
        issue_title: "Chained".into(),
        issue_url: "https://tracker.example.com/ST-1".into(),
        issue_type: "Story".into(),
        state: "To Do".into(),
        issue_labels: Some(vec!["export".into(), "stage-implement".into()]),
    }
}

#[test]
fn hops_survive_a_reopen_and_are_replaced_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    {
        let store = Store::open(&path, clock()).unwrap();
        let w = store.writer();
        w.stage_hop(StageHopWrite::Save(Box::new(hop("1", 1))))
            .unwrap();
        w.stage_hop(StageHopWrite::Save(Box::new(hop("2", 1))))
            .unwrap();
        w.stage_hop(StageHopWrite::Save(Box::new(hop("3", 1))))
            .unwrap();
        // A later hop of the same issue replaces the first; marks are saved with it.
        let mut later = hop("1", 2);
        later.target_observed = true;
        later.picked_up = true;
        later.issue_labels = None;
        w.stage_hop(StageHopWrite::Save(Box::new(later))).unwrap();
        w.stage_hop(StageHopWrite::Delete("3".into())).unwrap();
        w.flush().unwrap();
    }
    let store = Store::open(&path, clock()).unwrap();
    let snap = store.read_conn().unwrap().warm_start_snapshot().unwrap();
    assert_eq!(snap.stage_hops.len(), 2);
    let first = &snap.stage_hops[0];
    assert_eq!(first.hop_count, 2);
    assert!(first.target_observed && first.picked_up);
    assert_eq!(
        first.issue_labels, None,
        "an unread label list stays unread"
    );
    assert_eq!(snap.stage_hops[1], hop("2", 1), "every field round-trips");
}

#[test]
fn a_run_rows_hop_result_is_written_after_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path, clock()).unwrap();
    store
        .writer()
        .record_run(run("1", "d-7", T0), Vec::new())
        .unwrap();
    store
        .writer()
        .stage_hop(StageHopWrite::RunStage {
            dispatch_id: "d-7".into(),
            target: "implement".into(),
            result: "partial".into(),
        })
        .unwrap();
    store.writer().flush().unwrap();
    let conn = raw(&path);
    let got: (String, String) = conn
        .query_row(
            "SELECT stage_target, stage_result FROM run_history WHERE dispatch_id = 'd-7'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(got, ("implement".into(), "partial".into()));
}
