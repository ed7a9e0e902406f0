//! The attention list: what needs a person, derived on each request from the snapshot's rows
//! and health, with ids that stay stable while the cause holds (SHA-256 of the JSON parts).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::{BudgetReason, ReactionKind};
use crate::orchestrator::agent_holds::AuthHold;
use crate::orchestrator::failure_holds::FailureHold;
use crate::orchestrator::reactions::ReactionRow;
use crate::orchestrator::snapshot::{BudgetRow, ParkedRow, Snapshot};
use crate::orchestrator::spend_ceiling::WindowState;

use super::reaction_words;
use super::views::attention::{
    AttentionAction, AttentionEvidence, AttentionItemView, AttentionKind, EvidenceReason, ItemIssue,
};
use super::views::pending_reaction::{LastCheckView, PullRequestView};
use super::views::{opt_ts, ts};
use super::wording::{self, AttentionWords};

/// One current item, with what ordering and the acknowledge route need besides the view.
#[derive(Debug, Clone)]
pub struct Item {
    pub view: AttentionItemView,
    pub since_ms: Option<i64>,
    /// How the acknowledgement's sentence names the issue (display identifier, else
    /// identifier); `None` for an item about the process.
    pub issue_key: Option<String>,
}

/// The item id: the first 16 bytes of SHA-256 of `[kind, part, …]` without whitespace, in hex.
pub fn item_id(kind: AttentionKind, parts: &[String]) -> String {
    let mut arr = vec![Value::String(kind.as_str().to_string())];
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
    kind: AttentionKind,
    id_parts: Vec<String>,
    since_ms: Option<i64>,
    issue: Option<&'a crate::domain::Issue>,
    words: AttentionWords,
    action: AttentionAction,
    evidence: AttentionEvidence,
}

fn base_item(c: Cause<'_>, snap: &Snapshot) -> Item {
    let id = item_id(c.kind, &c.id_parts);
    let acknowledged_at = snap.acks.get(&id).map(|a| ts(a.acknowledged_at_ms));
    let issue_key = c.issue.map(|i| {
        if i.display_identifier.is_empty() {
            i.identifier.clone()
        } else {
            i.display_identifier.clone()
        }
    });
    let view = AttentionItemView {
        id,
        kind: c.kind,
        severity: c.kind.severity(),
        since: opt_ts(c.since_ms),
        acknowledged_at,
        issue: c.issue.map(ItemIssue::of).unwrap_or_default(),
        reason_text: c.words.reason,
        why_text: c.words.why,
        clears_text: c.words.clears,
        action: c.action,
        evidence: c.evidence,
    };
    Item {
        view,
        since_ms: c.since_ms,
        issue_key,
    }
}

/// Every current item, critical first, then `since` (null first), then id.
pub fn items(snap: &Snapshot) -> Vec<Item> {
    let mut out = Vec::new();
    out.extend(workflow_item(snap));
    out.extend(preflight_item(snap));
    out.extend(database_item(snap));
    out.extend(snap.auth_holds.iter().map(|h| auth_item(h, snap)));
    out.extend(snap.parked.iter().map(|p| parked_item(p, snap)));
    out.extend(snap.budget_exhausted.iter().map(|b| budget_item(b, snap)));
    out.extend(snap.failure_held.iter().map(|h| failure_item(h, snap)));
    out.extend(spend_items(snap));
    out.extend(notification_items(snap));
    out.extend(
        snap.pending_reactions
            .iter()
            .filter_map(|r| reaction_item(r, snap)),
    );
    out.sort_by(|a, b| {
        a.view
            .severity
            .cmp(&b.view.severity)
            .then_with(|| a.since_ms.cmp(&b.since_ms))
            .then_with(|| a.view.id.cmp(&b.view.id))
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
            kind: AttentionKind::WorkflowReloadFailed,
            id_parts: vec![since.map(id_time).unwrap_or_default()],
            since_ms: since,
            issue: None,
            words: wording::attention_workflow(&file, &error),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                file: Some(file),
                error: Some(error),
                ..Default::default()
            },
        },
        snap,
    ))
}

