//! Pending reaction rows as served: the seed's example rows member for member, the omission
//! rules of every kind, the list order and the deciding row.

use super::*;
use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::orchestrator::reactions::{LastCheck, ReactionIssue, ReactionPr, ReactionRow};
use serde_json::{Value, json};

pub(crate) fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or(0)
}

/// The seed's escalated CI row of MT-653.
pub(crate) fn seed_ci_row() -> ReactionRow {
    ReactionRow {
        issue: ReactionIssue {
            id: "mno345".into(),
            identifier: "MT-653".into(),
            display_identifier: String::new(),
            title: "Add the export button".into(),
            url: "https://tracker.example.com/browse/MT-653".into(),
            issue_type: Some("Story".into()),
            labels: Some(vec!["export".into()]),
            state: "In Review".into(),
        },
        kind: ReactionKind::Ci,
        pr: ReactionPr {
            pr: crate::scm::PullRequestRef {
                owner: "acme".into(),
                repo: "web".into(),
                number: 931,
            },
            url: "https://github.com/acme/web/pull/931".into(),
            branch: "sortie/MT-653".into(),
            head_sha: "4f1c2a9e".into(),
        },
        created_at_ms: at("2026-03-26T14:09:30Z"),
        dispatched_at_ms: Some(at("2026-03-26T13:58:03Z")),
        chain_id: String::new(),
        next_poll_at_ms: at("2026-03-26T14:31:40Z"),
        wait: Some(ReactionWait::PollInterval),
        used_attempts: Some(2),
        max_attempts: Some(2),
        escalated_at_ms: Some(at("2026-03-26T14:26:40Z")),
        escalation_trigger: Some(EscalationTrigger::BudgetExhausted),
        watch_from_ms: at("2026-03-26T14:09:30Z"),
        watch_window_ms: 1_800_000,
        last_check: Some(LastCheck::Ci {
            observed_at_ms: at("2026-03-26T14:26:40Z"),
            head_sha: "9b7e3d1c".into(),
            status: CiStatus::Failing,
            failing_checks: vec!["Test".into()],
            failing: 1,
            pending: 0,
            passing: 4,
        }),
        rule_name: "implement".into(),
        agent_kind: "claude-code".into(),
        configured_model: "claude-sonnet-4-5".into(),
        backoff_count: 0,
        check_now: None,
    }
}

/// The seed's review row of MT-653, waiting for a new comment to settle.
pub(crate) fn seed_review_row() -> ReactionRow {
    ReactionRow {
        kind: ReactionKind::Review,
        next_poll_at_ms: at("2026-03-26T14:30:55Z"),
        wait: Some(ReactionWait::Debounce),
        used_attempts: Some(1),
        max_attempts: Some(3),
        escalated_at_ms: None,
        escalation_trigger: None,
        last_check: Some(LastCheck::Review {
            observed_at_ms: at("2026-03-26T14:29:58Z"),
            actionable_comments: 3,
            new_comments: 1,
            awaiting_approval: false,
        }),
        ..seed_ci_row()
    }
}

pub(crate) fn now() -> i64 {
    at("2026-03-26T14:30:00Z")
}

/// No stage chains: every row serves a null position.
fn no_stages() -> (
    crate::config::dispatch::DispatchConfig,
    std::collections::BTreeMap<String, u32>,
) {
    Default::default()
}

fn served(row: &ReactionRow) -> Value {
    let (d, h) = no_stages();
    let stages = super::super::stage::Stages {
        dispatch: &d,
        hop_counts: &h,
    };
    super::super::to_value(&PendingReactionView::build(row, now(), &stages))
}

