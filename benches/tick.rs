//! Poll-tick cost over a large file-tracker backlog, as a ratio to a bare
//! `serde_json::from_slice::<serde_json::Value>` of the same file measured in the same run, for
//! a backlog without blockers and one whose issues are blocked by other issues of the file.
//! Run with `scripts/bench-tick.sh` (not part of the test suite).
//!
//! Two ticks are timed: right after the file changed (one issue's title toggles between two
//! values, so the tick must read and parse the file again) and with the file unchanged for
//! longer than the tracker's racy-timestamp window (the parsed file is reused).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sortie::clock::{Clock, ManualClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::{Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;

/// Timed rounds per measure within one repetition.
const ROUNDS: usize = 11;
/// Repetitions; the ratios are reported as min and median over them.
const REPEATS: usize = 3;
/// Longer than the tracker's racy-timestamp window, so an unchanged file is trusted.
const SETTLE: Duration = Duration::from_millis(2_200);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The backlog: `n` issues in `To Do`; with `blockers`, each is blocked by two other issues of
/// the file (one referenced by id, one by identifier). `title` is the last issue's title.
fn backlog(n: usize, blockers: bool, title: &str) -> Vec<u8> {
    let issues: Vec<Value> = (0..n)
        .map(|i| {
            let blocked_by = if blockers {
                json!([{"id": ((i + 1) % n).to_string()},
                       {"identifier": format!("B-{}", (i + 7) % n), "state": "To Do"}])
            } else {
                json!([])
            };
            json!({
                "id": i.to_string(), "identifier": format!("B-{i}"),
                "title": if i + 1 == n { title.to_string() } else { format!("Issue number {i} with a realistic title") },
                "description": "Some description text that an issue would carry. ".repeat(4),
                "state": "To Do", "priority": (i % 5) as i64,
                "labels": ["backend", "bug"], "created_at": format!("2026-01-{:02}T00:00:00Z", i % 28 + 1),
                "blocked_by": blocked_by
            })
        })
        .collect();
    serde_json::to_vec(&issues).expect("json")
}

fn write_workflow(dir: &Path) {
    std::fs::write(
        dir.join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             file:\n  path: ./issues.json\npolling:\n  interval_ms: 1000\nworkspace:\n  root: {}\n\
             agent:\n  kind: mock\n  max_turns: 1\n  max_sessions: 5\n  max_concurrent_agents: 1\n\
             mock:\n  turn_delay_ms: 3600000\n---\nDo {{{{ .issue.identifier }}}}\n",
            dir.join("ws").display()
        ),
    )
    .expect("write workflow");
}

/// An orchestrator over the backlog in `dir` with a manual clock, after its first tick (which
/// dispatches one issue, so reconciliation has a running issue to read).
fn orchestrator(dir: &Path) -> (Orchestrator, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.join("WORKFLOW.md"), &opts).expect("workflow");
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).expect("template");
    let deps = OrchestratorDeps {
        tracker: adapters::build_tracker(&wf, dyn_clock.clone()).expect("tracker"),
        agent: adapters::build_agent(&wf, dyn_clock.clone()).expect("agent"),
        store: Arc::new(Store::open(&dir.join("sortie.db"), dyn_clock.clone()).expect("store")),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock: dyn_clock,
        prices: Default::default(),
    };
    let (mut o, _handle) = Orchestrator::new(deps);
    o.step(Duration::ZERO);
    (o, clock)
}

/// One timed tick: the manual clock makes the tick due, the step runs it.
fn timed_tick(o: &mut Orchestrator, clock: &ManualClock) -> f64 {
    clock.advance(Duration::from_millis(1000));
    let t = Instant::now();
    o.step(Duration::ZERO);
    ms(t.elapsed())
}

/// Median milliseconds of the bare parse, the tick after a change and the unchanged tick.
fn repetition(
    o: &mut Orchestrator,
    clock: &ManualClock,
    path: &Path,
    versions: &[Vec<u8>; 2],
    written: &mut usize,
) -> (f64, f64, f64) {
    let parse: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            let v: Value = serde_json::from_slice(&versions[0]).expect("parse");
            std::hint::black_box(v);
            ms(t.elapsed())
        })
        .collect();
    let changed: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            *written = 1 - *written;
            std::fs::write(path, &versions[*written]).expect("rewrite");
            timed_tick(o, clock)
        })
        .collect();
    std::thread::sleep(SETTLE);
    timed_tick(o, clock); // the first read after the window makes the parse trusted
    let unchanged: Vec<f64> = (0..ROUNDS).map(|_| timed_tick(o, clock)).collect();
    (median(parse), median(changed), median(unchanged))
}

fn case(n: usize, blockers: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("issues.json");
    let versions = [
        backlog(n, blockers, "Title A"),
        backlog(n, blockers, "Title B"),
    ];
    std::fs::write(&path, &versions[0]).expect("write issues");
    write_workflow(dir.path());
    let (mut o, clock) = orchestrator(dir.path());
    let label = if blockers {
        "with blockers (2 per issue, in the same file)"
    } else {
        "without blockers"
    };
    println!("== {n} issues {label}, file {} bytes", versions[0].len());
    let mut ratios = (Vec::new(), Vec::new());
    let mut written = 0;
    for rep in 1..=REPEATS {
        let (parse, changed, unchanged) =
            repetition(&mut o, &clock, &path, &versions, &mut written);
        println!(
            "run {rep}: bare parse {parse:.2} ms | tick after a change {changed:.2} ms (ratio {:.2}) | tick, file unchanged {unchanged:.2} ms (ratio {:.2})",
            changed / parse,
            unchanged / parse
        );
        ratios.0.push(changed / parse);
        ratios.1.push(unchanged / parse);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "ratio tick/bare parse after a change: min {:.2} median {:.2} (target <= 1.5)",
        min(&ratios.0),
        median(ratios.0.clone())
    );
    println!(
        "ratio tick/bare parse, file unchanged: min {:.2} median {:.2}",
        min(&ratios.1),
        median(ratios.1.clone())
    );
}

fn main() {
    let n: usize = std::env::var("BENCH_ISSUES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    case(n, false);
    case(n, true);
}
