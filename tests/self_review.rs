//! Self-review through the real `fake-agent` (Claude Code's stream format): the supervisor's
//! phase driven directly with the settings set on the loaded workflow, and one daemon run that
//! serves the phase on the running row and the run record.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::FAKE_AGENT;
use serde_json::{Value, json};
use sortie::agent::CancelToken;
use sortie::clock::{Clock, SystemClock};
use sortie::config::reactions::SelfReviewConfig;
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::adapters;
use sortie::orchestrator::msg::{OrchMsg, SupervisorExit, SupervisorResult};
use sortie::orchestrator::self_review::SelfReviewPhase;
use sortie::orchestrator::supervisor::{SupervisorJob, spawn};
use sortie::prompt::PromptTemplate;
use sortie::workspace::{HookScripts, WorkspaceManager};

const CODING: &str = "Work on";
const REVIEW_1: &str = "# Self-review, iteration 1 of";
const REVIEW_2: &str = "# Self-review, iteration 2 of";
const FIX_1: &str = "# Self-review fix, iteration 1 of";

fn verdict_step(when: &str, verdict: &str) -> Value {
    json!({"prompt_contains": when, "write_file": {"path": ".sortie/review_verdict.json",
        "content": json!({"verdict": verdict, "summary": format!("{verdict} it"),
            "issues": [{"file": "src/lib.rs", "line": 7, "severity": "error", "message": "handle the empty case"}]}).to_string()}})
}