/// The dispatch preflight fails (it runs on the last good workflow; a workflow that does not
/// reload has its own item).
fn preflight_item(snap: &Snapshot) -> Option<Item> {
    let h = &snap.health;
    if h.preflight.failing_streak == 0 {
        return None;
    }
    let error = h.preflight.error.clone().unwrap_or_default();
    let since = h.preflight.since_ms;
    Some(base_item(
        Cause {
            kind: AttentionKind::PreflightFailed,
            id_parts: vec![since.map(id_time).unwrap_or_default()],
            since_ms: since,
            issue: None,
            words: wording::attention_preflight(&error),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                error: Some(error),
                ..Default::default()
            },
        },
        snap,
    ))
}

/// The database does not take writes (kept for retry) or a budget read failed: nothing new
/// is dispatched.
fn database_item(snap: &Snapshot) -> Option<Item> {
    let h = &snap.health;
    if h.database.failing_streak == 0 {
        return None;
    }
    let error = h.database.error.clone().unwrap_or_default();
    let since = h.database.since_ms;
    Some(base_item(
        Cause {
            kind: AttentionKind::DatabaseFailed,
            id_parts: vec![since.map(id_time).unwrap_or_default()],
            since_ms: since,
            issue: None,
            words: wording::attention_database(&error),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                error: Some(error),
                ..Default::default()
            },
        },
        snap,
    ))
}

/// An agent kind whose login failed: every workflow names one agent kind, so nothing is
/// dispatched while it holds (critical).
fn auth_item(h: &AuthHold, snap: &Snapshot) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::AgentAuthFailed,
            id_parts: vec![h.agent_kind.clone(), id_time(h.since_ms)],
            since_ms: Some(h.since_ms),
            issue: None,
            words: wording::attention_agent_auth(&h.agent_kind, &h.message),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                agent_kind: Some(h.agent_kind.clone()),
                error: Some(h.message.clone()),
                ..Default::default()
            },
        },
        snap,
    )
}

/// An issue the failure breaker holds: its words quote the agent, and acknowledging the item
/// releases the hold.
fn failure_item(h: &FailureHold, snap: &Snapshot) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::FailureHeld,
            id_parts: vec![h.issue.id.clone(), h.cause.clone(), id_time(h.since_ms)],
            since_ms: Some(h.since_ms),
            issue: Some(&h.issue),
            words: wording::attention_failure_held(&h.cause, h.runs, &h.message),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                agent_kind: Some(h.agent_kind.clone()),
                error: Some(h.message.clone()),
                cause: Some(h.cause.clone()),
                runs: Some(h.runs),
                ..Default::default()
            },
        },
        snap,
    )
}

fn parked_item(p: &ParkedRow, snap: &Snapshot) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::Parked,
            id_parts: vec![p.issue.id.clone(), whole_seconds(p.parked_at_ms)],
            since_ms: Some(p.parked_at_ms.div_euclid(1000) * 1000),
            issue: Some(&p.issue),
            words: wording::attention_parked(p.reason, &p.label, &p.parked_state),
            action: AttentionAction::open_issue_or_acknowledge(&p.issue),
            evidence: AttentionEvidence {
                reason: Some(EvidenceReason::Park(p.reason)),
                label: Some(p.label.clone()),
                ..Default::default()
            },
        },
        snap,
    )
}

