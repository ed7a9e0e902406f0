//! Agent stream ingest as a ratio to a bare line parse: a fake agent prints a generated
//! stream-json file (usage on every assistant message) through the real pipeline (process
//! supervisor, parser, forwarder, orchestrator, snapshots, state file, run record); the
//! baseline parses the same file line by line into `serde_json::Value`. Checks that the token
//! totals are complete and that the stored events stay within the run's retention limit.
//! Run with `scripts/bench-ingest.sh` (not part of the test suite).

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sortie::clock::{Clock, SystemClock};
use sortie::config::{LoadOptions, load_workflow};
use sortie::orchestrator::snapshot::{published_count, wait_published};
use sortie::orchestrator::state::RUN_EVENTS_MAX;
use sortie::orchestrator::{OrchMsg, Orchestrator, OrchestratorDeps, adapters};
use sortie::prompt::PromptTemplate;
use sortie::store::Store;

const FAKE_AGENT: &str = env!("CARGO_BIN_EXE_fake-agent");
const INPUT_PER_MESSAGE: u64 = 10;
const OUTPUT_PER_MESSAGE: u64 = 5;
const ROUND_DEADLINE: Duration = Duration::from_secs(600);

fn main() {
    let lines: usize = env_or("BENCH_LINES", 100_000);
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let dir = std::env::var_os("BENCH_DIR").map(std::path::PathBuf::from);
    let scenario = std::env::var_os("FAKE_AGENT_SCENARIO").map(std::path::PathBuf::from);
    let (Some(dir), Some(scenario)) = (dir, scenario) else {
        eprintln!("run through scripts/bench-ingest.sh (BENCH_DIR and FAKE_AGENT_SCENARIO)");
        std::process::exit(2);
    };
    let stream = dir.join("stream.jsonl");
    let messages = write_stream(&stream, lines);
    std::fs::write(
        &scenario,
        format!("{}\n", serde_json::json!({"cat_file": stream})),
    )
    .expect("write scenario");

    let mut parse = Vec::new();
    let mut ingest = Vec::new();
    for round in 0..rounds {
        parse.push(bare_parse(&stream, lines));
        ingest.push(ingest_once(&dir.join(format!("round-{round}")), messages));
    }
    let rate = |d: Duration| lines as f64 / d.as_secs_f64();
    parse.sort();
    ingest.sort();
    let (p_best, p_med) = (rate(parse[0]), rate(parse[parse.len() / 2]));
    // Sorted by duration: the slowest ingest is the minimum rate.
    let (i_min, i_med) = (
        rate(ingest[ingest.len() - 1]),
        rate(ingest[ingest.len() / 2]),
    );
    println!("lines: {lines} ({messages} assistant messages with usage)");
    println!("bare parse:  best {p_best:>10.0} lines/s, median {p_med:>10.0} lines/s");
    println!("ingest:      min  {i_min:>10.0} events/s, median {i_med:>10.0} events/s");
    println!(
        "ratio ingest/parse: min {:.3}, median {:.3}",
        i_min / p_med,
        i_med / p_med
    );
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Writes `lines` stream-json lines: an init, assistant messages with usage, a result.
/// Returns how many assistant messages there are.
fn write_stream(path: &Path, lines: usize) -> u64 {
    let sid = "bench-session";
    let mut out = String::new();
    let init = serde_json::json!({"type": "system", "subtype": "init", "session_id": sid});
    out.push_str(&format!("{init}\n"));
    let messages = lines.saturating_sub(2);
    for i in 0..messages {
        let msg = serde_json::json!({"type": "assistant", "session_id": sid, "message": {
            "id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "bench-model",
            "content": [{"type": "text", "text": format!("Working on step {i} of the change.")}],
            "usage": {"input_tokens": INPUT_PER_MESSAGE, "output_tokens": OUTPUT_PER_MESSAGE,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}});
        out.push_str(&format!("{msg}\n"));
    }
    let result = serde_json::json!({"type": "result", "subtype": "success", "is_error": false,
        "result": "Done.", "session_id": sid, "duration_ms": 1, "duration_api_ms": 1, "num_turns": 1});
    out.push_str(&format!("{result}\n"));
    std::fs::write(path, out).expect("write stream");
    messages as u64
}

/// The baseline: read the file and parse each line into a `serde_json::Value`.
fn bare_parse(path: &Path, lines: usize) -> Duration {
    let t = Instant::now();
    let file = std::fs::File::open(path).expect("open stream");
    let mut n = 0;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.expect("read line");
        let v: serde_json::Value = serde_json::from_str(&line).expect("parse line");
        std::hint::black_box(&v);
        n += 1;
    }
    assert_eq!(n, lines);
    t.elapsed()
}

/// One dispatch of one issue through the daemon's pipeline; the time from start until its run
/// is recorded with complete totals.
fn ingest_once(dir: &Path, messages: u64) -> Duration {
    std::fs::create_dir_all(dir).expect("round dir");
    let issues = serde_json::json!([{"id": "1", "identifier": "ING-1", "title": "Ingest",
        "state": "To Do", "priority": 1}]);
    std::fs::write(dir.join("issues.json"), issues.to_string()).expect("issues");
    std::fs::write(
        dir.join("WORKFLOW.md"),
        format!(
            "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n\
             \x20 handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 60000\n\
             workspace:\n  root: {}\nagent:\n  kind: claude-code\n  command: {FAKE_AGENT}\n\
             \x20 env: [FAKE_AGENT_*]\n  max_turns: 1\nclaude-code:\n  permission_mode: acceptEdits\n---\nDo {{{{ .issue.identifier }}}}\n",
            dir.join("ws").display()
        ),
    )
    .expect("workflow");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let opts = LoadOptions::from_process(None);
    let wf = load_workflow(&dir.join("WORKFLOW.md"), &opts).expect("load workflow");
    let template = PromptTemplate::parse(&wf.prompt_template, "WORKFLOW.md", 0).expect("template");
    let db = dir.join("sortie.db");
    let deps = OrchestratorDeps {
        tracker: adapters::build_tracker(&wf, clock.clone()).expect("tracker"),
        agent: adapters::build_agent(&wf, clock.clone()).expect("agent"),
        store: Arc::new(Store::open(&db, clock.clone()).expect("store")),
        workflow: Arc::new(wf),
        template: Arc::new(template),
        load_options: opts,
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        clock,
        prices: Default::default(),
    };
    let t = Instant::now();
    let (o, handle) = Orchestrator::new(deps);
    let orch = std::thread::spawn(move || o.run());
    let deadline = t + ROUND_DEADLINE;
    let mut seen = published_count();
    loop {
        let snap = handle.snapshot();
        if snap.totals.dispatches > 0 && snap.running.is_empty() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "the run did not end within {ROUND_DEADLINE:?}"
        );
        seen = wait_published(seen, left.min(Duration::from_millis(200)));
    }
    let took = t.elapsed();
    let totals = handle.snapshot().totals.clone();
    let _ = handle.tx.send(OrchMsg::Shutdown);
    let _ = orch.join();
    assert_eq!(
        totals.input_tokens,
        messages * INPUT_PER_MESSAGE,
        "input tokens"
    );
    assert_eq!(
        totals.output_tokens,
        messages * OUTPUT_PER_MESSAGE,
        "output tokens"
    );
    let stored = stored_events(&db);
    assert!(
        stored <= RUN_EVENTS_MAX as i64,
        "{stored} events stored, over the {RUN_EVENTS_MAX} limit"
    );
    println!(
        "  round: {:>8.1} ms, tokens complete, {stored} events stored",
        took.as_secs_f64() * 1e3
    );
    took
}

fn stored_events(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).expect("open database");
    conn.query_row("SELECT COUNT(*) FROM agent_events", [], |r| r.get(0))
        .expect("count events")
}