#[test]
fn the_escalated_ci_row_serves_the_seed_members_in_order() {
    let (d, h) = no_stages();
    let stages = super::super::stage::Stages {
        dispatch: &d,
        hop_counts: &h,
    };
    let text = serde_json::to_string(&PendingReactionView::build(&seed_ci_row(), now(), &stages))
        .unwrap_or_default();
    assert_eq!(
        text,
        concat!(
            r#"{"issue_id":"mno345","issue_identifier":"MT-653","issue_title":"Add the export button","#,
            r#""issue_url":"https://tracker.example.com/browse/MT-653","issue_type":"Story","issue_labels":["export"],"#,
            r#""state":"In Review","kind":"ci","config_key":"ci_failure","#,
            r#""pull_request":{"number":931,"repository":"acme/web","url":"https://github.com/acme/web/pull/931","branch":"sortie/MT-653","head_sha":"4f1c2a9e"},"#,
            r#""created_at":"2026-03-26T14:09:30.000Z","dispatched_at":"2026-03-26T13:58:03.000Z","next_poll_at":"2026-03-26T14:31:40.000Z","#,
            r#""wait":"poll_interval","used_attempts":2,"max_attempts":2,"escalated_at":"2026-03-26T14:26:40.000Z","#,
            r#""escalation_trigger":"budget_exhausted","watch_ends_at":null,"#,
            r#""last_check":{"observed_at":"2026-03-26T14:26:40.000Z","head_sha":"9b7e3d1c","status":"failing","failing_checks":["Test"],"failing":1,"pending":0,"passing":4},"#,
            r#""rule_name":"implement","stage_position":null,"agent_kind":"claude-code","configured_model":"claude-sonnet-4-5","#,
            r#""status_text":"CI escalated on #931","#,
            r#""status_text_full":"Sortie escalated failing CI on PR #931; it keeps watching the pull request. CI fixes used: 2 of 2."}"#,
        )
    );
}

#[test]
fn the_review_row_serves_its_window_and_debounce_sentences() {
    let v = served(&seed_review_row());
    assert_eq!(v["config_key"], "review_comments");
    assert_eq!(v["wait"], "debounce");
    assert_eq!(v["escalated_at"], Value::Null);
    assert!(v.get("escalation_trigger").is_none());
    assert_eq!(v["watch_ends_at"], "2026-03-26T14:39:30.000Z");
    assert_eq!(
        v["last_check"],
        json!({"observed_at": "2026-03-26T14:29:58.000Z", "actionable_comments": 3, "new_comments": 1})
    );
    assert_eq!(
        v["status_text"],
        "1 new review comment on #931; next check in 55s"
    );
    assert_eq!(
        v["status_text_full"],
        "Waiting for 1 new review comment on PR #931 (3 actionable) to settle; next check in 55s. Review fix runs used: 1 of 3."
    );
}

#[test]
fn a_review_awaiting_approval_holds_its_watch_open() {
    let row = ReactionRow {
        wait: Some(ReactionWait::PollInterval),
        last_check: Some(LastCheck::Review {
            observed_at_ms: at("2026-03-26T14:29:58Z"),
            actionable_comments: 0,
            new_comments: 0,
            awaiting_approval: true,
        }),
        ..seed_review_row()
    };
    let v = served(&row);
    assert_eq!(v["watch_ends_at"], Value::Null);
    assert_eq!(v["last_check"]["awaiting_approval"], true);
    assert_eq!(v["status_text"], "Waiting on approval of #931");
    assert_eq!(
        v["status_text_full"],
        "Waiting on approval of PR #931; next check in 55s. Review fix runs used: 1 of 3."
    );
}

#[test]
fn the_merge_conflict_row_of_the_issue_detail_example() {
    let row = ReactionRow {
        kind: ReactionKind::MergeConflict,
        pr: ReactionPr {
            pr: crate::scm::PullRequestRef {
                owner: "acme".into(),
                repo: "web".into(),
                number: 944,
            },
            ..seed_ci_row().pr
        },
        next_poll_at_ms: at("2026-03-26T14:31:00Z"),
        used_attempts: Some(0),
        max_attempts: Some(1),
        escalated_at_ms: None,
        escalation_trigger: None,
        watch_from_ms: at("2026-03-26T14:20:00Z"),
        last_check: Some(LastCheck::MergeConflict {
            observed_at_ms: now(),
            head_sha: String::new(),
            mergeable: None,
        }),
        ..seed_ci_row()
    };
    let v = served(&row);
    // `mergeable` is always present, `null` until the provider computed it; an empty head
    // is omitted.
    assert_eq!(
        v["last_check"],
        json!({"observed_at": "2026-03-26T14:30:00.000Z", "mergeable": null})
    );
    assert_eq!(v["watch_ends_at"], "2026-03-26T14:50:00.000Z");
    let row = ReactionRow {
        last_check: Some(LastCheck::MergeConflict {
            observed_at_ms: now(),
            head_sha: "c0ffee".into(),
            mergeable: Some(true),
        }),
        ..row
    };
    let v = served(&row);
    assert_eq!(v["status_text"], "Watching #944 for merge conflicts");
    assert_eq!(
        v["status_text_full"],
        "Sortie watches PR #944 for merge conflicts; the last check found none; next check in 1m. Rebase runs used: 0 of 1."
    );
}