/// The evidence of a budget hold.
fn budget_evidence(b: &BudgetRow) -> AttentionEvidence {
    let reason = Some(EvidenceReason::Budget(b.reason));
    match b.reason {
        BudgetReason::Token => AttentionEvidence {
            reason,
            used_tokens: Some(b.used),
            // The hold keeps the recorded total but not whether every session was measured,
            // so the figure is never claimed complete.
            used_tokens_complete: Some(false),
            budget_tokens: Some(b.limit),
            ..Default::default()
        },
        BudgetReason::Money => AttentionEvidence {
            reason,
            used_usd: b.money.and_then(|m| m.used_usd),
            used_usd_complete: b.money.map(|m| m.complete),
            budget_usd: b.money.map(|m| m.budget_usd),
            ..Default::default()
        },
        BudgetReason::Session => AttentionEvidence {
            reason,
            used_sessions: Some(b.used),
            budget_sessions: Some(b.limit),
            ..Default::default()
        },
    }
}

/// The ceiling a hold's reason names, as its item id carries it: `budget_usd` for a money
/// hold, the token or session budget otherwise.
fn hold_ceiling(b: &BudgetRow) -> String {
    match (b.reason, b.money) {
        (BudgetReason::Money, Some(m)) => decimal(m.budget_usd),
        _ => b.limit.to_string(),
    }
}

/// A number as a JSON decimal would write it: `10` for 10.0, `2.5` for 2.5.
fn decimal(v: f64) -> String {
    serde_json::Number::from_f64(v)
        .map(|n| {
            let s = n.to_string();
            s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
        })
        .unwrap_or_default()
}

fn budget_words(b: &BudgetRow) -> wording::AttentionWords {
    match (b.reason, b.money) {
        (BudgetReason::Money, Some(m)) => {
            wording::attention_money(m.used_usd, m.complete, m.budget_usd)
        }
        _ => wording::attention_budget(b.reason, b.used, b.limit),
    }
}

fn budget_item(b: &BudgetRow, snap: &Snapshot) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::BudgetHeld,
            id_parts: vec![b.issue.id.clone(), b.reason.to_string(), hold_ceiling(b)],
            since_ms: Some(b.since_ms),
            issue: Some(&b.issue),
            words: budget_words(b),
            action: AttentionAction::acknowledge(),
            evidence: budget_evidence(b),
        },
        snap,
    )
}

/// A pending reaction whose escalation stands; merge completion is about the issue, so it
/// opens the issue rather than the pull request.
fn reaction_item(r: &ReactionRow, snap: &Snapshot) -> Option<Item> {
    let escalated_at = r.escalated_at_ms?;
    let issue = crate::domain::Issue {
        id: r.issue.id.clone(),
        identifier: r.issue.identifier.clone(),
        display_identifier: r.issue.display_identifier.clone(),
        title: r.issue.title.clone(),
        url: r.issue.url.clone(),
        ..Default::default()
    };
    let action = if r.kind == ReactionKind::MergeCompletion {
        AttentionAction::open_issue_or_acknowledge(&issue)
    } else {
        AttentionAction::open_pull_request_or_issue(&r.pr.url, &r.issue.url)
    };
    Some(base_item(
        Cause {
            kind: AttentionKind::ReactionEscalated,
            id_parts: vec![
                r.issue.id.clone(),
                r.kind.to_string(),
                id_time(escalated_at),
            ],
            since_ms: Some(escalated_at),
            issue: Some(&issue),
            words: reaction_words::attention_escalated(r),
            action,
            evidence: AttentionEvidence {
                reaction_kind: Some(r.kind),
                config_key: Some(r.kind.config_key().to_string()),
                pull_request: Some(PullRequestView::of(&r.pr, r.kind)),
                escalation_trigger: r.escalation_trigger,
                used_attempts: r.used_attempts,
                max_attempts: r.max_attempts,
                last_check: r.last_check.as_ref().map(LastCheckView::of),
                ..Default::default()
            },
        },
        snap,
    ))
}

