//! The phase against a scripted host: each review turn writes the next scripted verdict.

use super::*;
use crate::agent::CancelReason;
use crate::workspace::HookScripts;

/// What a scripted turn does in the workspace.
enum Act {
    /// Writes this verdict file body.
    Verdict(&'static str),
    /// Writes nothing.
    Nothing,
    /// Writes `.sortie/status`.
    Status(&'static str),
    /// Fails, ending the run with this exit when set.
    Fail(Option<SupervisorExit>),
    /// Cancels the run, then completes.
    Cancel(CancelReason),
    /// Writes a file (a fix).
    Touch(&'static str),
}

struct Host {
    ws: PathBuf,
    script: Vec<Act>,
    turns: Vec<(TurnKind, String)>,
    phases: Vec<SelfReviewPhase>,
    cancel: Option<CancelReason>,
}

impl ReviewHost for Host {
    fn run_turn(&mut self, prompt: &str, kind: TurnKind) -> TurnEnd {
        self.turns.push((kind, prompt.to_string()));
        let act = if self.script.is_empty() {
            Act::Nothing
        } else {
            self.script.remove(0)
        };
        match act {
            Act::Verdict(body) => {
                sortie_file::write(&self.ws, verdict::VERDICT_FILE, body.as_bytes())
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            Act::Nothing => {}
            Act::Status(body) => {
                sortie_file::write(&self.ws, "status", body.as_bytes())
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            Act::Fail(exit) => {
                return TurnEnd::Failed {
                    message: "agent exited 1".into(),
                    exit,
                };
            }
            Act::Cancel(reason) => self.cancel = Some(reason),
            Act::Touch(name) => {
                std::fs::write(self.ws.join(name), "fixed").unwrap_or_else(|e| panic!("{e}"));
            }
        }
        TurnEnd::Completed
    }
    fn report(&mut self, phase: SelfReviewPhase) {
        self.phases.push(phase);
    }
    fn cancel_reason(&self) -> Option<CancelReason> {
        self.cancel
    }
}

const PASS: &str = r#"{"verdict": "pass", "summary": "ready"}"#;
const ITERATE: &str =
    r#"{"verdict": "iterate", "issues": [{"file": "a.rs", "line": 3, "message": "typo"}]}"#;

struct Run {
    end: PhaseEnd,
    host: Host,
    metrics: String,
}

fn phase(max: u32, commands: &[&str], script: Vec<Act>) -> Run {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = d.path().to_path_buf();
    let config = SelfReviewConfig {
        enabled: true,
        max_iterations: max,
        verification_commands: commands.iter().map(|c| c.to_string()).collect(),
        verification_timeout_ms: 10_000,
        ..SelfReviewConfig::default()
    };
    let issue = Issue {
        id: "1".into(),
        identifier: "PROJ-1".into(),
        title: "Do it".into(),
        ..Issue::default()
    };
    let wm = WorkspaceManager::new(ws.clone(), HookScripts::default());
    let metrics = crate::metrics::Metrics::new(&Default::default());
    let env = HookEnv::default();
    let never = crossbeam_channel::never();
    let mut host = Host {
        ws: ws.clone(),
        script,
        turns: Vec::new(),
        phases: Vec::new(),
        cancel: None,
    };
    let input = PhaseInput {
        config: &config,
        issue: &issue,
        workspace: &ws,
        workspaces: &wm,
        env: &env,
        cancel: &never,
        metrics: &metrics,
    };
    let end = run_phase(&input, &mut host);
    let summary = std::fs::read_to_string(ws.join(".sortie").join(SUMMARY_FILE));
    assert!(summary.is_ok(), "the summary is always written");
    assert_eq!(
        end.summary_path.as_deref(),
        Some(ws.join(".sortie/review_summary.md").as_path())
    );
    // The tempdir goes away here; the summary was checked above.
    Run {
        end,
        host,
        metrics: metrics.render(&Default::default()),
    }
}

fn kinds(run: &Run) -> Vec<TurnKind> {
    run.host.turns.iter().map(|(k, _)| *k).collect()
}

#[test]
fn a_first_pass_ends_the_phase_after_one_review() {
    let run = phase(3, &["true"], vec![Act::Verdict(PASS)]);
    assert_eq!(kinds(&run), [TurnKind::Review]);
    let m = &run.end.meta;
    assert_eq!(
        (m.status, m.final_verdict, m.total_iterations),
        (PhaseStatus::Passed, "pass", 1)
    );
    assert!(!m.cap_reached && run.end.exit.is_none());
    assert_eq!(
        run.host.phases.first(),
        Some(&SelfReviewPhase::Started),
        "{:?}",
        run.host.phases
    );
    assert_eq!(run.host.phases.get(1), Some(&SelfReviewPhase::Checking));
    assert_eq!(run.host.phases.get(2), Some(&SelfReviewPhase::Iteration(1)));
    assert!(matches!(
        run.host.phases.get(3),
        Some(SelfReviewPhase::Done(Some(_)))
    ));
    assert!(run.host.turns[0].1.contains("`true`: passed"));
    assert!(
        run.metrics
            .contains("sortie_self_review_iterations_total{verdict=\"pass\"} 1")
    );
    assert!(
        run.metrics
            .contains("sortie_self_review_sessions_total{final_verdict=\"pass\"} 1")
    );
}

#[test]
fn an_iterate_verdict_gets_a_fix_turn_with_the_findings_then_passes() {
    let run = phase(
        3,
        &[],
        vec![
            Act::Verdict(ITERATE),
            Act::Touch("fix.txt"),
            Act::Verdict(PASS),
        ],
    );
    assert_eq!(
        kinds(&run),
        [TurnKind::Review, TurnKind::Fix, TurnKind::Review]
    );
    assert!(
        run.host.turns[1].1.contains("a.rs:3: typo"),
        "{}",
        run.host.turns[1].1
    );
    let m = &run.end.meta;
    assert_eq!(
        (m.status, m.final_verdict, m.total_iterations),
        (PhaseStatus::Passed, "pass", 2)
    );
    assert_eq!(m.iterations[0].verdict, "iterate");
    assert!(m.iterations[0].fix_turn && !m.iterations[1].fix_turn);
    assert_eq!(m.iterations[0].findings, 1);
}

#[test]
fn the_cap_ends_a_phase_that_never_passes_after_2n_minus_1_turns() {
    let run = phase(
        2,
        &[],
        vec![Act::Verdict(ITERATE), Act::Nothing, Act::Nothing],
    );
    assert_eq!(
        kinds(&run),
        [TurnKind::Review, TurnKind::Fix, TurnKind::Review]
    );
    let m = &run.end.meta;
    assert_eq!(
        (m.status, m.final_verdict),
        (PhaseStatus::CapReached, "none")
    );
    assert!(m.cap_reached);
    assert!(
        m.iterations[1]
            .verdict_error
            .as_deref()
            .is_some_and(|e| e.contains("no .sortie"))
    );
    assert!(run.end.exit.is_none());
    assert!(
        run.metrics
            .contains("sortie_self_review_cap_reached_total 1")
    );
}

#[test]
fn a_failing_command_keeps_a_passing_verdict_from_passing() {
    let run = phase(
        2,
        &["echo nope; exit 1"],
        vec![Act::Verdict(PASS), Act::Nothing, Act::Verdict(PASS)],
    );
    assert_eq!(
        kinds(&run),
        [TurnKind::Review, TurnKind::Fix, TurnKind::Review]
    );
    let fix = &run.host.turns[1].1;
    assert!(
        fix.contains("failed (exit 1)") && fix.contains("nope"),
        "{fix}"
    );
    let m = &run.end.meta;
    assert_eq!(
        (m.status, m.final_verdict),
        (PhaseStatus::CapReached, "iterate")
    );
    assert_eq!(m.iterations[0].agent_verdict, Some("pass"));
}

#[test]
fn a_missing_verdict_is_none_and_the_fix_turn_says_so() {
    let run = phase(2, &[], vec![Act::Nothing, Act::Nothing, Act::Verdict(PASS)]);
    assert!(
        run.host.turns[1].1.contains("no usable verdict"),
        "{}",
        run.host.turns[1].1
    );
    assert_eq!(run.end.meta.iterations[0].verdict, "none");
    assert_eq!(run.end.meta.status, PhaseStatus::Passed);
}

#[test]
fn blocked_ends_the_run_and_other_statuses_are_ignored() {
    let run = phase(3, &[], vec![Act::Status("blocked\nno access to the API\n")]);
    assert_eq!(
        run.end.exit,
        Some(SupervisorExit::Normal {
            declared: Some(status_file::DeclaredOutcome::Blocked),
            statement: Some("no access to the API".into()),
        })
    );
    assert_eq!(run.end.meta.status, PhaseStatus::Error);
    assert_eq!(run.end.meta.total_iterations, 1);

    let run = phase(1, &[], vec![Act::Status("needs-human-review\n")]);
    assert!(run.end.exit.is_none());
    assert_eq!(run.end.meta.status, PhaseStatus::CapReached);
}

#[test]
fn a_failed_turn_ends_the_phase_with_an_error() {
    let run = phase(3, &[], vec![Act::Verdict(ITERATE), Act::Fail(None)]);
    assert_eq!(run.end.meta.status, PhaseStatus::Error);
    assert!(run.end.exit.is_none());
    let ended = run.end.meta.iterations[0]
        .ended_by
        .clone()
        .unwrap_or_default();
    assert!(ended.contains("fix turn did not complete"), "{ended}");

    let stop = SupervisorExit::Cancelled {
        reason: CancelReason::Budget,
    };
    let run = phase(3, &[], vec![Act::Fail(Some(stop.clone()))]);
    assert_eq!(run.end.exit, Some(stop));
}

#[test]
fn a_cancel_ends_the_phase_before_the_next_turn() {
    let run = phase(3, &[], vec![Act::Cancel(CancelReason::Shutdown)]);
    assert_eq!(kinds(&run), [TurnKind::Review]);
    assert_eq!(
        run.end.exit,
        Some(SupervisorExit::Cancelled {
            reason: CancelReason::Shutdown
        })
    );
    assert_eq!(run.end.meta.status, PhaseStatus::Error);
}
