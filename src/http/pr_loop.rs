//! Which pass each place serves `pr_loop` for, and the one read of reaction activity behind
//! it. A pass is an issue's work under one `chain_id`; a pass without a chain or without a
//! dispatch time reads `unrecorded` on every member and is not read.

use std::collections::BTreeMap;

use crate::orchestrator::snapshot::Snapshot;
use crate::store::{PassActivity, ReadConn, RunRecord, StoreError};

use super::AppState;
use super::views::IssueRows;
use super::views::pr_loop::PrLoopView;

/// `(issue_id, chain_id)`.
pub type PassKey = (String, String);

fn key(issue_id: &str, chain_id: &str, dated: bool) -> Option<PassKey> {
    (dated && !chain_id.is_empty()).then(|| (issue_id.to_string(), chain_id.to_string()))
}

/// The pass of the live row that decides the issue's status (by the lists' precedence); for
/// pending reactions the first row whose escalation is set, else the first row. `None` when
/// that pass is unrecorded or no live row holds the issue.
pub fn live_pass(found: &IssueRows<'_>) -> Option<PassKey> {
    if let Some(r) = found.running {
        return key(&r.issue.id, &r.route.chain_id, true);
    }
    if let Some(r) = found.retry {
        return key(&r.issue.id, &r.route.chain_id, r.dispatched_at_ms > 0);
    }
    if let Some(b) = found.budget {
        let chain = b.route.as_ref().map_or("", |r| r.chain_id.as_str());
        return key(&b.issue.id, chain, b.dispatched_at_ms.is_some());
    }
    if let Some(p) = found.parked {
        let chain = p.route.as_ref().map_or("", |r| r.chain_id.as_str());
        return key(&p.issue.id, chain, p.dispatched_at_ms.is_some());
    }
    let first = found
        .pending
        .iter()
        .find(|r| r.escalated_at_ms.is_some())
        .or(found.pending.first());
    if let Some(r) = first {
        return key(&r.issue.id, &r.chain_id, r.dispatched_at_ms.is_some());
    }
    found.between.and_then(|b| {
        key(
            &b.hop.issue_id,
            &b.hop.chain_id,
            b.hop.dispatched_at_ms.is_some(),
        )
    })
}

/// The pass a recorded run's own `chain_id` names.
pub fn run_pass(r: &RunRecord) -> Option<PassKey> {
    key(&r.issue_id, &r.chain_id, r.dispatched_at_ms.is_some())
}

/// The activity of `passes`, read once.
pub fn read(
    conn: &ReadConn,
    passes: &[Option<PassKey>],
) -> Result<BTreeMap<PassKey, PassActivity>, StoreError> {
    let asked: Vec<PassKey> = passes.iter().flatten().cloned().collect();
    if asked.is_empty() {
        return Ok(BTreeMap::new());
    }
    conn.pr_loop(&asked)
}

/// The served value for `pass` under the configuration `snap` holds.
pub fn view(
    snap: &Snapshot,
    pass: Option<&PassKey>,
    activity: &BTreeMap<PassKey, PassActivity>,
) -> PrLoopView {
    let empty = PassActivity::new();
    let a = pass.map(|p| activity.get(p).unwrap_or(&empty));
    PrLoopView::build(&snap.config.reactions, a)
}

/// Each live issue's rows, gathered in one sweep over the lists.
fn live_index(snap: &Snapshot) -> BTreeMap<&str, IssueRows<'_>> {
    fn at<'m, 'a>(
        out: &'m mut BTreeMap<&'a str, IssueRows<'a>>,
        id: &'a str,
    ) -> &'m mut IssueRows<'a> {
        out.entry(id).or_insert_with(|| IssueRows {
            running: None,
            retry: None,
            budget: None,
            parked: None,
            pending: Vec::new(),
            between: None,
        })
    }
    let mut out: BTreeMap<&str, IssueRows<'_>> = BTreeMap::new();
    for r in &snap.running {
        at(&mut out, &r.issue.id).running = Some(r);
    }
    for r in snap.retrying.iter() {
        at(&mut out, &r.issue.id).retry = Some(r);
    }
    for r in snap.budget_exhausted.iter() {
        at(&mut out, &r.issue.id).budget = Some(r);
    }
    for r in snap.parked.iter() {
        at(&mut out, &r.issue.id).parked = Some(r);
    }
    for r in snap.pending_reactions.iter() {
        at(&mut out, &r.issue.id).pending.push(r);
    }
    for r in snap.between_stages.iter() {
        at(&mut out, &r.hop.issue_id).between = Some(r);
    }
    out
}

/// Each live issue's `pr_loop` (issue id → value), or `None` when reaction activity could not
/// be read (the state document then serves `null` on every entry).
pub fn for_state(state: &AppState, snap: &Snapshot) -> Option<BTreeMap<String, PrLoopView>> {
    let passes: Vec<(String, Option<PassKey>)> = live_index(snap)
        .iter()
        .map(|(id, rows)| (id.to_string(), live_pass(rows)))
        .collect();
    let keys: Vec<Option<PassKey>> = passes.iter().map(|(_, p)| p.clone()).collect();
    let activity = match state.store.read_pool().with(|c| read(c, &keys)) {
        Ok(a) => a,
        Err(e) => {
            log::warn!(error:% = e; "pull request reaction activity read failed");
            return None;
        }
    };
    Some(
        passes
            .into_iter()
            .map(|(id, p)| {
                let v = view(snap, p.as_ref(), &activity);
                (id, v)
            })
            .collect(),
    )
}