/// One item per spend window that holds dispatch (critical: nothing is dispatched).
/// A notification destination failing after its retries, or disabled by its configuration.
fn notification_items(snap: &Snapshot) -> Vec<Item> {
    crate::notify::status::all()
        .into_iter()
        .filter_map(|d| {
            if let Some((why, since)) = d.disabled {
                return Some(disabled_destination_item(
                    &d.name,
                    d.kind.as_str(),
                    &why,
                    since,
                    snap,
                ));
            }
            let since = d.failing_since_ms?;
            let error = d.last_error.clone().unwrap_or_default();
            Some(base_item(
                Cause {
                    kind: AttentionKind::NotificationFailing,
                    id_parts: vec![d.name.clone(), id_time(since)],
                    since_ms: Some(since),
                    issue: None,
                    words: wording::attention_notification(&d.name, d.kind.as_str(), &error),
                    action: AttentionAction::acknowledge(),
                    evidence: AttentionEvidence {
                        destination: Some(d.name),
                        error: Some(error),
                        ..Default::default()
                    },
                },
                snap,
            ))
        })
        .collect()
}

fn disabled_destination_item(
    name: &str,
    kind: &str,
    why: &str,
    since: i64,
    snap: &Snapshot,
) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::NotificationDestinationDisabled,
            id_parts: vec![name.to_string(), id_time(since)],
            since_ms: Some(since),
            issue: None,
            words: wording::attention_notification_disabled(name, kind, why),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                destination: Some(name.to_string()),
                error: Some(why.to_string()),
                ..Default::default()
            },
        },
        snap,
    )
}

fn spend_items(snap: &Snapshot) -> Vec<Item> {
    let Some(spend) = snap.spend_ceiling.as_ref() else {
        return Vec::new();
    };
    spend.holding().map(|w| spend_item(w, snap)).collect()
}

fn spend_item(w: &WindowState, snap: &Snapshot) -> Item {
    base_item(
        Cause {
            kind: AttentionKind::SpendCeilingReached,
            id_parts: spend_id_parts(w),
            since_ms: w.hold_since_ms,
            issue: None,
            words: wording::attention_spend_ceiling(
                w.window,
                w.used_usd,
                w.used_usd_complete,
                w.budget_usd,
            ),
            action: AttentionAction::acknowledge(),
            evidence: AttentionEvidence {
                reason: Some(EvidenceReason::Spend(w.window.hold_reason())),
                used_usd: Some(w.used_usd),
                used_usd_complete: Some(w.used_usd_complete),
                budget_usd: Some(w.budget_usd),
                resets_at: Some(ts(w.resets_at_ms)),
                config_key: Some(w.window.config_key().to_string()),
                ..Default::default()
            },
        },
        snap,
    )
}

