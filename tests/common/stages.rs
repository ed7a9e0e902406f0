//! A constructed state with stage chains, shared by the API and dashboard stage tests:
//! specify (by label) → implement → review and bugfix on no chain; MT-649 running on implement
//! (the chain's second stage), MT-650 retrying on implement, MT-655 between stages and held
//! until its label is read, MT-660 parked (bugfix) while between stages too.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use sortie::config::dispatch::{DispatchConfig, DispatchRule, RuleMatch};
use sortie::domain::stage::{Route, StageHop, StageLineage, StageOutcome};
use sortie::domain::{Issue, ParkReason, RetryTrigger, RunStatus};
use sortie::orchestrator::snapshot::{BetweenStagesRow, ConfigView, RetryRow, Snapshot};
use sortie::orchestrator::state::{DispatchCause, Held, Park, RunFacts};
use sortie::store::RunRecord;

pub fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or_else(|e| panic!("{s}: {e}"))
}

pub fn rule(name: &str, stage: Option<&str>, next: Option<&str>) -> DispatchRule {
    DispatchRule {
        name: name.into(),
        stage: stage.map(str::to_string),
        next: next.map(str::to_string),
        ..Default::default()
    }
}

/// specify (by label) → implement → review, and bugfix on no chain.
pub fn dispatch() -> DispatchConfig {
    let mut implement = rule("implement", Some("stage-implement"), Some("review"));
    implement.settings = Some(serde_json::Map::from_iter([(
        "model".to_string(),
        json!("claude-sonnet-4-5"),
    )]));
    DispatchConfig {
        rules: vec![
            DispatchRule {
                matcher: Some(RuleMatch {
                    labels: vec!["export".into()],
                    ..Default::default()
                }),
                ..rule("specify", None, Some("implement"))
            },
            implement,
            rule("review", Some("stage-review"), None),
            rule("bugfix", None, None),
        ],
        ..Default::default()
    }
}

pub fn issue(id: &str, identifier: &str, title: &str) -> Issue {
    Issue {
        id: id.into(),
        identifier: identifier.into(),
        title: title.into(),
        url: format!("https://tracker.example.com/browse/{identifier}"),
        state: "In Progress".into(),
        labels: vec!["export".into()],
        ..Default::default()
    }
}

/// A route on `rule` reached by a hop from `previous`.
pub fn route(rule: &str, previous: Option<&str>, chain_id: &str) -> Route {
    Route {
        rule_name: rule.into(),
        agent_kind: sortie::registry::DEFAULT_AGENT_KIND.into(),
        configured_model: "claude-sonnet-4-5".into(),
        chain_id: chain_id.into(),
        lineage: previous.map(|p| StageLineage {
            previous: p.into(),
            previous_outcome: StageOutcome::Succeeded,
        }),
        ..Default::default()
    }
}

pub fn running(now: i64) -> RunFacts {
    RunFacts {
        hop_first: false,
        issue: issue("abc123", "MT-649", "Fix the flaky login test"),
        dispatch_id: "RLQFSIOFERWGDW2HZY45W55VXK".into(),
        attempt: 0,
        started_at_ms: now - 60_000,
        dispatched_at_ms: at("2026-03-26T13:41:08Z"),
        last_event_at_ms: None,
        last_event_type: None,
        last_message: None,
        session_id: None,
        agent_pid: None,
        turn: 7,
        turn_started_at_ms: now - 60_000,
        tokens: Default::default(),
        tokens_measured: false,
        api_request_count: 0,
        turn_had_usage: false,
        turns_without_figure: 0,
        reported_model: None,
        by_model: Default::default(),
        vendor_amounts: Default::default(),
        pending_cleanup: false,
        budget_stop: None,
        tokens_used_before: 0,
        usage_before: None,
        events: Default::default(),
        workspace_path: None,
        agent_group: None,
        live_row_written_at_ms: 0,
        live_row_dirty: false,
        cause: DispatchCause::PollTick,
        route: route("implement", Some("specify"), "7q2m4x9b1k5d8f3h6j0n2p4rst"),
        ssh_host: None,
        reaction: None,
        review_metadata: None,
    }
}

