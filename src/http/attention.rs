//! The attention list: what needs a person, derived on each request from the snapshot's rows
//! and health, with ids that stay stable while the cause holds (SHA-256 of the JSON parts).

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::domain::BudgetReason;
use crate::orchestrator::snapshot::Snapshot;
use crate::orchestrator::state::PreflightError;

use super::rows::{issue_fields, ts};
use super::wording::{self, AttentionWords};

/// One current item, with what the acknowledge route needs besides the JSON.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub kind: &'static str,
    pub critical: bool,
    pub since_ms: Option<i64>,
    pub issue_key: Option<String>,
    pub reason_text: String,
    pub json: Value,
}

/// The item id: the first 16 bytes of SHA-256 of `[kind, part, …]` without whitespace, in hex.
pub fn item_id(kind: &str, parts: &[String]) -> String {
    let mut arr = vec![Value::String(kind.to_string())];
    arr.extend(parts.iter().cloned().map(Value::String));
    let text = serde_json::to_string(&Value::Array(arr)).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    data_encoding::HEXLOWER.encode(&digest[..16])
}

/// RFC 3339 with nanoseconds, trailing zeros dropped (the id form of a time).
fn id_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// RFC 3339 cut to whole seconds.
fn whole_seconds(ms: i64) -> String {
    id_time(ms.div_euclid(1000) * 1000)
}

/// What one cause contributes to its item.
struct Cause<'a> {
    kind: &'static str,
    id: String,
    critical: bool,
    since_ms: Option<i64>,
    issue: Option<&'a crate::domain::Issue>,
    words: AttentionWords,
    action: Value,
    evidence: Value,
}