/// The window, its start in RFC 3339 UTC and the ceiling as a decimal number: a new window
/// or an edited ceiling is a new item.
fn spend_id_parts(w: &WindowState) -> Vec<String> {
    vec![
        w.window.to_string(),
        id_time(w.start_ms),
        format!("{}", w.budget_usd),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids of the API's documented example items (clients may have stored them).
    #[test]
    fn ids_match_the_seed_examples() {
        assert_eq!(
            item_id(
                AttentionKind::Parked,
                &["jkl012".into(), "2026-03-26T14:05:00Z".into()]
            ),
            "9ee206201099385b431c9bb01911553f"
        );
        assert_eq!(
            item_id(
                AttentionKind::BudgetHeld,
                &["ghi789".into(), "session_budget".into(), "3".into()]
            ),
            "464f9ff8ea54c4c6cfb43af394234d57"
        );
        assert_eq!(
            item_id(
                AttentionKind::WorkflowReloadFailed,
                &["2026-03-26T14:29:41Z".into()]
            ),
            "436a04996ce8317d45cdb082d7ee656a"
        );
    }

    #[test]
    fn reaction_ids_hash_the_issue_kind_and_escalation_time() {
        use crate::http::views::pending_reaction::tests::{at, seed_ci_row};
        // The seed's example item.
        assert_eq!(
            item_id(
                AttentionKind::ReactionEscalated,
                &["mno345".into(), "ci".into(), "2026-03-26T14:26:40Z".into()]
            ),
            "cf5210ceffa49562e16b5c7c7a9aeb36"
        );
        // Hand-computed: SHA-256 of ["reaction_escalated","x1","merge-completion",
        // "2026-03-26T14:26:40.25Z"], first 16 bytes.
        let mut row = seed_ci_row();
        row.issue.id = "x1".into();
        row.kind = crate::domain::ReactionKind::MergeCompletion;
        row.escalated_at_ms = Some(at("2026-03-26T14:26:40.250Z"));
        let snap = Snapshot {
            pending_reactions: std::sync::Arc::new(vec![row]),
            ..Default::default()
        };
        let got = items(&snap);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].view.id, "0f1d087a6ff20270cef206362d9b419a");
        // Merge completion opens the issue, not the pull request.
        assert_eq!(
            got[0].view.action.kind,
            super::super::views::attention::ActionKind::OpenIssue
        );
    }

    /// The seed's `reaction_escalated` item, member for member; a row without an escalation
    /// raises none.
    #[test]
    fn the_escalated_ci_row_raises_the_seed_item() {
        use crate::http::views::pending_reaction::tests::{seed_ci_row, seed_review_row};
        let mut snap = Snapshot {
            pending_reactions: std::sync::Arc::new(vec![seed_ci_row(), seed_review_row()]),
            ..Default::default()
        };
        let got = items(&snap);
        assert_eq!(got.len(), 1);
        let v = super::super::views::to_value(&got[0].view);
        let expected = serde_json::json!({
            "id": "cf5210ceffa49562e16b5c7c7a9aeb36",
            "kind": "reaction_escalated",
            "severity": "warning",
            "since": "2026-03-26T14:26:40.000Z",
            "acknowledged_at": null,
            "issue_id": "mno345",
            "issue_identifier": "MT-653",
            "issue_title": "Add the export button",
            "issue_url": "https://tracker.example.com/browse/MT-653",
            "reason_text": "CI escalated on #931",
            "why_text": "Sortie escalated failing CI on PR #931 after 2 of 2 CI fixes; the latest check found Test failing.",
            "clears_text": "Clears when a check of PR #931 passes, a new commit lands on it, it merges or closes, `reactions.ci_failure.max_retries` rises above 2, or the issue reaches a terminal tracker state or leaves In Review.",
            "action": {"kind": "open_pull_request", "url": "https://github.com/acme/web/pull/931"},
            "evidence": {
                "reaction_kind": "ci",
                "config_key": "ci_failure",
                "pull_request": {"number": 931, "repository": "acme/web", "url": "https://github.com/acme/web/pull/931", "branch": "sortie/MT-653", "head_sha": "4f1c2a9e"},
                "escalation_trigger": "budget_exhausted",
                "used_attempts": 2,
                "max_attempts": 2,
                "last_check": {"observed_at": "2026-03-26T14:26:40.000Z", "head_sha": "9b7e3d1c", "status": "failing", "failing_checks": ["Test"], "failing": 1, "pending": 0, "passing": 4}
            }
        });
        assert_eq!(
            serde_json::to_string(&v).unwrap_or_default(),
            serde_json::to_string(&expected).unwrap_or_default()
        );
        // A row rebuilt after a restart has no pull request link yet: it opens the issue.
        let mut rebuilt = seed_ci_row();
        rebuilt.pr.url.clear();
        snap.pending_reactions = std::sync::Arc::new(vec![rebuilt]);
        let v = super::super::views::to_value(&items(&snap)[0].view);
        assert_eq!(
            v["action"],
            serde_json::json!({"kind": "open_issue", "url": "https://tracker.example.com/browse/MT-653"})
        );
    }

    /// The escalation words of the other triggers and kinds.
    #[test]
    fn escalation_words_follow_the_trigger_and_kind() {
        use crate::domain::{EscalationTrigger, ReactionKind};
        use crate::http::views::pending_reaction::tests::seed_ci_row;
        let mut row = seed_ci_row();
        row.kind = ReactionKind::Merge;
        row.escalation_trigger = Some(EscalationTrigger::Refused);
        row.last_check = None;
        let w = reaction_words::attention_escalated(&row);
        assert_eq!(w.reason, "Auto-merge escalated on #931");
        assert_eq!(
            w.why,
            "Sortie escalated the auto-merge on PR #931 because the forge or the tracker refused a write."
        );
        assert_eq!(
            w.clears,
            "Clears when a person merges PR #931, it merges or closes, or the issue reaches a terminal tracker state or leaves In Review."
        );
        row.kind = ReactionKind::BotReview;
        row.escalation_trigger = Some(EscalationTrigger::Triage);
        row.issue.state.clear();
        let w = reaction_words::attention_escalated(&row);
        assert_eq!(
            w.why,
            "Sortie escalated bot review comments on PR #931 because its triage command asked for a person."
        );
        assert_eq!(
            w.clears,
            "Clears when PR #931 has no actionable bot review comment left, it merges or closes, or the issue reaches a terminal tracker state."
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
        std::sync::Arc::make_mut(&mut snap.parked).push(crate::orchestrator::snapshot::ParkedRow {
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
            dispatched_at_ms: None,
            route: None,
        });
        let items = items(&snap);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].view.kind, AttentionKind::WorkflowReloadFailed);
        assert_eq!(items[1].view.kind, AttentionKind::Parked);
        let json = super::super::views::to_value(&items[1].view);
        assert_eq!(json["action"]["kind"], "acknowledge");
        assert_eq!(json["acknowledged_at"], Value::Null);
    }

    /// Member names and order as served: issue members between `acknowledged_at` and
    /// `reason_text`, empty issue members absent, evidence members by kind.
    #[test]
    fn items_serialize_in_served_order() {
        let mut snap = Snapshot::default();
        std::sync::Arc::make_mut(&mut snap.budget_exhausted).push(
            crate::orchestrator::state::BudgetHold {
                issue: crate::domain::Issue {
                    id: "b0".into(),
                    identifier: "B-0".into(),
                    display_identifier: "acme/B-0".into(),
                    url: "https://t/b".into(),
                    ..Default::default()
                },
                reason: BudgetReason::Token,
                used: 7,
                limit: 5,
                since_ms: 1_774_535_100_000,
                dispatched_at_ms: None,
                money: None,
                spend: None,
                route: None,
            },
        );
        snap.health.preflight.failing_streak = 1;
        snap.health.preflight.since_ms = Some(1_774_535_300_000);
        snap.health.preflight.error = Some("no api key".into());
        let items = items(&snap);
        let text: Vec<String> = items
            .iter()
            .map(|i| serde_json::to_string(&i.view).unwrap_or_default())
            .collect();
        assert_eq!(
            text,
            [
                r#"{"id":"a6101f4a45ebf0457cd63381eb5607e6","kind":"preflight_failed","severity":"critical","since":"2026-03-26T14:28:20.000Z","acknowledged_at":null,"reason_text":"Dispatch preflight failed","why_text":"The dispatch preflight failed (no api key), so poll ticks dispatch nothing until it passes.","clears_text":"Clears when the dispatch preflight passes on a later poll tick.","action":{"kind":"acknowledge"},"evidence":{"error":"no api key"}}"#,
                r#"{"id":"67a536b17fecdf220f2df7934ee87afd","kind":"budget_held","severity":"warning","since":"2026-03-26T14:25:00.000Z","acknowledged_at":null,"issue_id":"b0","issue_identifier":"B-0","display_identifier":"acme/B-0","issue_url":"https://t/b","reason_text":"Token budget reached","why_text":"The issue has used 7 tokens of its budget of 5.","clears_text":"Clears on the next poll tick after `agent.max_tokens` is raised above 5 or is removed, or after the issue leaves the active tracker states.","action":{"kind":"acknowledge"},"evidence":{"reason":"token_budget","used_tokens":7,"used_tokens_complete":false,"budget_tokens":5}}"#,
            ]
        );
    }
}
