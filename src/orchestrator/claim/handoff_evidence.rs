//! `tracker.handoff_evidence`: a run that would hand its issue off (a plain normal exit with a
//! handoff state configured, or a `needs-human-review` declaration) must show evidence of
//! work, or the handoff is withheld: the run is recorded `failed` with its declaration kept,
//! the tracker is not written, and the issue is retried after the failure backoff. After
//! [`HANDOFF_ABSENCE_CEILING`] withheld handoffs in a row the issue is parked
//! (`handoff_absence`) instead. The workspace is read by the supervisor
//! (`workspace::evidence`); the decision here is pure.
//!
//! `strict` accepts a new commit on the workspace's branch since the session started or a
//! pull-request record (`.sortie/scm.json`) other than the one the workspace held when the
//! session started; `observed` also accepts files the run changed. A
//! `blocked` or `no-change-needed` declaration needs no evidence, nor does a run whose rule
//! hops to a next stage (that hop hands the issue to another stage, not to a person). A
//! workspace that could not be read shows no evidence: the retries and, at the ceiling, the
//! park put a person in front of a daemon that cannot tell.

use std::collections::HashMap;

use crate::agent::status_file::DeclaredOutcome;
use crate::config::HandoffEvidence;

use crate::orchestrator::core::run_record::SupervisorExit;
pub use crate::orchestrator::core::run_record::WorkspaceEvidence;

/// Withheld handoffs in a row after which the issue is parked instead of retried.
pub const HANDOFF_ABSENCE_CEILING: u32 = 3;

/// What [`withheld_because`] reads besides the exit.
pub struct HandoffFacts<'a> {
    pub policy: HandoffEvidence,
    pub handoff_state: Option<&'a str>,
    /// The run's rule hops to a next stage after a plain success.
    pub hops: bool,
    /// `None` when the workspace was not read: the run was dispatched while the policy was
    /// `off` (a reload turned it on since), and is not checked.
    pub evidence: Option<&'a WorkspaceEvidence>,
}

/// Whether `exit` would hand the issue off to a person.
fn hands_off(exit: &SupervisorExit, f: &HandoffFacts<'_>) -> bool {
    match exit {
        SupervisorExit::Normal {
            declared: Some(DeclaredOutcome::NeedsHumanReview),
            ..
        } => true,
        SupervisorExit::Normal { declared: None, .. } => f.handoff_state.is_some() && !f.hops,
        _ => false,
    }
}

/// Why the handoff of `exit` is withheld (what the run did not show), or `None` when it goes
/// ahead.
pub fn withheld_because(exit: &SupervisorExit, f: &HandoffFacts<'_>) -> Option<String> {
    let evidence = f.evidence?;
    if f.policy == HandoffEvidence::Off || !hands_off(exit, f) || evidence.new_pr_record {
        return None;
    }
    let missing = match f.policy {
        HandoffEvidence::Observed => "no new commit, no changed file and no pull request record",
        HandoffEvidence::Strict | HandoffEvidence::Off => {
            "no new commit on the workspace's branch and no pull request record"
        }
    };
    match &evidence.git {
        Ok(o) => {
            let shown =
                o.new_commits > 0 || (f.policy == HandoffEvidence::Observed && o.files_changed);
            (!shown).then(|| missing.to_string())
        }
        Err(why) => Some(format!(
            "{missing} (the workspace could not be read: {why})"
        )),
    }
}

/// The exit a withheld handoff records instead of `exit` (a normal exit), keeping its
/// declaration and statement.
pub fn withheld_exit(exit: SupervisorExit, missing: String) -> SupervisorExit {
    match exit {
        SupervisorExit::Normal {
            declared,
            statement,
        } => SupervisorExit::HandoffWithheld {
            declared,
            statement,
            missing,
        },
        other => other,
    }
}

/// Each issue's count of withheld handoffs in a row, stored on every change
/// (`handoff_absence`) and restored at start, so a restart does not start the sequence again.
#[derive(Debug, Clone, Default)]
pub struct AbsenceStreaks(HashMap<String, u32>);

impl AbsenceStreaks {
    /// Counts `exit` for `issue_id` and returns the withheld handoffs in a row it makes (0 for
    /// any other exit). A normal exit ends the sequence; failures and cancellations leave it
    /// as it is. Reaching the ceiling ends it too: the park that follows starts it again.
    pub fn after_exit(&mut self, issue_id: &str, exit: &SupervisorExit) -> u32 {
        match exit {
            SupervisorExit::HandoffWithheld { .. } => {
                let n = self.0.entry(issue_id.to_string()).or_insert(0);
                *n += 1;
                let count = *n;
                if count >= HANDOFF_ABSENCE_CEILING {
                    self.0.remove(issue_id);
                }
                count
            }
            SupervisorExit::Normal { .. } => {
                self.0.remove(issue_id);
                0
            }
            _ => 0,
        }
    }

    /// Takes the stored counts (issue id, count) as the warm start read them.
    pub fn restore(&mut self, counts: Vec<(String, u32)>) {
        self.0.extend(counts.into_iter().filter(|(_, n)| *n > 0));
    }

