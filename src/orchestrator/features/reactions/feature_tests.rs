//! The feature's decisions over a returned pass and a triage run that could not start, as
//! the effects it asks the loop for.

use crate::config::reactions::{
    CiFailureConfig, Escalation, ReactionsConfig, ReviewCommentsConfig,
};
use crate::domain::{EscalationTrigger, ReactionKind, ReactionWait, RetryTrigger};
use crate::orchestrator::core::effect::{Count, Effect, Write};
use crate::orchestrator::core::feature_world::World;
use crate::orchestrator::core::tracker_ops::TrackerOp;
use crate::store::{PrLoopMark, ReactionWrite};

use super::feature::{Key, ReactionsFeature};
use super::pass::Checked;
use super::seed::SeedRun;
use super::step::Step;
use super::triage::{TriageError, Verdict};
use super::{ReactionIssue, ReactionRow, RowMemory};

const NOW: i64 = 1_000;

fn world() -> World {
    World::at(NOW)
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
        ..ReactionsConfig::default()
    }
}

/// A row of `kind` seeded by a run of issue 1 in pass `c1`, as the feature keeps it, and a
/// copy of it and its memory as a pass checks them.
fn seeded(f: &mut ReactionsFeature, kind: ReactionKind) -> (ReactionRow, RowMemory) {
    let run = SeedRun {
        issue: ReactionIssue {
            id: "1".into(),
            identifier: "T-1".into(),
            ..ReactionIssue::default()
        },
        record: crate::agent::pr_record::PrRecord {
            branch: "b".into(),
            sha: "abc".into(),
            pr_number: 7,
            owner: "o".into(),
            repo: "r".into(),
            ..Default::default()
        },
        dispatched_at_ms: Some(NOW),
        chain_id: "c1".into(),
        rule_name: String::new(),
        agent_kind: "mock".into(),
        configured_model: String::new(),
        next_attempt: 2,
        session_id: Some("s1".into()),
    };
    let pr = run
        .pull_request()
        .unwrap_or_else(|| panic!("the record names a pull request"));
    let key: Key = ("1".into(), kind);
    f.seed(key.clone(), &run, &pr, NOW, &cfg());
    (f.rows[&key].clone(), f.memory[&key].clone())
}

fn checked(row: ReactionRow, mem: RowMemory, step: Step) -> Checked {
    Checked {
        key: (row.issue.id.clone(), row.kind),
        row,
        mem,
        step,
        was_escalated: false,
        transition: None,
    }
}

fn review_fix() -> Step {
    Step::Dispatch {
        context: None,
        fingerprint: Some("fp".into()),
        given: vec!["c-9".into()],
        counts: true,
    }
}

#[test]
fn a_fix_asks_for_a_continuation_and_the_row_keeps_its_cadence() {
    let w = world();
    let mut f = ReactionsFeature::default();
    let (row, mem) = seeded(&mut f, ReactionKind::Review);
    let effects = f.apply_checked(checked(row, mem, review_fix()), NOW, &w.cx(), &cfg());
    assert_eq!(effects.len(), 5, "{effects:?}");
    assert!(matches!(
        &effects[0],
        Effect::Count(Count::ReviewCheck("dispatched"))
    ));
    let Effect::DispatchReaction(d) = &effects[1] else {
        panic!("a continuation: {effects:?}");
    };
    assert_eq!(
        (d.issue.id.as_str(), d.attempt, d.trigger),
        ("1", 2, RetryTrigger::Continuation)
    );
    assert_eq!(d.session_id.as_deref(), Some("s1"));
    assert_eq!(
        (d.reaction.kind, d.reaction.attempt),
        (ReactionKind::Review, Some(1))
    );
    assert!(matches!(
        &effects[2],
        Effect::Write(Write::Reaction(ReactionWrite::PrLoop(p)))
            if p.mark == PrLoopMark::Continuation && p.chain_id == "c1"
    ));
    assert!(matches!(
        &effects[3],
        Effect::Write(Write::Reaction(ReactionWrite::SaveFingerprint(fp, NOW)))
            if fp.fingerprint == "fp" && fp.dispatched
    ));
    assert!(matches!(
        &effects[4],
        Effect::Write(Write::Reaction(ReactionWrite::GiveComments(g)))
            if g.comment_ids == ["c-9"] && g.pr_key == "o/r#7"
    ));
    let key = ("1".to_string(), ReactionKind::Review);
    let row = &f.rows[&key];
    assert_eq!(row.used_attempts, Some(1));
    assert_eq!(row.wait, Some(ReactionWait::PollInterval));
    assert_eq!(row.next_poll_at_ms, NOW + 120_000);
    let mem = &f.memory[&key];
    assert_eq!(mem.run_attempt, 3);
    assert!(mem.dispatched("fp"));
}