/// A turn that plays `init`, runs `extra`, then succeeds.
fn scenario(extra: &[Value]) -> String {
    let mut lines = vec![json!({"init": {}})];
    lines.extend_from_slice(extra);
    lines.push(json!({"result": {"subtype": "success", "text": "Done.", "input_tokens": 10, "output_tokens": 5}}));
    lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new(scenario_text: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let d = dir.path();
        std::fs::write(d.join("scenario.jsonl"), scenario_text).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            d.join("issues.json"),
            json!([{"id": "1", "identifier": "SR-1", "title": "Add the feature", "state": "To Do"}])
                .to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let wf = format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\nworkspace:\n  root: {ws}\nhooks:\n  after_run: env | grep '^SORTIE_SELF_REVIEW' | sort > {env_log}\n\
             agent:\n  kind: claude-code\n  max_turns: 1\n  command: env FAKE_AGENT_SCENARIO={sc} FAKE_AGENT_ARGV_LOG={argv} {fake}\n\
             claude-code:\n  permission_mode: acceptEdits\n---\nWork on {{{{ .issue.identifier }}}}\n",
            ws = d.join("ws").display(),
            env_log = d.join("after_run.env").display(),
            sc = d.join("scenario.jsonl").display(),
            argv = d.join("argv.log").display(),
            fake = FAKE_AGENT,
        );
        std::fs::write(d.join("WORKFLOW.md"), wf).unwrap_or_else(|e| panic!("{e}"));
        Lab { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn workspace(&self) -> PathBuf {
        self.path("ws/SR-1")
    }

    /// Runs one attempt with `review` as the self-review settings; returns what the supervisor
    /// sent: turn starts, phase reports, and the result.
    fn run(&self, review: SelfReviewConfig) -> Sent {
        let opts = LoadOptions::from_process(None);
        let mut wf =
            load_workflow(&self.path("WORKFLOW.md"), &opts).unwrap_or_else(|e| panic!("{e}"));
        wf.config.self_review = review;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0)
            .unwrap_or_else(|e| panic!("{e}"));
        let tracker = adapters::build_tracker(&wf, clock.clone()).unwrap_or_else(|e| panic!("{e}"));
        let agent = adapters::build_agent(&wf, clock.clone()).unwrap_or_else(|e| panic!("{e}"));
        let issue = tracker
            .fetch_candidate_issues()
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no issue"));
        let hooks = HookScripts {
            after_run: wf.config.hooks.after_run.clone(),
            ..HookScripts::default()
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let job = SupervisorJob {
            stage: Default::default(),
            dispatch_id: "D1".into(),
            issue,
            attempt: 0,
            resume_session_id: None,
            workspaces: Arc::new(WorkspaceManager::new(self.path("ws"), hooks)),
            template: Arc::new(template),
            workflow: Arc::new(wf),
            tracker,
            agent,
            cancel: CancelToken::new(),
            clock,
            tx,
            metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
            reaction: None,
            mcp_daemon: Default::default(),
            ssh_host: None,
        };
        let handle = spawn(job).unwrap_or_else(|e| panic!("{e}"));
        let mut sent = Sent::default();
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(OrchMsg::TurnStarted { turn, .. }) => sent.turns.push(turn),
                Ok(OrchMsg::SelfReview { phase, .. }) => sent.phases.push(phase),
                Ok(OrchMsg::Exit(result)) => {
                    sent.result = Some(*result);
                    break;
                }
                Ok(_) => {}
                Err(e) => panic!("no exit from the supervisor: {e}"),
            }
        }
        let _ = handle.join();
        sent
    }

    fn prompts(&self) -> Vec<String> {
        std::fs::read_to_string(self.path("argv.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["prompt"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn after_run_env(&self) -> String {
        std::fs::read_to_string(self.path("after_run.env")).unwrap_or_default()
    }
}

#[derive(Default)]
struct Sent {
    turns: Vec<u32>,
    phases: Vec<SelfReviewPhase>,
    result: Option<SupervisorResult>,
}

impl Sent {
    fn result(&self) -> &SupervisorResult {
        self.result.as_ref().unwrap_or_else(|| panic!("no result"))
    }

    /// The audit trail the phase reported at its end.
    fn metadata(&self) -> Value {
        match self.phases.last() {
            Some(SelfReviewPhase::Done(Some(meta))) => (**meta).clone(),
            other => panic!("the phase did not report its end: {other:?}"),
        }
    }
}

fn review(commands: &[&str], max_iterations: u32) -> SelfReviewConfig {
    SelfReviewConfig {
        enabled: true,
        max_iterations,
        verification_commands: commands.iter().map(|c| c.to_string()).collect(),
        verification_timeout_ms: 30_000,
        ..SelfReviewConfig::default()
    }
}

fn normal(exit: &SupervisorExit) -> bool {
    matches!(exit, SupervisorExit::Normal { declared: None, .. })
}

#[test]
fn self_review_pass_on_the_first_iteration() {
    let lab = Lab::new(&scenario(&[verdict_step(REVIEW_1, "pass")]));
    let sent = lab.run(review(&["true"], 3));
    assert!(normal(&sent.result().exit), "{:?}", sent.result().exit);
    assert_eq!(sent.turns, [1, 2], "one coding turn, one review turn");
    assert_eq!(sent.result().turns_completed, 2);
    let prompts = lab.prompts();
    assert!(prompts[0].contains(CODING));
    assert!(
        prompts[1].contains(REVIEW_1) && prompts[1].contains("`true`: passed"),
        "{}",
        prompts[1]
    );
    let meta = sent.metadata();
    assert_eq!(meta["final_verdict"], "pass");
    assert_eq!(meta["total_iterations"], 1);
    assert_eq!(meta["cap_reached"], false);
    assert_eq!(sent.phases.first(), Some(&SelfReviewPhase::Started));
    assert!(sent.phases.contains(&SelfReviewPhase::Iteration(1)));
    let summary = lab.workspace().join(".sortie/review_summary.md");
    assert!(std::fs::read_to_string(&summary).is_ok_and(|s| s.contains("passed at iteration 1")));
    let env = lab.after_run_env();
    assert!(env.contains("SORTIE_SELF_REVIEW_STATUS=passed"), "{env}");
    assert!(
        env.contains(&format!(
            "SORTIE_SELF_REVIEW_SUMMARY_PATH={}",
            summary.display()
        )),
        "{env}"
    );
}

#[test]
fn self_review_fail_then_pass_runs_a_fix_turn_with_the_findings() {
    let lab = Lab::new(&scenario(&[
        verdict_step(REVIEW_1, "iterate"),
        json!({"prompt_contains": FIX_1, "write_file": {"path": "fixed.txt", "content": "ok"}}),
        verdict_step(REVIEW_2, "pass"),
    ]));
    // Fails until the fix turn wrote its file.
    let sent = lab.run(review(&["test -f fixed.txt"], 3));
    assert!(normal(&sent.result().exit), "{:?}", sent.result().exit);
    assert_eq!(sent.turns, [1, 2, 3, 4], "coding, review, fix, review");
    let prompts = lab.prompts();
    assert!(
        prompts[1].contains("`test -f fixed.txt`: failed (exit 1)"),
        "{}",
        prompts[1]
    );
    assert!(prompts[2].contains(FIX_1), "{}", prompts[2]);
    assert!(
        prompts[2].contains("src/lib.rs:7: handle the empty case"),
        "{}",
        prompts[2]
    );
    assert!(
        prompts[3].contains(REVIEW_2) && prompts[3].contains("passed"),
        "{}",
        prompts[3]
    );
    let meta = sent.metadata();
    assert_eq!(
        (
            meta["final_verdict"].clone(),
            meta["total_iterations"].clone()
        ),
        (json!("pass"), json!(2))
    );
    assert_eq!(meta["iterations"][0]["verdict"], "iterate");
    assert_eq!(meta["iterations"][0]["fix_turn"], true);
    assert!(
        lab.after_run_env()
            .contains("SORTIE_SELF_REVIEW_STATUS=passed")
    );
}

#[test]
fn self_review_cap_reached_after_2n_minus_1_turns() {
    let lab = Lab::new(&scenario(&[
        verdict_step(REVIEW_1, "iterate"),
        verdict_step(REVIEW_2, "iterate"),
    ]));
    let sent = lab.run(review(&[], 2));
    assert!(normal(&sent.result().exit), "{:?}", sent.result().exit);
    assert_eq!(
        sent.turns,
        [1, 2, 3, 4],
        "coding, review, fix, review: no fix after the cap"
    );
    let meta = sent.metadata();
    assert_eq!(meta["cap_reached"], true);
    assert_eq!(meta["final_verdict"], "iterate");
    assert_eq!(meta["total_iterations"], 2);
    let env = lab.after_run_env();
    assert!(
        env.contains("SORTIE_SELF_REVIEW_STATUS=cap_reached"),
        "{env}"
    );
    assert!(env.contains("SORTIE_SELF_REVIEW_SUMMARY_PATH="), "{env}");
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

#[test]
fn self_review_a_timed_out_verification_command_is_killed_with_its_group() {
    let lab = Lab::new(&scenario(&[verdict_step(REVIEW_1, "pass")]));
    let mut cfg = review(&["sleep 300 & echo $! > bg.pid; sleep 300"], 1);
    cfg.verification_timeout_ms = 300;
    let sent = lab.run(cfg);
    let meta = sent.metadata();
    let command = &meta["iterations"][0]["verification"][0];
    assert_eq!(command["timed_out"], true, "{meta}");
    assert_eq!(command["exit_code"], Value::Null);
    // The reviewer passed, but a command that timed out keeps the iteration from passing.
    assert_eq!(meta["final_verdict"], "iterate");
    assert_eq!(meta["cap_reached"], true);
    assert!(lab.prompts()[1].contains("timed out"));
    let pid: i32 = std::fs::read_to_string(lab.workspace().join("bg.pid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no background pid"));
    assert!(
        common::holds_within(Duration::from_secs(10), || !alive(pid)),
        "the command's background process {pid} outlived the timeout"
    );
}

#[test]
fn self_review_disabled_runs_no_review_turn() {
    let lab = Lab::new(&scenario(&[verdict_step(REVIEW_1, "pass")]));
    let sent = lab.run(SelfReviewConfig::default());
    assert_eq!(sent.turns, [1]);
    assert!(sent.phases.is_empty());
    assert_eq!(
        lab.after_run_env().trim(),
        "SORTIE_SELF_REVIEW_STATUS=disabled"
    );
    assert!(!lab.workspace().join(".sortie/review_summary.md").exists());
}

#[test]
fn self_review_is_skipped_when_the_agent_declares_an_outcome() {
    let lab = Lab::new(&scenario(&[json!({"prompt_contains": CODING,
        "write_file": {"path": ".sortie/status", "content": "no-change-needed\n"}})]));
    let sent = lab.run(review(&["true"], 3));
    assert_eq!(sent.turns, [1]);
    assert!(sent.phases.is_empty());
    assert!(
        lab.after_run_env()
            .contains("SORTIE_SELF_REVIEW_STATUS=disabled")
    );
}

// ---- the daemon ----------------------------------------------------------------------------

/// Whether this build's configuration loads `self_review` (the parser of its block); without it
/// the daemon would run with self-review off and the test has nothing to check.
#[test]
fn self_review_daemon_serves_the_phase_and_the_run_summary() {
    let p = common::Project::new();
    p.issues(
        json!([{"id": "1", "identifier": "SR-9", "title": "Add the feature", "state": "To Do"}]),
    );
    let release = p.path("markers/release");
    p.scenario(
        "SR-9",
        &[
            json!({"init": {}}),
            verdict_step(REVIEW_1, "iterate"),
            json!({"prompt_contains": FIX_1, "wait_file": release.display().to_string()}),
            verdict_step(REVIEW_2, "pass"),
            json!({"result": {"subtype": "success", "text": "Done.", "input_tokens": 10, "output_tokens": 5}}),
        ],
    );
    p.fake_agent_workflow(
        "",
        "self_review:\n  enabled: true\n  max_iterations: 3\n  verification_commands: [\"true\"]\n",
    );
    // The project's hooks plus an after_run that keeps the self-review variables.
    let wf = std::fs::read_to_string(p.workflow()).unwrap_or_default().replacen(
        "  before_remove:",
        "  after_run: env | grep '^SORTIE_SELF_REVIEW' | sort > \"$SORTIE_TEST_MARKERS/after_run.env\"\n  before_remove:",
        1,
    );
    p.write("WORKFLOW.md", &wf);
    let d = p.start();
    let row = d.wait_state("the fix turn running", Duration::from_secs(60), |s| {
        s["running"][0]["self_review_active"] == true && s["running"][0]["turn_count"] == 3
    });
    assert_eq!(row["running"][0]["self_review_iteration"], 1, "{row}");
    std::fs::create_dir_all(p.path("markers")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&release, "go").unwrap_or_else(|e| panic!("{e}"));
    let mut runs = Value::Null;
    d.wait_until("the run recorded", Duration::from_secs(60), || {
        runs = d
            .get_ok("/api/v1/runs")
            .and_then(|b| serde_json::from_str(&b).ok())
            .unwrap_or(Value::Null);
        runs["runs"].as_array().is_some_and(|r| !r.is_empty())
    });
    assert_eq!(
        runs["runs"][0]["self_review"],
        json!({"final_verdict": "pass", "total_iterations": 2, "cap_reached": false}),
        "{runs}"
    );
    assert_eq!(runs["runs"][0]["turns_completed"], 4);
    let env = std::fs::read_to_string(p.path("markers/after_run.env")).unwrap_or_default();
    assert!(env.contains("SORTIE_SELF_REVIEW_STATUS=passed"), "{env}");
    assert!(env.contains("SORTIE_SELF_REVIEW_SUMMARY_PATH="), "{env}");
}