#[test]
fn bot_review_serves_handled_only_when_true() {
    let mut row = ReactionRow {
        kind: ReactionKind::BotReview,
        escalated_at_ms: None,
        escalation_trigger: None,
        last_check: Some(LastCheck::BotReview {
            observed_at_ms: now(),
            actionable_comments: 2,
            new_comments: 0,
            handled: false,
        }),
        ..seed_ci_row()
    };
    let v = served(&row);
    assert!(v["last_check"].get("handled").is_none());
    assert!(v["last_check"].get("awaiting_approval").is_none());
    row.last_check = Some(LastCheck::BotReview {
        observed_at_ms: now(),
        actionable_comments: 2,
        new_comments: 0,
        handled: true,
    });
    let v = served(&row);
    assert_eq!(v["last_check"]["handled"], true);
    assert_eq!(v["status_text"], "Bot review of #931 handled");
}

#[test]
fn pull_request_keys_follow_the_kind() {
    let keys = |kind| {
        let v = served(&ReactionRow {
            kind,
            escalated_at_ms: None,
            escalation_trigger: None,
            last_check: None,
            ..seed_ci_row()
        });
        let pr = v["pull_request"].as_object().cloned().unwrap_or_default();
        pr.keys().cloned().collect::<Vec<_>>().join(",")
    };
    assert_eq!(
        keys(ReactionKind::Ci),
        "number,repository,url,branch,head_sha"
    );
    assert_eq!(keys(ReactionKind::LabelReview), "number,repository,url");
    assert_eq!(keys(ReactionKind::LabelFix), "number,repository,url,branch");
    assert_eq!(keys(ReactionKind::MergeCompletion), "number,repository,url");
    assert_eq!(
        keys(ReactionKind::Merge),
        "number,repository,url,branch,head_sha"
    );
    // A row rebuilt after a restart has no link until a read reports one.
    let mut row = seed_ci_row();
    row.pr.url.clear();
    row.pr.head_sha.clear();
    let v = served(&row);
    assert!(v["pull_request"].get("url").is_none());
    assert!(v["pull_request"].get("head_sha").is_none());
}

#[test]
fn unread_issue_members_and_a_fresh_row_are_omitted_or_null() {
    let row = ReactionRow {
        issue: ReactionIssue {
            issue_type: None,
            labels: None,
            state: String::new(),
            ..seed_ci_row().issue
        },
        kind: ReactionKind::LabelFix,
        wait: None,
        used_attempts: None,
        max_attempts: None,
        escalated_at_ms: None,
        escalation_trigger: Some(EscalationTrigger::Triage),
        dispatched_at_ms: None,
        last_check: None,
        rule_name: String::new(),
        agent_kind: String::new(),
        configured_model: String::new(),
        ..seed_ci_row()
    };
    let v = served(&row);
    for absent in [
        "issue_type",
        "issue_labels",
        "state",
        "wait",
        "escalation_trigger",
        "rule_name",
        "agent_kind",
        "configured_model",
        "display_identifier",
    ] {
        assert!(v.get(absent).is_none(), "{absent}: {v}");
    }
    for null in [
        "dispatched_at",
        "used_attempts",
        "max_attempts",
        "escalated_at",
        "watch_ends_at",
        "last_check",
        "stage_position",
    ] {
        assert_eq!(v[null], Value::Null, "{null}");
    }
    assert_eq!(v["config_key"], "label_commands");
    assert_eq!(v["status_text"], "Watching #931 for the fix label");
    assert_eq!(
        v["status_text_full"],
        "Sortie watches PR #931 for the fix label; next check in 1m 40s."
    );
    // Labels read and none: `[]`.
    let read = ReactionRow {
        issue: ReactionIssue {
            labels: Some(vec![]),
            ..row.issue.clone()
        },
        ..row
    };
    assert_eq!(served(&read)["issue_labels"], json!([]));
}

#[test]
fn rows_sort_by_identifier_then_id_then_kind() {
    let row = |ident: &str, id: &str, kind| ReactionRow {
        issue: ReactionIssue {
            id: id.into(),
            identifier: ident.into(),
            ..Default::default()
        },
        kind,
        ..seed_review_row()
    };
    let rows = vec![
        row("MT-2", "a", ReactionKind::Ci),
        row("MT-1", "b", ReactionKind::MergeCompletion),
        row("MT-1", "b", ReactionKind::Ci),
        row("MT-1", "a", ReactionKind::LabelFix),
    ];
    let (d, h) = no_stages();
    let stages = super::super::stage::Stages {
        dispatch: &d,
        hop_counts: &h,
    };
    let order: Vec<(String, String, ReactionKind)> = build_all(&rows, now(), &stages)
        .into_iter()
        .map(|v| (v.issue.issue_identifier, v.issue.issue_id, v.kind))
        .collect();
    assert_eq!(
        order,
        vec![
            ("MT-1".into(), "a".into(), ReactionKind::LabelFix),
            ("MT-1".into(), "b".into(), ReactionKind::Ci),
            ("MT-1".into(), "b".into(), ReactionKind::MergeCompletion),
            ("MT-2".into(), "a".into(), ReactionKind::Ci),
        ]
    );
}

