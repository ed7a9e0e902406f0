//! A poll tick that holds the same issues for the same reasons publishes the previous
//! snapshot's `held` list instead of copying every held issue again; a change in the tracker
//! file gives a new list with the change.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sortie::clock::{Clock, ManualClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::{Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;

fn write_issues(dir: &Path, third_title: &str) {
    let issues: Vec<_> = (1..=3)
        .map(|i| {
            json!({
                "id": i.to_string(), "identifier": format!("H-{i}"),
                "title": if i == 3 { third_title.to_string() } else { format!("Issue {i}") },
                "state": "To Do", "priority": i
            })
        })
        .collect();
    std::fs::write(
        dir.join("issues.json"),
        serde_json::to_vec(&issues).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("write issues: {e}"));
}

fn orchestrator(dir: &Path) -> (Orchestrator, Arc<ManualClock>) {
    std::fs::write(
        dir.join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 1000\nworkspace:\n  root: {}\n\
             agent:\n  kind: mock\n  max_turns: 1\n  max_concurrent_agents: 1\n\
             mock:\n  turn_delay_ms: 3600000\n---\nDo {{{{ .issue.identifier }}}}\n",
            dir.join("ws").display()
        ),
    )
    .unwrap_or_else(|e| panic!("write workflow: {e}"));
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.join("WORKFLOW.md"), &opts).unwrap_or_else(|e| panic!("{e}"));
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0)
        .unwrap_or_else(|e| panic!("{e}"));
    let deps = OrchestratorDeps {
        tracker: adapters::build_tracker(&wf, dyn_clock.clone()).unwrap_or_else(|e| panic!("{e}")),
        agent: adapters::build_agent(&wf, dyn_clock.clone()).unwrap_or_else(|e| panic!("{e}")),
        store: Arc::new(
            Store::open(&dir.join("sortie.db"), dyn_clock.clone())
                .unwrap_or_else(|e| panic!("{e}")),
        ),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock: dyn_clock,
        prices: Default::default(),
    };
    let (o, _handle) = Orchestrator::new(deps);
    (o, clock)
}

fn tick(
    o: &mut Orchestrator,
    clock: &ManualClock,
) -> Arc<sortie::orchestrator::snapshot::Snapshot> {
    clock.advance(Duration::from_millis(1_000));
    o.step(Duration::ZERO);
    o.snapshot_now()
}

#[test]
fn an_unchanged_pass_shares_the_held_list_and_a_change_replaces_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write_issues(dir.path(), "Third");
    let (mut o, clock) = orchestrator(dir.path());
    o.step(Duration::ZERO);
    let first = tick(&mut o, &clock);
    assert_eq!(first.running.len(), 1, "one slot: one issue runs");
    let held: Vec<&str> = first
        .held
        .iter()
        .map(|h| h.issue.identifier.as_str())
        .collect();
    assert_eq!(held, ["H-2", "H-3"]);

    let second = tick(&mut o, &clock);
    assert!(
        Arc::ptr_eq(&first.held, &second.held),
        "the same holds must share the published list"
    );

    write_issues(dir.path(), "Third, retitled");
    let third = tick(&mut o, &clock);
    assert!(!Arc::ptr_eq(&second.held, &third.held));
    let titles: Vec<&str> = third.held.iter().map(|h| h.issue.title.as_str()).collect();
    assert_eq!(titles, ["Issue 2", "Third, retitled"]);
    assert_eq!(
        third.held[1].since_ms, second.held[1].since_ms,
        "a hold whose issue changed keeps the time it began"
    );
}
