//! `GET /api/v1/{identifier}`: one issue's live detail (running, retrying, budget-held or
//! parked) with its run history, or its history alone. A renamed issue is found through the
//! issue id of the newest run recorded under the requested identifier.

use crate::orchestrator::snapshot::Snapshot;
use crate::store::{ReadConn, RunFilter};

use super::AppState;
use super::event_json;
use super::live_rows::LiveRows;
use super::respond::{ApiError, JsonReply, echo};
use super::runs;
use super::views::event::EventView;
use super::views::issue_detail::{
    AttemptsView, HistoryView, HopView, IssueDetailView, IssueMember, LastStageView, NextOutcome,
    WorkspaceView,
};
use super::views::pr_loop::PrLoopView;
use super::views::run::{IssueTotalsView, OutcomeView, RunView};
use super::views::{EmptyObject, IssueRows, IssueStatus, nonempty, to_value, ts};
use super::wording;
use crate::config::dispatch::DispatchConfig;
use crate::store::RunRecord;

/// Events the detail serves.
const RECENT_EVENTS: usize = 50;
/// Runs the history member serves.
const HISTORY_RUNS: usize = 50;

fn live_issue_id(snap: &Snapshot, identifier: &str) -> Option<String> {
    snap.running
        .iter()
        .map(|r| &r.issue)
        .chain(snap.retrying.iter().map(|r| &r.issue))
        .chain(snap.budget_exhausted.iter().map(|r| &r.issue))
        .chain(snap.parked.iter().map(|r| &r.issue))
        .map(|i| (&i.identifier, &i.id))
        .chain(
            snap.pending_reactions
                .iter()
                .map(|r| (&r.issue.identifier, &r.issue.id)),
        )
        .chain(
            snap.between_stages
                .iter()
                .map(|r| (&r.hop.identifier, &r.hop.issue_id)),
        )
        .find(|(ident, _)| *ident == identifier)
        .map(|(_, id)| id.clone())
}

/// The stage chain of the newest run that no reaction started and that has a rule.
fn last_stage(runs: &[RunRecord], dispatch: &DispatchConfig) -> Option<LastStageView> {
    let deciding = runs
        .iter()
        .find(|r| !r.rule_name.is_empty() && r.reaction_kind.as_deref().unwrap_or("").is_empty())?;
    let chain = super::views::run::stage_chain(deciding, dispatch)?;
    Some(LastStageView {
        chain,
        rule: deciding.rule_name.clone(),
    })
}

fn history(
    conn: &ReadConn,
    issue_id: &str,
    dispatch: &DispatchConfig,
) -> Result<(Option<HistoryView>, Option<OutcomeView>), ApiError> {
    let page = conn
        .list_runs(
            &RunFilter {
                issue_id: Some(issue_id.to_string()),
                ..Default::default()
            },
            None,
            HISTORY_RUNS,
        )
        .map_err(ApiError::history_unavailable)?;
    let outcome = runs::outcome(conn, issue_id)?;
    if page.runs.is_empty() {
        return Ok((None, outcome));
    }
    let hops = page
        .runs
        .iter()
        .filter(|r| !r.stage_target.is_empty())
        .map(|r| HopView {
            run_id: r.run_id,
            chain_id: nonempty(&r.chain_id),
            source_rule: r.rule_name.clone(),
            target_rule: r.stage_target.clone(),
            result: r.stage_result.clone(),
            completed_at: ts(r.completed_at_ms),
        })
        .collect();
    let totals = conn
        .issue_totals(issue_id)
        .map_err(ApiError::history_unavailable)?;
    let h = HistoryView {
        runs: page
            .runs
            .iter()
            .map(|r| RunView::build(r, outcome.as_ref(), true, dispatch))
            .collect(),
        next_cursor: page.next_cursor.map(|c| c.to_string()),
        totals: IssueTotalsView::build(&totals),
        hops,
        last_stage: last_stage(&page.runs, dispatch),
        issue_outcome: outcome.clone(),
    };
    Ok((Some(h), outcome))
}

/// The newest recorded events of the issue's newest run that has a dispatch id.
fn recorded_events(conn: &ReadConn, issue_id: &str) -> Result<Vec<EventView>, ApiError> {
    // An unreadable dispatch id reads as none: the detail still serves without events.
    let Some(d) = conn.newest_dispatch_id(issue_id).ok().flatten() else {
        return Ok(Vec::new());
    };
    let stored = conn.run_events(&d).map_err(ApiError::history_unavailable)?;
    Ok(stored
        .map(|s| {
            let skip = s.events.len().saturating_sub(RECENT_EVENTS);
            s.events[skip..]
                .iter()
                .map(|e| event_json::view(e.seq, &e.payload))
                .collect()
        })
        .unwrap_or_default())
}