pub fn hop(id: &str, identifier: &str, dispatched_at: &str) -> StageHop {
    StageHop {
        issue_id: id.into(),
        identifier: identifier.into(),
        hop_count: 1,
        source_rule: "specify".into(),
        target_rule: "implement".into(),
        target_label: "stage-implement".into(),
        previous_outcome: Some(StageOutcome::Succeeded),
        chain_id: "4k8d2m6x0b3f7h1j5n9p2r6tsv".into(),
        dispatched_at_ms: Some(at(dispatched_at)),
        hopped_at_ms: at("2026-03-26T14:28:15Z"),
        issue_title: "Plan the export schema".into(),
        issue_url: format!("https://tracker.example.com/browse/{identifier}"),
        issue_type: "Story".into(),
        state: "In Progress".into(),
        issue_labels: Some(vec!["export".into(), "stage-implement".into()]),
        ..Default::default()
    }
}

/// MT-649 running on implement (second stage), MT-650 retrying on implement, MT-655 between
/// stages and held until its label is read, MT-660 parked (bugfix, no chain) while between
/// stages too.
pub fn snapshot() -> Snapshot {
    let now = at("2026-03-26T14:30:00Z");
    let unconfirmed = Held {
        issue: issue("stu901", "MT-655", "Plan the export schema").into(),
        reason: sortie::orchestrator::stages::unconfirmed_hold("stage-implement"),
        since_ms: at("2026-03-26T14:29:00Z"),
    };
    Snapshot {
        generated_at_ms: now,
        started_at_ms: now - 3_600_000,
        running: vec![running(now)],
        retrying: Arc::new(vec![RetryRow {
            issue: issue("def456", "MT-650", "Retry the export job"),
            attempt: 3,
            due_at_ms: now + 300_000,
            error: Some("no available orchestrator slots".into()),
            trigger: RetryTrigger::Timer,
            dispatched_at_ms: at("2026-03-26T14:02:41Z"),
            route: route("implement", Some("specify"), "c-retry"),
            reaction: None,
        }]),
        parked: Arc::new(vec![Park {
            issue: issue("jkl012", "MT-660", "Rotate the signing keys"),
            reason: ParkReason::AgentBlocked,
            parked_at_ms: at("2026-03-26T14:05:00Z"),
            parked_state: "In Progress".into(),
            label: "needs-human".into(),
            label_applied: true,
            dispatched_at_ms: Some(at("2026-03-26T13:50:00Z")),
            route: Some(route("bugfix", None, "c-park")),
        }]),
        between_stages: Arc::new(vec![
            BetweenStagesRow {
                hop: hop("stu901", "MT-655", "2026-03-26T14:03:41Z"),
                hold: Some(unconfirmed),
            },
            BetweenStagesRow {
                hop: hop("jkl012", "MT-660", "2026-03-26T13:20:00Z"),
                hold: None,
            },
        ]),
        hop_counts: Arc::new(BTreeMap::from([
            ("abc123".to_string(), 1),
            ("def456".to_string(), 1),
            ("stu901".to_string(), 1),
            ("jkl012".to_string(), 1),
        ])),
        config: ConfigView {
            agent_kind: sortie::registry::DEFAULT_AGENT_KIND.into(),
            max_turns: 20,
            poll_interval_ms: 30_000,
            workflow_file: "WORKFLOW.md".into(),
            dispatch: Arc::new(dispatch()),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn hop_run() -> RunRecord {
    RunRecord {
        issue_id: "stu901".into(),
        identifier: "MT-655".into(),
        issue_title: "Plan the export schema".into(),
        attempt: 1,
        started_at_ms: at("2026-03-26T14:03:41Z"),
        completed_at_ms: at("2026-03-26T14:28:10Z"),
        dispatched_at_ms: Some(at("2026-03-26T14:03:41Z")),
        agent_kind: sortie::registry::DEFAULT_AGENT_KIND.into(),
        rule_name: "specify".into(),
        chain_id: "4k8d2m6x0b3f7h1j5n9p2r6tsv".into(),
        stage_target: "implement".into(),
        stage_result: "advanced".into(),
        dispatch_id: Some("P3XN6QWT2KDH7LMB5CZY4RVJ7K".into()),
        trigger: Some(String::new()),
        ..RunRecord::new(RunStatus::Succeeded)
    }
}