#[test]
fn the_deciding_row() {
    let ci = seed_ci_row();
    let review = seed_review_row();
    let mut quiet_ci = ReactionRow {
        escalated_at_ms: None,
        escalation_trigger: None,
        ..seed_ci_row()
    };
    // The first escalated row decides, wherever it is.
    assert_eq!(
        deciding(&[&review, &ci]).map(|r| r.kind),
        Some(ReactionKind::Ci)
    );
    // No escalation: the first row.
    assert_eq!(
        deciding(&[&quiet_ci, &review]).map(|r| r.kind),
        Some(ReactionKind::Ci)
    );
    // A review awaiting approval decides when every other row reports nothing outstanding.
    let awaiting = ReactionRow {
        last_check: Some(LastCheck::Review {
            observed_at_ms: 0,
            actionable_comments: 0,
            new_comments: 0,
            awaiting_approval: true,
        }),
        ..seed_review_row()
    };
    let merge = ReactionRow {
        kind: ReactionKind::Merge,
        last_check: None,
        ..quiet_ci.clone()
    };
    assert_eq!(
        deciding(&[&merge, &awaiting]).map(|r| r.kind),
        Some(ReactionKind::Review)
    );
    // A failing CI row is outstanding, so the first row decides.
    assert_eq!(
        deciding(&[&quiet_ci, &awaiting]).map(|r| r.kind),
        Some(ReactionKind::Ci)
    );
    quiet_ci.last_check = Some(LastCheck::Ci {
        observed_at_ms: 0,
        head_sha: String::new(),
        status: CiStatus::Passing,
        failing_checks: vec![],
        failing: 0,
        pending: 0,
        passing: 3,
    });
    assert_eq!(
        deciding(&[&quiet_ci, &awaiting]).map(|r| r.kind),
        Some(ReactionKind::Review)
    );
    assert!(deciding(&[]).is_none());
}

