//! An orchestrator driven in the test's own process with a manual clock, over the file tracker
//! and the mock agent: for timing rules (backoff, batching) that the real binary would need
//! minutes of wall time to show.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie::clock::{Clock, ManualClock};
use sortie::config::{LoadOptions, Workflow, load_workflow};
use sortie::orchestrator::snapshot::Snapshot;
use sortie::orchestrator::{Orchestrator, OrchestratorDeps, OrchestratorHandle, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;
use sortie::tracker::TrackerAdapter;

/// The manual clock's start (2027-01-15).
pub const START_MS: i64 = 1_800_000_000_000;

/// An orchestrator that has not started its thread: the test calls `orch.step`.
pub struct InProcess {
    pub orch: Orchestrator,
    pub clock: Arc<ManualClock>,
    pub handle: OrchestratorHandle,
    pub store: Arc<Store>,
}

/// Writes `issues` and a workflow (file tracker, `mock` agent, `max_turns: 1`, a poll floor of
/// 1 ms so a test's refreshes poll at the manual clock's times, `agent_tail`
/// appended after `max_turns`: more agent keys, then other sections) into `dir`, and builds the
/// orchestrator on them with a manual clock and a database in `dir`.
pub fn mock_orchestrator(dir: &Path, issues: &str, agent_tail: &str) -> InProcess {
    mock_orchestrator_with(dir, issues, agent_tail, |wf, clock| {
        adapters::build_tracker(wf, clock).expect("tracker")
    })
}

/// [`mock_orchestrator`] over the tracker `tracker` builds from the loaded workflow (a test's
/// own wrapper around the file tracker, for instance).
pub fn mock_orchestrator_with(
    dir: &Path,
    issues: &str,
    agent_tail: &str,
    tracker: impl FnOnce(&Workflow, Arc<dyn Clock>) -> Arc<dyn TrackerAdapter>,
) -> InProcess {
    std::fs::write(dir.join("issues.json"), issues).expect("issues");
    std::fs::write(
        dir.join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 1000\n  min_interval_ms: 1\nworkspace:\n  root: {}\n\
             agent:\n  kind: mock\n  max_turns: 1\n{}---\nDo {{{{ .issue.identifier }}}}\n",
            dir.join("ws").display(),
            agent_tail
        ),
    )
    .expect("workflow");
    let clock = Arc::new(ManualClock::new(START_MS));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.join("WORKFLOW.md"), &opts).expect("load workflow");
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).expect("template");
    let store = Arc::new(Store::open(&dir.join("sortie.db"), dyn_clock.clone()).expect("store"));
    let deps = OrchestratorDeps {
        tracker: tracker(&wf, dyn_clock.clone()),
        agent: adapters::build_agent(&wf, dyn_clock.clone()).expect("agent"),
        store: store.clone(),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock: dyn_clock,
        prices: sortie::pricing::PriceBoard::default(),
    };
    let (orch, handle) = Orchestrator::new(deps);
    InProcess {
        orch,
        clock,
        handle,
        store,
    }
}

/// Steps until `cond` holds on a fresh snapshot (real-time waits only for supervisor
/// messages), failing with `what` after 20 s.
pub fn step_until(o: &mut Orchestrator, what: &str, cond: impl Fn(&Snapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        o.step(Duration::from_millis(20));
        if cond(&o.snapshot_now()) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
    }
}