fn base_item(c: Cause<'_>, snap: &Snapshot) -> Item {
    let Cause {
        kind,
        id,
        critical,
        since_ms,
        issue,
        words,
        action,
        evidence,
    } = c;
    let mut m = Map::new();
    m.insert("id".into(), id.clone().into());
    m.insert("kind".into(), kind.into());
    m.insert(
        "severity".into(),
        if critical { "critical" } else { "warning" }.into(),
    );
    m.insert("since".into(), since_ms.map(ts).unwrap_or(Value::Null));
    m.insert(
        "acknowledged_at".into(),
        snap.acks
            .get(&id)
            .map(|a| ts(a.acknowledged_at_ms))
            .unwrap_or(Value::Null),
    );
    let mut key = None;
    if let Some(issue) = issue {
        let f = issue_fields(issue);
        for k in [
            "issue_id",
            "issue_identifier",
            "display_identifier",
            "issue_title",
            "issue_url",
        ] {
            if let Some(v) = f.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        key = Some(if issue.display_identifier.is_empty() {
            issue.identifier.clone()
        } else {
            issue.display_identifier.clone()
        });
    }
    m.insert("reason_text".into(), words.reason.clone().into());
    m.insert("why_text".into(), words.why.into());
    m.insert("clears_text".into(), words.clears.into());
    m.insert("action".into(), action);
    m.insert("evidence".into(), evidence);
    Item {
        id,
        kind,
        critical,
        since_ms,
        issue_key: key,
        reason_text: words.reason,
        json: Value::Object(m),
    }
}

/// Every current item, critical first, then `since` (null first), then id.
pub fn items(snap: &Snapshot) -> Vec<Item> {
    let mut out = Vec::new();
    out.extend(workflow_item(snap));
    out.extend(preflight_item(snap));
    out.extend(parked_items(snap));
    out.extend(budget_items(snap));
    out.sort_by(|a, b| {
        b.critical
            .cmp(&a.critical)
            .then_with(|| a.since_ms.cmp(&b.since_ms))
            .then_with(|| a.id.cmp(&b.id))
    });
    out
}

/// The workflow file does not load.
fn workflow_item(snap: &Snapshot) -> Option<Item> {
    let h = &snap.health;
    if h.workflow.failing_streak == 0 {
        return None;
    }
    let file = snap.config.workflow_file.clone();
    let since = h.workflow.since_ms;
    let error = h.workflow.error.clone().unwrap_or_default();
    Some(base_item(
        Cause {
            kind: "workflow_reload_failed",
            id: item_id(
                "workflow_reload_failed",
                &[since.map(id_time).unwrap_or_default()],
            ),
            critical: true,
            since_ms: since,
            issue: None,
            words: wording::attention_workflow(&file, &error),
            action: json!({"kind": "acknowledge"}),
            evidence: json!({"file": file, "error": error}),
        },
        snap,
    ))
}

/// The dispatch preflight fails for a reason of its own. A workflow that does not load
/// already has its item, and the preflight did not run.
fn preflight_item(snap: &Snapshot) -> Option<Item> {
    let h = &snap.health;
    let ran = !matches!(
        h.preflight.failure,
        Some(PreflightError::WorkflowUnloadable { .. })
    );
    if h.preflight.failing_streak == 0 || !ran {
        return None;
    }
    let error = h.preflight.error.clone().unwrap_or_default();
    let since = h.preflight.since_ms;
    Some(base_item(
        Cause {
            kind: "preflight_failed",
            id: item_id(
                "preflight_failed",
                &[since.map(id_time).unwrap_or_default()],
            ),
            critical: true,
            since_ms: since,
            issue: None,
            words: wording::attention_preflight(&error),
            action: json!({"kind": "acknowledge"}),
            evidence: json!({"error": error}),
        },
        snap,
    ))
}

fn parked_items(snap: &Snapshot) -> Vec<Item> {
    snap.parked
        .iter()
        .map(|p| {
            let action = if p.issue.url.is_empty() {
                json!({"kind": "acknowledge"})
            } else {
                json!({"kind": "open_issue", "url": p.issue.url})
            };
            base_item(
                Cause {
                    kind: "parked",
                    id: item_id(
                        "parked",
                        &[p.issue.id.clone(), whole_seconds(p.parked_at_ms)],
                    ),
                    critical: false,
                    since_ms: Some(p.parked_at_ms.div_euclid(1000) * 1000),
                    issue: Some(&p.issue),
                    words: wording::attention_parked(p.reason, &p.label, &p.parked_state),
                    action,
                    evidence: json!({"reason": p.reason, "label": p.label}),
                },
                snap,
            )
        })
        .collect()
}

fn budget_items(snap: &Snapshot) -> Vec<Item> {
    snap.budget_exhausted
        .iter()
        .map(|b| {
            let evidence = match b.reason {
                BudgetReason::Token => json!({
                    "reason": b.reason,
                    "used_tokens": b.used,
                    "used_tokens_complete": false,
                    "budget_tokens": b.limit,
                }),
                BudgetReason::Session | BudgetReason::Money => json!({
                    "reason": b.reason,
                    "used_sessions": b.used,
                    "budget_sessions": b.limit,
                }),
            };
            base_item(
                Cause {
                    kind: "budget_held",
                    id: item_id(
                        "budget_held",
                        &[
                            b.issue.id.clone(),
                            b.reason.to_string(),
                            b.limit.to_string(),
                        ],
                    ),
                    critical: false,
                    since_ms: Some(b.since_ms),
                    issue: Some(&b.issue),
                    words: wording::attention_budget(b.reason, b.used, b.limit),
                    action: json!({"kind": "acknowledge"}),
                    evidence,
                },
                snap,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids of the API's documented example items (clients may have stored them).
    #[test]
    fn ids_match_the_seed_examples() {
        assert_eq!(
            item_id("parked", &["jkl012".into(), "2026-03-26T14:05:00Z".into()]),
            "9ee206201099385b431c9bb01911553f"
        );
        assert_eq!(
            item_id(
                "budget_held",
                &["ghi789".into(), "session_budget".into(), "3".into()]
            ),
            "464f9ff8ea54c4c6cfb43af394234d57"
        );
        assert_eq!(
            item_id("workflow_reload_failed", &["2026-03-26T14:29:41Z".into()]),
            "436a04996ce8317d45cdb082d7ee656a"
        );
    }

    #[test]
    fn id_times_drop_trailing_zeros() {
        assert_eq!(id_time(1_774_535_381_000), "2026-03-26T14:29:41Z");
        assert_eq!(id_time(1_774_535_381_500), "2026-03-26T14:29:41.5Z");
        assert_eq!(whole_seconds(1_774_535_381_999), "2026-03-26T14:29:41Z");
    }

    #[test]
    fn order_is_critical_then_since_then_id() {
        let mut snap = Snapshot::default();
        snap.health.workflow.failing_streak = 1;
        snap.health.workflow.since_ms = Some(5_000);
        snap.parked.push(crate::orchestrator::snapshot::ParkedRow {
            issue: crate::domain::Issue {
                id: "a".into(),
                identifier: "A-1".into(),
                ..Default::default()
            },
            reason: crate::domain::ParkReason::AgentBlocked,
            parked_at_ms: 1_000,
            label: "needs-human".into(),
            label_applied: true,
            parked_state: "In Progress".into(),
        });
        let items = items(&snap);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].kind, "workflow_reload_failed");
        assert_eq!(items[1].kind, "parked");
        assert_eq!(items[1].json["action"]["kind"], "acknowledge");
        assert_eq!(items[1].json["acknowledged_at"], Value::Null);
    }
}