/// What happens next to a running or retrying issue.
fn next_outcomes(snap: &Snapshot, found: &IssueRows<'_>) -> Vec<NextOutcome> {
    let cfg = &snap.config;
    let mut next = Vec::new();
    let mut add = |condition: String, text: String| next.push(NextOutcome { condition, text });
    // A paused retry waits on the issue's state or a blocker, not on its due time: no pair.
    let paused = found
        .retry
        .is_some_and(|r| r.error.as_deref().is_some_and(super::views::retry::paused));
    if let Some(r) = found.retry.filter(|_| !paused) {
        let when = r.due_at_ms - snap.generated_at_ms;
        // Retry N starts the run the history records as attempt N + 1: both words, so the
        // retry queue and the run history never seem to disagree by one.
        let which = format!(
            "retry {} (attempt {})",
            r.attempt,
            r.attempt.saturating_add(1)
        );
        let text = if when <= 0 {
            format!("Sortie starts {which} on the next check of the retry queue.")
        } else {
            format!(
                "Sortie starts {which} in {}, if an agent slot is free.",
                wording::duration(when)
            )
        };
        add("When the retry comes due".into(), text);
    } else if let Some(b) = found.between.filter(|_| found.running.is_none()) {
        let (condition, text) =
            wording::between_stages_next(&b.hop.target_rule, &b.hop.target_label);
        add(condition, text);
    } else if found.running.is_some_and(|r| r.reaction.is_none()) {
        // A reaction's continuation yields none: the pending reactions say what follows it.
        if let Some(h) = &cfg.handoff_state {
            add(
                "If the run succeeds".into(),
                format!("Sortie moves the issue to {h}."),
            );
        }
        add(
            "If the run fails".into(),
            "Sortie retries with exponential backoff.".into(),
        );
        if let Some(t) = cfg.max_tokens {
            add(
                format!("If tokens reach {}", wording::tokens(t)),
                "Sortie stops the session and holds the issue at its token budget.".into(),
            );
        }
    }
    let facts = super::reaction_next::IssueFacts {
        cfg: &cfg.reactions,
        poll_interval_ms: cfg.poll_interval_ms,
        now_ms: snap.generated_at_ms,
        budget_hold: found.budget.map(|b| match b.reason {
            crate::domain::BudgetReason::Money => "money budget",
            crate::domain::BudgetReason::Token => "token budget",
            crate::domain::BudgetReason::Session => "session budget",
        }),
    };
    for (condition, text) in super::reaction_next::pairs(&found.pending, &facts) {
        add(condition, text);
    }
    next
}

/// The detail of an issue only run history holds.
fn history_only(
    conn: &ReadConn,
    snap: &Snapshot,
    identifier: &str,
    issue_id: String,
    history: HistoryView,
    outcome: Option<&OutcomeView>,
) -> Result<IssueDetailView, ApiError> {
    let head = history.runs.first();
    let pass = head.and_then(|h| {
        let chain = h.stage.chain_id.as_deref().unwrap_or("");
        (!chain.is_empty() && h.dispatched_at.is_some())
            .then(|| (h.issue_id.clone(), chain.to_string()))
    });
    let pr_loop = pr_loop_of(conn, snap, pass)?;
    let pair = wording::history(
        outcome.map(|o| o.kind.as_str()),
        outcome.and_then(|o| o.state.as_deref()).unwrap_or(""),
    );
    Ok(IssueDetailView {
        issue_identifier: head
            .map(|h| h.issue_identifier.clone())
            .unwrap_or_else(|| identifier.to_string()),
        status: IssueStatus::History,
        sentences: pair.into(),
        next_outcomes: Vec::new(),
        issue: IssueMember {
            title: head.and_then(|h| h.issue_title.clone()),
            url: head.and_then(|h| h.issue_url.clone()),
            ..Default::default()
        },
        workspace: None,
        attempts: AttemptsView {
            restart_count: 0,
            current_retry_attempt: 0,
        },
        running: None,
        retry: None,
        budget_exhausted: None,
        parked: None,
        pending_reactions: Vec::new(),
        between_stages: None,
        recent_events: recorded_events(conn, &issue_id)?,
        last_error: None,
        pr_loop,
        tracked: EmptyObject,
        history: Some(history),
        issue_id,
    })
}

