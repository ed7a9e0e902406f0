//! The kinds' decisions over a scripted forge.

use std::sync::Mutex;

use crate::config::reactions::{
    CiFailureConfig, Escalation, MergeCompletionConfig, MergeConflictsConfig, ReactionsConfig,
    ReviewCommentsConfig,
};
use crate::domain::{CiStatus, EscalationTrigger, ReactionKind, ReactionWait};
use crate::orchestrator::core::state::CheckHealth;
use crate::scm::*;

use super::cx::CheckCx;
use super::seed::{self, SeedRun};
use super::{FixContext, ReactionIssue, ReactionRow, RowMemory, Step, check_row};

const NOW: i64 = 1_000_000_000;

#[derive(Default)]
struct Forge {
    pr: Mutex<PullRequestInfo>,
    ci: Mutex<Option<CiReport>>,
    comments: Mutex<Vec<ReviewComment>>,
    fail_reads: Mutex<bool>,
}

fn down() -> ScmError {
    ScmError {
        kind: ScmErrorKind::Transport,
        message: "down".into(),
    }
}

impl Forge {
    fn failing(&self) -> ScmResult<()> {
        if *self.fail_reads.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(down());
        }
        Ok(())
    }
}

impl ScmAdapter for Forge {
    fn kind(&self) -> &'static str {
        "github"
    }
    fn ci_report(&self, _: &PullRequestRef, _: &str, _: usize) -> ScmResult<CiReport> {
        self.failing()?;
        self.ci
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(down)
    }
    fn review_comments(&self, _: &PullRequestRef) -> ScmResult<Vec<ReviewComment>> {
        self.failing()?;
        Ok(self
            .comments
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone())
    }
    fn review_decision(&self, _: &PullRequestRef) -> ScmResult<ReviewDecision> {
        Ok(ReviewDecision::None)
    }
    fn pull_request(&self, _: &PullRequestRef) -> ScmResult<PullRequestInfo> {
        self.failing()?;
        Ok(self.pr.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }
    fn merge(&self, _: &PullRequestRef, _: MergeStrategy, _: &str) -> ScmResult<MergeOutcome> {
        Ok(MergeOutcome::Merged { sha: None })
    }
    fn delete_branch(&self, _: &PullRequestRef, _: &str) -> ScmResult<()> {
        Ok(())
    }
    fn label_events(&self, _: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
        Ok(Vec::new())
    }
    fn remove_label(&self, _: &PullRequestRef, _: &str) -> ScmResult<()> {
        Ok(())
    }
}

fn cfg() -> ReactionsConfig {
    ReactionsConfig {
        provider: Some("github".into()),
        ci_failure: Some(CiFailureConfig {
            max_retries: 1,
            max_log_lines: 5,
            triage: false,
            escalation: Escalation::default(),
        }),
        review_comments: Some(ReviewCommentsConfig {
            max_continuation_turns: 2,
            debounce_ms: 60_000,
            poll_interval_ms: 120_000,
            triage: false,
            escalation: Escalation::default(),
        }),
        merge_conflicts: Some(MergeConflictsConfig {
            max_retries: 1,
            poll_interval_ms: 60_000,
            triage: false,
            escalation: Escalation::default(),
        }),
        merge_completion: Some(MergeCompletionConfig {
            target_state: "done".into(),
            max_retries: 2,
            poll_interval_ms: 60_000,
            escalation: Escalation::default(),
        }),
        ..ReactionsConfig::default()
    }
}

fn run(sha: &str) -> SeedRun {
    SeedRun {
        issue: ReactionIssue {
            id: "1".into(),
            identifier: "1".into(),
            ..ReactionIssue::default()
        },
        record: crate::agent::pr_record::PrRecord {
            branch: "b".into(),
            sha: sha.into(),
            pr_number: 7,
            owner: "o".into(),
            repo: "r".into(),
            ..Default::default()
        },
        dispatched_at_ms: Some(NOW),
        chain_id: String::new(),
        rule_name: String::new(),
        agent_kind: "claude-code".into(),
        configured_model: String::new(),
        next_attempt: 1,
        session_id: None,
    }
}

fn seeded(kind: ReactionKind, sha: &str) -> (ReactionRow, RowMemory) {
    let r = run(sha);
    let pr = r
        .pull_request()
        .unwrap_or_else(|| panic!("no pull request"));
    let row = seed::new_row(kind, &r, pr, NOW, &cfg());
    let mut mem = RowMemory::default();
    seed::remember_run(&mut mem, &r);
    (row, mem)
}

fn open_pr(head: &str) -> PullRequestInfo {
    PullRequestInfo {
        open: true,
        head_sha: head.into(),
        url: "https://example/pr/7".into(),
        ..Default::default()
    }
}

fn report(status: CiStatus, git_ref: &str) -> CiReport {
    CiReport {
        status,
        git_ref: git_ref.into(),
        check_runs: Vec::new(),
        failing_checks: vec!["Test".into()],
        failing: u32::from(status == CiStatus::Failing),
        pending: 0,
        passing: 1,
        log_excerpt: "boom".into(),
    }
}