    /// Ends the issue's sequence; `true` when it had one (its stored row is then removed).
    pub fn forget(&mut self, issue_id: &str) -> bool {
        self.0.remove(issue_id).is_some()
    }

    /// The issue's current count.
    pub fn get(&self, issue_id: &str) -> u32 {
        self.0.get(issue_id).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::evidence::Observed;

    fn normal(declared: Option<DeclaredOutcome>) -> SupervisorExit {
        SupervisorExit::Normal {
            declared,
            statement: Some("done".into()),
        }
    }

    fn facts<'a>(
        policy: HandoffEvidence,
        evidence: Option<&'a WorkspaceEvidence>,
    ) -> HandoffFacts<'a> {
        HandoffFacts {
            policy,
            handoff_state: Some("Review"),
            hops: false,
            evidence,
        }
    }

    fn seen(new_commits: u64, files_changed: bool) -> WorkspaceEvidence {
        WorkspaceEvidence {
            git: Ok(Observed {
                new_commits,
                files_changed,
            }),
            new_pr_record: false,
        }
    }

    #[test]
    fn each_policy_accepts_its_evidence() {
        let nothing = seen(0, false);
        let edited = seen(0, true);
        let committed = seen(2, false);
        let exit = normal(None);
        let w = |p, e| withheld_because(&exit, &facts(p, Some(e)));
        assert_eq!(w(HandoffEvidence::Off, &nothing), None);
        assert!(w(HandoffEvidence::Strict, &nothing).is_some());
        assert!(w(HandoffEvidence::Strict, &edited).is_some());
        assert_eq!(w(HandoffEvidence::Strict, &committed), None);
        assert!(w(HandoffEvidence::Observed, &nothing).is_some());
        assert_eq!(w(HandoffEvidence::Observed, &edited), None);
        assert_eq!(w(HandoffEvidence::Observed, &committed), None);
        // A new pull-request record is evidence under both.
        let recorded = WorkspaceEvidence {
            new_pr_record: true,
            ..nothing.clone()
        };
        assert_eq!(w(HandoffEvidence::Strict, &recorded), None);
        // A run dispatched while the policy was off is not checked.
        assert_eq!(
            withheld_because(&exit, &facts(HandoffEvidence::Strict, None)),
            None
        );
        // A workspace that could not be read shows nothing, and says why.
        let unreadable = WorkspaceEvidence {
            git: Err(crate::workspace::evidence::EvidenceError::Remote(
                "git timed out".into(),
            )),
            new_pr_record: false,
        };
        assert_eq!(
            w(HandoffEvidence::Observed, &unreadable).as_deref(),
            Some(
                "no new commit, no changed file and no pull request record (the workspace could not be read: git timed out)"
            )
        );
    }

    #[test]
    fn only_an_exit_that_hands_off_needs_evidence() {
        let nothing = seen(0, false);
        let f = facts(HandoffEvidence::Strict, Some(&nothing));
        assert!(withheld_because(&normal(Some(DeclaredOutcome::NeedsHumanReview)), &f).is_some());
        assert_eq!(
            withheld_because(&normal(Some(DeclaredOutcome::NoChangeNeeded)), &f),
            None
        );
        assert_eq!(
            withheld_because(&normal(Some(DeclaredOutcome::Blocked)), &f),
            None
        );
        // Without a handoff state a plain exit continues; a hop is not a handoff.
        let mut no_state = facts(HandoffEvidence::Strict, Some(&nothing));
        no_state.handoff_state = None;
        assert_eq!(withheld_because(&normal(None), &no_state), None);
        assert!(
            withheld_because(&normal(Some(DeclaredOutcome::NeedsHumanReview)), &no_state).is_some()
        );
        let mut hop = facts(HandoffEvidence::Strict, Some(&nothing));
        hop.hops = true;
        assert_eq!(withheld_because(&normal(None), &hop), None);
    }

    #[test]
    fn a_withheld_exit_keeps_the_declaration_and_the_streak_parks_at_the_ceiling() {
        let exit = withheld_exit(normal(Some(DeclaredOutcome::NeedsHumanReview)), "x".into());
        assert_eq!(
            exit,
            SupervisorExit::HandoffWithheld {
                declared: Some(DeclaredOutcome::NeedsHumanReview),
                statement: Some("done".into()),
                missing: "x".into()
            }
        );
        let mut s = AbsenceStreaks::default();
        assert_eq!(s.after_exit("1", &exit), 1);
        assert_eq!(s.after_exit("1", &exit), 2);
        // A failure in between leaves the sequence; a normal exit ends it.
        let failed = SupervisorExit::Cancelled {
            reason: crate::agent::CancelReason::Stall,
        };
        assert_eq!(s.after_exit("1", &failed), 0);
        assert_eq!(s.get("1"), 2);
        assert_eq!(s.after_exit("1", &exit), HANDOFF_ABSENCE_CEILING);
        assert_eq!(s.get("1"), 0, "the park starts the count again");
        assert_eq!(s.after_exit("1", &exit), 1);
        assert_eq!(s.after_exit("1", &normal(None)), 0);
        assert_eq!(s.get("1"), 0);
    }
}
