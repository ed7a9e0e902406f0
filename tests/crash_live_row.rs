//! The live session row in-process with a manual clock (issue 11): token figures reach it
//! batched (at most once per interval through the writer, not once per usage event), and a pid
//! an adapter reports that is not an agent this sortie started never names a process group to
//! stop after a crash.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie::clock::{Clock, ManualClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::{Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;

const START_MS: i64 = 1_800_000_000_000;

fn live_row(dir: &std::path::Path) -> Option<(i64, Option<String>, Option<i64>)> {
    rusqlite::Connection::open(dir.join("sortie.db"))
        .ok()?
        .query_row(
            "SELECT input_tokens, agent_pid, agent_pgid FROM session_metadata
             WHERE dispatch_id IS NOT NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .ok()
}

#[test]
fn figures_reach_the_live_row_batched_and_a_foreign_pid_is_never_recorded_as_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(
        dir.join("issues.json"),
        r#"[{"id": "1", "identifier": "L-1", "title": "Live", "state": "To Do"}]"#,
    )
    .unwrap();
    // The mock reports this test's own pid: a real process, but not an agent sortie started.
    let me = std::process::id();
    std::fs::write(
        dir.join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 1000\nworkspace:\n  root: {}\n\
             agent:\n  kind: mock\n  max_turns: 1\nmock:\n  agent_pid: {me}\n  turn_delay_ms: 600000\n\
             ---\nDo {{{{ .issue.identifier }}}}\n",
            dir.join("ws").display(),
        ),
    )
    .unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.join("WORKFLOW.md"), &opts).unwrap();
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).unwrap();
    let store = Arc::new(Store::open(&dir.join("sortie.db"), dyn_clock.clone()).unwrap());
    let deps = OrchestratorDeps {
        tracker: adapters::build_tracker(&wf, dyn_clock.clone()).unwrap(),
        agent: adapters::build_agent(&wf, dyn_clock.clone()).unwrap(),
        store: store.clone(),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock: dyn_clock,
    };
    let (mut o, _handle) = Orchestrator::new(deps);

    // The session's usage event has been handled in memory...
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        o.step(Duration::from_millis(20));
        let snap = o.snapshot_now();
        if snap
            .running
            .first()
            .is_some_and(|r| r.tokens.input_tokens == 100 && r.agent_pid == Some(me))
        {
            break;
        }
        assert!(Instant::now() < deadline, "no usage on the running session");
    }
    // ...but within the interval the row still holds the figures of the session's start.
    store.writer().flush().unwrap();
    let (tokens, pid, pgid) = live_row(dir).expect("the live row exists from dispatch");
    assert_eq!(tokens, 0, "a write per usage event");
    assert_eq!(pid, Some(me.to_string()));
    assert_eq!(pgid, None, "a foreign pid was recorded as a group to stop");

    // Once the interval has passed, the timer path writes them.
    clock.advance(Duration::from_millis(1_000));
    o.step(Duration::from_millis(1));
    store.writer().flush().unwrap();
    assert_eq!(live_row(dir).map(|r| r.0), Some(100));
}