fn check(forge: &Forge, row: &mut ReactionRow, mem: &mut RowMemory, busy: bool) -> Step {
    let mut health = CheckHealth::default();
    let cfg = cfg();
    let mut cx = CheckCx {
        now_ms: NOW,
        scm: forge,
        health: &mut health,
        cfg: &cfg,
        poll_interval_ms: 10_000,
        slot_busy: busy,
    };
    check_row(row, mem, &mut cx)
}

fn set(forge: &Forge, pr: PullRequestInfo, ci: Option<CiReport>) {
    *forge.pr.lock().unwrap_or_else(|p| p.into_inner()) = pr;
    *forge.ci.lock().unwrap_or_else(|p| p.into_inner()) = ci;
}

#[test]
fn ci_dispatches_once_per_failing_head_then_escalates() {
    let forge = Forge::default();
    let (mut row, mut mem) = seeded(ReactionKind::Ci, "sha1");
    set(
        &forge,
        open_pr("sha1"),
        Some(report(CiStatus::Failing, "sha1")),
    );
    let step = check(&forge, &mut row, &mut mem, true);
    assert!(
        matches!(
            step,
            Step::Wait {
                wait: ReactionWait::RetrySlot,
                ..
            }
        ),
        "{step:?}"
    );
    let step = check(&forge, &mut row, &mut mem, false);
    let Step::Dispatch {
        context: Some(FixContext::CiFailure(c)),
        fingerprint,
        ..
    } = step
    else {
        panic!("{step:?}");
    };
    assert_eq!(
        (c.git_ref.as_str(), c.log_excerpt.as_str()),
        ("sha1", "boom")
    );
    assert_eq!(fingerprint.as_deref(), Some("sha1"));
    mem.fingerprint = Some(("sha1".into(), true));
    row.used_attempts = Some(1);
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Wait {
            wait: ReactionWait::PollInterval,
            ..
        }
    ));
    // The fix's own head fails too: the budget of 1 is spent.
    mem.own_heads.insert("sha2".into());
    set(
        &forge,
        open_pr("sha2"),
        Some(report(CiStatus::Failing, "sha2")),
    );
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Escalate {
            trigger: EscalationTrigger::BudgetExhausted
        }
    );
}

#[test]
fn a_foreign_head_or_a_pass_resets_the_count_and_ends_the_escalation() {
    let forge = Forge::default();
    let (mut row, mut mem) = seeded(ReactionKind::Ci, "sha1");
    row.used_attempts = Some(1);
    row.escalated_at_ms = Some(NOW - 1);
    row.escalation_trigger = Some(EscalationTrigger::BudgetExhausted);
    set(
        &forge,
        open_pr("someone-else"),
        Some(report(CiStatus::Pending, "someone-else")),
    );
    check(&forge, &mut row, &mut mem, false);
    assert_eq!((row.used_attempts, row.escalated_at_ms), (Some(0), None));
    row.used_attempts = Some(1);
    set(
        &forge,
        open_pr("someone-else"),
        Some(report(CiStatus::Passing, "someone-else")),
    );
    check(&forge, &mut row, &mut mem, false);
    assert_eq!(row.used_attempts, Some(0));
}

#[test]
fn failed_reads_back_off_doubling() {
    let forge = Forge::default();
    *forge.fail_reads.lock().unwrap_or_else(|p| p.into_inner()) = true;
    let (mut row, mut mem) = seeded(ReactionKind::Ci, "sha1");
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Wait {
            wait: ReactionWait::Backoff,
            next_poll_at_ms: NOW + 20_000
        }
    );
    row.backoff_count = 1;
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Wait {
            wait: ReactionWait::Backoff,
            next_poll_at_ms: NOW + 40_000
        }
    );
}

fn comment(id: &str, login: &str, bot: bool, outdated: bool, at: i64) -> ReviewComment {
    ReviewComment {
        id: id.into(),
        file: "f.rs".into(),
        start_line: 1,
        end_line: 0,
        reviewer: login.into(),
        body: "fix".into(),
        outdated,
        from_bot: bot,
        created_at_ms: at,
    }
}

#[test]
fn review_debounces_then_dispatches_the_new_set_only() {
    let forge = Forge::default();
    let (mut row, mut mem) = seeded(ReactionKind::Review, "sha1");
    *forge.comments.lock().unwrap_or_else(|p| p.into_inner()) = vec![
        comment("c1", "alice", false, false, NOW - 1_000),
        comment("c2", "alice", false, true, NOW),
        comment("c3", "bot", true, false, NOW),
    ];
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Wait {
            wait: ReactionWait::Debounce,
            next_poll_at_ms: NOW + 59_000
        }
    );
    forge.comments.lock().unwrap_or_else(|p| p.into_inner())[0].created_at_ms = NOW - 60_000;
    let Step::Dispatch {
        given, fingerprint, ..
    } = check(&forge, &mut row, &mut mem, false)
    else {
        panic!("no dispatch");
    };
    assert_eq!(given, ["c1"]);
    assert_eq!(fingerprint, Some(super::comment_fingerprint(&["c1"])));
    mem.given.insert("c1".into());
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Wait {
            wait: ReactionWait::PollInterval,
            ..
        }
    ));
}

