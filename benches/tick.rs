//! Tick cost over a large file-tracker backlog, as a ratio to merely parsing the issues file.
//! Run with `scripts/bench-tick.sh` (not part of the test suite).

use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie::clock::{Clock, ManualClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::{Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::var("BENCH_ISSUES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let rounds = 15;
    let dir = tempfile::tempdir().expect("tempdir");
    let issues: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": i.to_string(), "identifier": format!("B-{i}"),
                "title": format!("Issue number {i} with a realistic title"),
                "description": "Some description text that an issue would carry. ".repeat(4),
                "state": "To Do", "priority": (i % 5) as i64,
                "labels": ["backend", "bug"], "created_at": format!("2026-01-{:02}T00:00:00Z", i % 28 + 1),
                "blocked_by": if i % 10 == 0 { serde_json::json!([{"id": "x", "identifier": "X-1", "state": "Done"}]) } else { serde_json::json!([]) }
            })
        })
        .collect();
    std::fs::write(
        dir.path().join("issues.json"),
        serde_json::to_vec(&issues).expect("json"),
    )
    .expect("write issues");
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 1000\nworkspace:\n  root: {}\n\
             agent:\n  kind: mock\n  max_turns: 1\n  max_sessions: 5\n  max_concurrent_agents: 1\n\
             mock:\n  turn_delay_ms: 3600000\n---\nDo {{{{ .issue.identifier }}}}\n",
            dir.path().join("ws").display()
        ),
    )
    .expect("write workflow");

    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.path().join("WORKFLOW.md"), &opts).expect("workflow");
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).expect("template");
    let tracker = adapters::build_tracker(&wf, dyn_clock.clone()).expect("tracker");

    // Baseline: parsing the file (one candidate fetch).
    let mut parse = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let c = tracker.fetch_candidate_issues().expect("fetch");
        assert_eq!(c.len(), n);
        parse.push(t.elapsed());
    }

    let deps = OrchestratorDeps {
        tracker,
        agent: adapters::build_agent(&wf, dyn_clock.clone()).expect("agent"),
        store: Arc::new(
            Store::open(&dir.path().join("sortie.db"), dyn_clock.clone()).expect("store"),
        ),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock: dyn_clock,
    };
    let (mut o, _h) = Orchestrator::new(deps);
    o.step(Duration::ZERO); // first tick: dispatches one issue
    let mut ticks = Vec::new();
    for _ in 0..rounds {
        clock.advance(Duration::from_millis(1000));
        let t = Instant::now();
        o.step(Duration::ZERO);
        ticks.push(t.elapsed());
    }
    let (p, t) = (median(parse), median(ticks));
    println!("issues: {n}");
    println!(
        "parse (fetch candidates) median: {:.2} ms",
        p.as_secs_f64() * 1e3
    );
    println!(
        "tick median:                     {:.2} ms",
        t.as_secs_f64() * 1e3
    );
    println!(
        "ratio tick/parse:                {:.2}",
        t.as_secs_f64() / p.as_secs_f64()
    );
}