#[test]
fn a_fix_waits_for_the_slot_while_a_triage_run_of_the_issue_is_out() {
    let w = world();
    let mut f = ReactionsFeature::default();
    let (row, mem) = seeded(&mut f, ReactionKind::Review);
    f.triage_runs.insert(
        ("1".into(), ReactionKind::Ci),
        crate::agent::CancelToken::new(),
    );
    let effects = f.apply_checked(checked(row, mem, review_fix()), NOW, &w.cx(), &cfg());
    assert_eq!(effects.len(), 1, "only the check is counted: {effects:?}");
    let row = &f.rows[&("1".to_string(), ReactionKind::Review)];
    assert_eq!(row.wait, Some(ReactionWait::RetrySlot));
    assert_eq!(row.used_attempts, Some(0));
}

#[test]
fn an_escalation_is_stored_before_its_tracker_write() {
    let w = world();
    let mut f = ReactionsFeature::default();
    let (row, mem) = seeded(&mut f, ReactionKind::Ci);
    let step = Step::Escalate {
        trigger: EscalationTrigger::BudgetExhausted,
    };
    let effects = f.apply_checked(checked(row, mem, step), NOW, &w.cx(), &cfg());
    assert_eq!(effects.len(), 5, "{effects:?}");
    assert!(matches!(
        &effects[0],
        Effect::Count(Count::CiStatusCheck("pending"))
    ));
    assert!(matches!(
        &effects[1],
        Effect::Write(Write::Reaction(ReactionWrite::DeleteFingerprint(id, ReactionKind::Ci)))
            if id == "1"
    ));
    assert!(matches!(
        &effects[2],
        Effect::Write(Write::Reaction(ReactionWrite::SaveEscalation(e)))
            if e.escalated_at_ms == NOW && e.pr_number == 7
    ));
    assert!(matches!(
        &effects[3],
        Effect::Write(Write::Reaction(ReactionWrite::PrLoop(p))) if p.mark == PrLoopMark::Escalated
    ));
    assert!(matches!(
        &effects[4],
        Effect::Tracker(TrackerOp::Escalate {
            kind: ReactionKind::Ci,
            ..
        })
    ));
    let row = &f.rows[&("1".to_string(), ReactionKind::Ci)];
    assert_eq!(row.escalated_at_ms, Some(NOW));
}

#[test]
fn a_row_that_left_while_the_pass_was_out_takes_nothing() {
    let w = world();
    let mut f = ReactionsFeature::default();
    let (row, mem) = seeded(&mut f, ReactionKind::Review);
    f.drop_issue("1");
    let effects = f.apply_checked(checked(row, mem, review_fix()), NOW, &w.cx(), &cfg());
    assert!(effects.is_empty(), "{effects:?}");
    assert!(f.rows.is_empty() && f.memory.is_empty());
}

#[test]
fn a_triage_run_that_cannot_start_answers_escalate_without_a_pass_mark() {
    let w = world();
    let mut f = ReactionsFeature::default();
    seeded(&mut f, ReactionKind::Review);
    let key = ("1".to_string(), ReactionKind::Review);
    let effects = f.triage_not_started(&key, "fp".into(), TriageError::AgentUnavailable, &w.cx());
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert!(matches!(
        &effects[0],
        Effect::Write(Write::Reaction(ReactionWrite::SaveTriageAnswer(a)))
            if a.answer == "escalate" && a.fingerprint == "fp" && a.answered_at_ms == NOW
    ));
    assert_eq!(
        f.memory[&key].triage.answer,
        Some(("fp".to_string(), Verdict::Escalate))
    );
}