/// `pending_reactions`, its count and `active[]` in the state document: an issue that only
/// pending reactions hold is active with the deciding row's kind and sentences; one that a
/// retry also holds takes the retry's status and carries no `reaction_kind`.
#[test]
fn the_state_document_lists_rows_counts_them_and_makes_issues_active() {
    use crate::orchestrator::snapshot::{RetryRow, Snapshot};
    let retried = ReactionRow {
        issue: ReactionIssue {
            id: "r1".into(),
            identifier: "MT-100".into(),
            ..Default::default()
        },
        escalated_at_ms: None,
        escalation_trigger: None,
        ..seed_review_row()
    };
    let mut snap = Snapshot {
        generated_at_ms: now(),
        ..Default::default()
    };
    snap.pending_reactions = std::sync::Arc::new(vec![seed_review_row(), seed_ci_row(), retried]);
    std::sync::Arc::make_mut(&mut snap.retrying).push(RetryRow {
        issue: crate::domain::Issue {
            id: "r1".into(),
            identifier: "MT-100".into(),
            ..Default::default()
        },
        attempt: 1,
        due_at_ms: now() + 60_000,
        error: None,
        trigger: crate::domain::RetryTrigger::Continuation,
        dispatched_at_ms: at("2026-03-26T13:00:00Z"),
        reaction: None,
        route: Default::default(),
    });
    let doc = super::super::state::StateDoc::build(
        &snap,
        "v",
        &std::collections::BTreeMap::new(),
        Vec::new(),
        0,
    );
    let v = super::super::to_value(&doc);
    assert_eq!(v["counts"]["pending_reactions"], 3);
    let listed: Vec<(String, String)> = v["pending_reactions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["issue_identifier"].as_str().unwrap_or("").to_string(),
                        r["kind"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        listed,
        [
            ("MT-100".to_string(), "review".to_string()),
            ("MT-653".to_string(), "ci".to_string()),
            ("MT-653".to_string(), "review".to_string()),
        ]
    );
    let active = v["active"].as_array().cloned().unwrap_or_default();
    assert_eq!(active.len(), 2, "{active:?}");
    let entry = |id: &str| {
        active
            .iter()
            .find(|e| e["issue_id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    let mt653 = entry("mno345");
    assert_eq!(mt653["status"], "pending_reactions");
    assert_eq!(mt653["reaction_kind"], "ci");
    assert_eq!(mt653["status_text"], "CI escalated on #931");
    assert_eq!(mt653["dispatched_at"], "2026-03-26T13:58:03.000Z");
    let mt100 = entry("r1");
    assert_eq!(mt100["status"], "retrying");
    assert!(mt100.get("reaction_kind").is_none());
}

/// The sentences of the other kinds and waits: each names the pull request, the next check
/// relative to the snapshot, and the tries when the kind counts them.
#[test]
fn sentences_of_every_kind_and_wait() {
    let quiet = |kind, wait, last_check| ReactionRow {
        kind,
        wait,
        last_check,
        escalated_at_ms: None,
        escalation_trigger: None,
        used_attempts: Some(0),
        max_attempts: Some(3),
        next_poll_at_ms: now() + 60_000,
        ..seed_ci_row()
    };
    let full = |r: &ReactionRow| {
        served(r)["status_text_full"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let passing = LastCheck::Ci {
        observed_at_ms: now(),
        head_sha: String::new(),
        status: CiStatus::Passing,
        failing_checks: vec![],
        failing: 0,
        pending: 0,
        passing: 4,
    };
    assert_eq!(
        full(&quiet(
            ReactionKind::Ci,
            Some(ReactionWait::PollInterval),
            Some(passing)
        )),
        "Sortie watches PR #931 for CI; the last check found CI passing; next check in 1m. CI fixes used: 0 of 3."
    );
    assert_eq!(
        full(&quiet(ReactionKind::Ci, Some(ReactionWait::Backoff), None)),
        "Sortie watches PR #931 for CI; the latest check could not complete; next check in 1m. CI fixes used: 0 of 3."
    );
    assert_eq!(
        full(&quiet(
            ReactionKind::BotReview,
            Some(ReactionWait::Triage),
            Some(LastCheck::BotReview {
                observed_at_ms: now(),
                actionable_comments: 1,
                new_comments: 1,
                handled: false,
            })
        )),
        "Sortie watches PR #931 for bot review comments; the last check found 1 actionable comment; it waits on its triage command; next check in 1m. Bot review fix runs used: 0 of 3."
    );
    assert_eq!(
        full(&quiet(
            ReactionKind::Review,
            Some(ReactionWait::RetrySlot),
            None
        )),
        "Sortie watches PR #931 for review comments; no check has completed yet; its work waits for the issue's retry slot; next check in 1m. Review fix runs used: 0 of 3."
    );
    let merge = ReactionRow {
        max_attempts: None,
        ..quiet(ReactionKind::Merge, None, None)
    };
    assert_eq!(
        full(&merge),
        "Sortie watches PR #931 for a chance to merge; next check in 1m. Merge attempts used: 0."
    );
    let due = ReactionRow {
        next_poll_at_ms: now() - 5_000,
        used_attempts: None,
        max_attempts: None,
        ..quiet(ReactionKind::LabelReview, None, None)
    };
    let v = served(&due);
    assert_eq!(v["status_text"], "Watching #931 for the review label");
    assert_eq!(
        v["status_text_full"],
        "Sortie watches PR #931 for the review label; next check due now."
    );
    let completion = ReactionRow {
        escalated_at_ms: Some(now()),
        escalation_trigger: Some(EscalationTrigger::MissingMergeCommit),
        ..quiet(ReactionKind::MergeCompletion, None, None)
    };
    let v = served(&completion);
    assert_eq!(v["status_text"], "Merge completion escalated on #931");
    assert_eq!(v["escalation_trigger"], "missing_merge_commit");
    assert_eq!(v["watch_ends_at"], Value::Null);
    // Every sentence pair follows the rules: a short one without a period, a long one with.
    for kind in ReactionKind::ALL {
        for wait in [
            None,
            Some(ReactionWait::Backoff),
            Some(ReactionWait::RetrySlot),
        ] {
            let v = served(&quiet(*kind, wait, None));
            let short = v["status_text"].as_str().unwrap_or("");
            let long = v["status_text_full"].as_str().unwrap_or("");
            assert!(
                !short.is_empty() && !short.ends_with('.'),
                "{kind}: {short}"
            );
            assert!(long.ends_with('.'), "{kind}: {long}");
        }
    }
}