/// `pr_loop` of `pass`; a failed read answers `history_unavailable`.
fn pr_loop_of(
    conn: &ReadConn,
    snap: &Snapshot,
    pass: Option<super::pr_loop::PassKey>,
) -> Result<PrLoopView, ApiError> {
    let passes = [pass];
    let activity = super::pr_loop::read(conn, &passes).map_err(ApiError::history_unavailable)?;
    Ok(super::pr_loop::view(snap, passes[0].as_ref(), &activity))
}

/// The issue figures of a running row; unreadable history leaves them `null`.
fn running_spend(
    conn: &ReadConn,
    found: &IssueRows<'_>,
    issue_id: &str,
    identifier: &str,
) -> Option<crate::store::IssueSpend> {
    found
        .running
        .and_then(|_| match conn.issue_spend(issue_id) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(
                    issue_id:% = issue_id,
                    issue_identifier:% = identifier,
                    error:% = e;
                    "issue spend read failed"
                );
                None
            }
        })
}

/// The newest events: the running session's live ring, or those recorded for the issue.
fn recent_events(
    conn: &ReadConn,
    found: &IssueRows<'_>,
    issue_id: &str,
) -> Result<Vec<EventView>, ApiError> {
    Ok(match found.running {
        Some(r) => {
            let skip = r.recent_events().len().saturating_sub(RECENT_EVENTS);
            r.recent_events()
                .skip(skip)
                .map(|(seq, ev)| event_json::view_live(seq, ev))
                .collect()
        }
        None => recorded_events(conn, issue_id)?,
    })
}

pub fn detail(state: &AppState, identifier: &str) -> Result<JsonReply, ApiError> {
    let snap = state.orch.snapshot();
    let conn = state
        .store
        .read_pool()
        .get()
        .map_err(ApiError::history_unavailable)?;
    let not_found = || {
        ApiError::new(
            404,
            "issue_not_found",
            format!(
                "issue identifier \"{}\" not found in current state or run history",
                echo(identifier)
            ),
        )
    };
    // An identifier only run history could know is not "not found" while history cannot be
    // read: the answer is that history is unavailable.
    let issue_id = match live_issue_id(&snap, identifier) {
        Some(id) => id,
        None => conn
            .issue_id_by_identifier(identifier)
            .map_err(ApiError::history_unavailable)?
            .ok_or_else(not_found)?,
    };
    let (history, outcome) = history(&conn, &issue_id, &snap.config.dispatch)?;
    let found = IssueRows::find(&snap, &issue_id);
    let spend = running_spend(&conn, &found, &issue_id, identifier);
    let rows = LiveRows::build(&snap, &found, spend);
    let Some((status, fields, sentences)) = rows.deciding() else {
        let history = history.ok_or_else(not_found)?;
        let view = history_only(
            &conn,
            &snap,
            identifier,
            issue_id,
            history,
            outcome.as_ref(),
        )?;
        return Ok(JsonReply::ok(to_value(&view)));
    };
    let (issue_identifier, issue, sentences) = (
        fields.issue_identifier.clone(),
        rows.issue_member().unwrap_or_default(),
        sentences.clone(),
    );
    let recent_events = recent_events(&conn, &found, &issue_id)?;
    let pr_loop = pr_loop_of(&conn, &snap, super::pr_loop::live_pass(&found))?;
    let attempt = found
        .running
        .map(|r| r.attempt + 1)
        .or(found.retry.map(|r| r.attempt))
        .unwrap_or(0);
    // Worded as the retry row's `error` is.
    let last_error = rows.retry.as_ref().and_then(|r| r.error.clone());
    let view = IssueDetailView {
        issue_identifier,
        issue_id,
        status,
        sentences,
        next_outcomes: next_outcomes(&snap, &found),
        issue,
        workspace: found
            .running
            .and_then(|r| r.workspace_path.as_ref())
            .map(|p| WorkspaceView {
                path: p.display().to_string(),
            }),
        attempts: AttemptsView {
            restart_count: attempt.saturating_sub(1),
            current_retry_attempt: found.retry.map(|r| r.attempt).unwrap_or(0),
        },
        running: rows.running,
        retry: rows.retry,
        budget_exhausted: rows.budget,
        parked: rows.parked,
        pending_reactions: rows.pending,
        between_stages: rows.between,
        recent_events,
        last_error,
        pr_loop,
        tracked: EmptyObject,
        history,
    };
    Ok(JsonReply::ok(to_value(&view)))
}