#[test]
fn a_conflict_dispatches_per_head_and_unknown_mergeability_waits() {
    let forge = Forge::default();
    let (mut row, mut mem) = seeded(ReactionKind::MergeConflict, "sha1");
    set(&forge, open_pr("sha1"), None);
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Wait { .. }
    ));
    set(
        &forge,
        PullRequestInfo {
            mergeable: Some(false),
            ..open_pr("sha1")
        },
        None,
    );
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Dispatch { context: None, .. }
    ));
    mem.fingerprint = Some(("sha1".into(), true));
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Wait { .. }
    ));
}

#[test]
fn a_merge_without_its_commit_escalates_after_the_grace() {
    let forge = Forge::default();
    let (mut row, mut mem) = seeded(ReactionKind::MergeCompletion, "sha1");
    set(
        &forge,
        PullRequestInfo {
            merged: true,
            ..open_pr("sha1")
        },
        None,
    );
    assert!(matches!(
        check(&forge, &mut row, &mut mem, false),
        Step::Wait { .. }
    ));
    mem.merged_seen_at_ms = Some(NOW - super::completion::MERGE_COMMIT_GRACE_MS);
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Escalate {
            trigger: EscalationTrigger::MissingMergeCommit
        }
    );
    row.escalated_at_ms = None;
    set(
        &forge,
        PullRequestInfo {
            merged: true,
            merge_commit_sha: Some("m".into()),
            ..open_pr("sha1")
        },
        None,
    );
    let step = check(&forge, &mut row, &mut mem, false);
    assert_eq!(
        step,
        Step::Merged {
            merge_path: "merge_completion",
            transition_to: Some("done".into()),
            merged_here: false,
        }
    );
}

fn check_with(
    forge: &Forge,
    cfg: &ReactionsConfig,
    row: &mut ReactionRow,
    mem: &mut RowMemory,
) -> Step {
    let mut health = CheckHealth::default();
    let mut cx = CheckCx {
        now_ms: NOW,
        scm: forge,
        health: &mut health,
        cfg,
        poll_interval_ms: 10_000,
        slot_busy: false,
    };
    check_row(row, mem, &mut cx)
}

fn triage_cfg() -> ReactionsConfig {
    let mut c = cfg();
    if let Some(ci) = c.ci_failure.as_mut() {
        ci.triage = true;
        ci.max_retries = 2;
    }
    c
}

#[test]
fn triage_gates_a_fix_by_the_verdict_for_its_subject() {
    use super::triage::Verdict;
    let forge = Forge::default();
    let on = triage_cfg();
    let (mut row, mut mem) = seeded(ReactionKind::Ci, "sha1");
    set(
        &forge,
        open_pr("sha1"),
        Some(report(CiStatus::Failing, "sha1")),
    );
    // No verdict: triage first, with the fix's context.
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(
        matches!(&step, Step::Triage { fingerprint, context: Some(FixContext::CiFailure(_)) } if fingerprint == "sha1"),
        "{step:?}"
    );
    // In flight: wait on it.
    mem.triage.in_flight = Some("sha1".into());
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(
        matches!(
            step,
            Step::Wait {
                wait: ReactionWait::Triage,
                ..
            }
        ),
        "{step:?}"
    );
    // act: the fix.
    mem.triage.in_flight = None;
    mem.triage.answer = Some(("sha1".into(), Verdict::Act));
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(matches!(step, Step::Dispatch { .. }), "{step:?}");
    // ignore: nothing.
    mem.triage.answer = Some(("sha1".into(), Verdict::Ignore));
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(
        matches!(
            step,
            Step::Wait {
                wait: ReactionWait::PollInterval,
                ..
            }
        ),
        "{step:?}"
    );
    // escalate: a triage escalation, which later checks of the same head keep.
    mem.triage.answer = Some(("sha1".into(), Verdict::Escalate));
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert_eq!(
        step,
        Step::Escalate {
            trigger: EscalationTrigger::Triage
        }
    );
    row.escalated_at_ms = Some(NOW - 5);
    row.escalation_trigger = Some(EscalationTrigger::Triage);
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(matches!(step, Step::Wait { .. }), "{step:?}");
    assert_eq!(row.escalated_at_ms, Some(NOW - 5));
    assert_eq!(row.escalation_trigger, Some(EscalationTrigger::Triage));
    // A new failing head is a new subject: triaged again.
    set(
        &forge,
        open_pr("sha9"),
        Some(report(CiStatus::Failing, "sha9")),
    );
    let step = check_with(&forge, &on, &mut row, &mut mem);
    assert!(
        matches!(&step, Step::Triage { fingerprint, .. } if fingerprint == "sha9"),
        "{step:?}"
    );
    // Without triage the same check dispatches.
    let step = check_with(&forge, &cfg(), &mut row, &mut mem);
    assert!(matches!(step, Step::Dispatch { .. }), "{step:?}");
}
