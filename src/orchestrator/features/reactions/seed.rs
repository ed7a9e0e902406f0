//! Creating pending reactions: at the exit of a run that left a pull-request record (one row
//! per kind the process applies), and at startup from run history and stored escalations.

use crate::agent::pr_record::PrRecord;
use crate::config::reactions::ReactionsConfig;
use crate::domain::{Issue, ReactionKind};
use crate::scm::PullRequestRef;

use super::memory::RowMemory;
use super::row::{ReactionIssue, ReactionPr, ReactionRow};

/// The run a reaction follows.
#[derive(Debug, Clone)]
pub struct SeedRun {
    pub issue: ReactionIssue,
    pub record: PrRecord,
    pub dispatched_at_ms: Option<i64>,
    /// The run's pass; `""` when it was recorded without one.
    pub chain_id: String,
    pub rule_name: String,
    pub agent_kind: String,
    pub configured_model: String,
    /// The attempt the issue's next continuation dispatches.
    pub next_attempt: u32,
    pub session_id: Option<String>,
}

impl SeedRun {
    /// The pull request the record names, if it names one.
    pub fn pull_request(&self) -> Option<PullRequestRef> {
        self.record
            .pull_request()
            .map(|(owner, repo, number)| PullRequestRef {
                owner: owner.to_string(),
                repo: repo.to_string(),
                number,
            })
    }
}

/// The issue as the run read it, with the state the reaction records.
pub fn issue_of(issue: &Issue, state: &str) -> ReactionIssue {
    ReactionIssue {
        id: issue.id.clone(),
        identifier: issue.identifier.clone(),
        display_identifier: issue.display_identifier.clone(),
        title: issue.title.clone(),
        url: issue.url.clone(),
        issue_type: Some(issue.issue_type.clone()),
        labels: Some(issue.labels.clone()),
        state: state.to_string(),
    }
}

/// The kinds the process applies, in the reference's order.
pub fn applied_kinds(cfg: &ReactionsConfig) -> Vec<ReactionKind> {
    if cfg.provider.is_none() {
        return Vec::new();
    }
    let labels = cfg.label_commands.as_ref();
    ReactionKind::ALL
        .iter()
        .copied()
        .filter(|k| match k {
            ReactionKind::Ci => cfg.ci_failure.is_some(),
            ReactionKind::Review => cfg.review_comments.is_some(),
            ReactionKind::BotReview => cfg.bot_review.is_some(),
            ReactionKind::Merge => cfg.auto_merge.is_some(),
            ReactionKind::MergeConflict => cfg.merge_conflicts.is_some(),
            ReactionKind::LabelReview => labels.is_some_and(|l| l.review_label.is_some()),
            ReactionKind::LabelFix => labels.is_some_and(|l| l.fix_label.is_some()),
            ReactionKind::MergeCompletion => cfg.merge_completion.is_some(),
        })
        .collect()
}

/// `watch_window_ms` of the kind as applied (0 for kinds without one).
pub fn watch_window_ms(kind: ReactionKind, cfg: &ReactionsConfig) -> u64 {
    let esc = match kind {
        ReactionKind::Ci => cfg.ci_failure.as_ref().map(|c| &c.escalation),
        ReactionKind::Review => cfg.review_comments.as_ref().map(|c| &c.escalation),
        ReactionKind::BotReview => cfg.bot_review.as_ref().map(|c| &c.escalation),
        ReactionKind::Merge => cfg.auto_merge.as_ref().map(|c| &c.escalation),
        ReactionKind::MergeConflict => cfg.merge_conflicts.as_ref().map(|c| &c.escalation),
        ReactionKind::MergeCompletion | ReactionKind::LabelReview | ReactionKind::LabelFix => None,
    };
    esc.map(|e| e.watch_window_ms).unwrap_or(0)
}

/// A new row, due at once.
pub fn new_row(
    kind: ReactionKind,
    run: &SeedRun,
    pr: PullRequestRef,
    now_ms: i64,
    cfg: &ReactionsConfig,
) -> ReactionRow {
    let counts = !matches!(kind, ReactionKind::LabelReview | ReactionKind::LabelFix);
    let mut row = ReactionRow {
        issue: run.issue.clone(),
        kind,
        pr: ReactionPr {
            pr,
            url: String::new(),
            branch: String::new(),
            head_sha: String::new(),
        },
        created_at_ms: now_ms,
        dispatched_at_ms: run.dispatched_at_ms,
        chain_id: run.chain_id.clone(),
        next_poll_at_ms: now_ms,
        wait: None,
        used_attempts: counts.then_some(0),
        max_attempts: None,
        escalated_at_ms: None,
        escalation_trigger: None,
        watch_from_ms: now_ms,
        watch_window_ms: watch_window_ms(kind, cfg),
        last_check: None,
        rule_name: run.rule_name.clone(),
        agent_kind: run.agent_kind.clone(),
        configured_model: run.configured_model.clone(),
        backoff_count: 0,
        check_now: None,
    };
    refresh_record(&mut row, run);
    row
}

/// A later run of the issue left a record: the row follows it, keeping its counts.
pub fn refresh_row(row: &mut ReactionRow, run: &SeedRun, now_ms: i64) {
    row.issue = run.issue.clone();
    row.dispatched_at_ms = run.dispatched_at_ms.or(row.dispatched_at_ms);
    if !run.chain_id.is_empty() {
        row.chain_id = run.chain_id.clone();
    }
    row.rule_name = run.rule_name.clone();
    row.agent_kind = run.agent_kind.clone();
    row.configured_model = run.configured_model.clone();
    row.next_poll_at_ms = row.next_poll_at_ms.min(now_ms);
    refresh_record(row, run);
}

/// Branch and head from the record, for the kinds that keep them.
fn refresh_record(row: &mut ReactionRow, run: &SeedRun) {
    let keeps_branch = !matches!(
        row.kind,
        ReactionKind::LabelReview | ReactionKind::MergeCompletion
    );
    let keeps_head = !matches!(
        row.kind,
        ReactionKind::LabelReview | ReactionKind::LabelFix | ReactionKind::MergeCompletion
    );
    if keeps_branch {
        row.pr.branch = run.record.branch.trim().to_string();
    }
    if keeps_head {
        row.pr.head_sha = run.record.sha.trim().to_string();
    }
}

/// The engine memory a run leaves: how to continue the session, and its own head.
pub fn remember_run(mem: &mut RowMemory, run: &SeedRun) {
    mem.run_attempt = run.next_attempt;
    mem.session_id = run.session_id.clone();
    let sha = run.record.sha.trim();
    if !sha.is_empty() {
        mem.own_heads.insert(sha.to_string());
        if mem.last_head.is_empty() {
            mem.last_head = sha.to_string();
        }
    }
}
