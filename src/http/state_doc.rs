//! `GET /api/v1/state`: the document built from the published snapshot, plus one run-history
//! read for the running issues' completed-session figures.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::orchestrator::snapshot::Snapshot;
use crate::store::IssueSpend;

use super::AppState;
use super::attention;
use super::views::state::StateDoc;

/// Completed-session figures of every running issue (`None` per issue when unreadable).
pub fn running_spend(state: &AppState, snap: &Snapshot) -> BTreeMap<String, Option<IssueSpend>> {
    let mut out = BTreeMap::new();
    if snap.running.is_empty() {
        return out;
    }
    let ids: Vec<&str> = snap.running.iter().map(|r| r.issue.id.as_str()).collect();
    let all = state
        .store
        .read_conn()
        .ok()
        .and_then(|c| match c.issue_spend_many(&ids) {
            Ok(m) => Some(m),
            Err(e) => {
                log::warn!("issue spend read failed error=\"{e}\"");
                None
            }
        });
    for id in ids {
        out.insert(
            id.to_string(),
            all.as_ref().and_then(|m| m.get(id).copied()),
        );
    }
    out
}

/// The typed document.
pub fn view(state: &AppState, snap: &Snapshot) -> StateDoc {
    let spend = running_spend(state, snap);
    let items = attention::items(snap);
    let unacked = items
        .iter()
        .filter(|i| i.view.acknowledged_at.is_none())
        .count();
    let items = items.into_iter().map(|i| i.view).collect();
    StateDoc::build(snap, state.version, &spend, items, unacked)
}

/// The whole document.
pub fn document(state: &AppState, snap: &Snapshot) -> Value {
    super::views::to_value(&view(state, snap))
}
