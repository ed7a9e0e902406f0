//! The exposition passes `promtool check metrics` (Debian `prometheus`; `.ci/run` installs it),
//! and restart-surviving counters never go backwards across a restart of a real store.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

mod common;

use common::promtool::promtool_check;
use sortie::agent::TokenUsage;
use sortie::clock::{Clock, SystemClock};
use sortie::domain::RunStatus;
use sortie::metrics::{CONTENT_TYPE, GaugeValues, Metrics};
use sortie::store::{AggregateTotals, ReadConn, RunRecord, Store};

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// A scrape as it looks while agents run: every family touched, odd label values included.
fn busy_scrape(seed: &AggregateTotals) -> String {
    let m = Metrics::new(seed);
    m.dispatch("success");
    m.token_usage(&TokenUsage::new(1200, 300, 800, 40));
    m.worker_exit(RunStatus::Cancelled, 61.5);
    m.poll(0.2, "success");
    m.retry("stall");
    m.reconciliation("keep");
    m.tracker_request("transition", "error");
    m.handoff("skipped");
    m.dispatch_transition("success");
    m.tracker_comment("completion", "success");
    m.tool_call("mcp__server \"quoted\" \\ back\nslash", "success");
    m.ci_status_check("pending");
    m.self_review_iteration("pass");
    m.self_review_session("pass");
    m.self_review_verification("cargo test \"--all\"", 90.0);
    m.events_shed(12);
    m.render(&GaugeValues {
        running: 2,
        retrying: 1,
        max_concurrent_agents: 4,
        elapsed_seconds: 84.0,
        ssh_host_usage: vec![("build1".into(), 1)],
    })
}

fn promtool_available() -> bool {
    Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn content_type_is_text_format_0_0_4() {
    assert!(CONTENT_TYPE.starts_with("text/plain; version=0.0.4"));
}

#[test]
fn scrape_while_agents_run_passes_promtool() {
    let text = busy_scrape(&AggregateTotals::default());
    assert_eq!(sample(&text, "sortie_sessions_running"), Some(2.0));
    if !promtool_available() {
        // Written past the harness's capture so the skip shows in a passing run.
        let _ = writeln!(
            std::io::stderr(),
            "SKIP promtool check: promtool not installed (apt-get install prometheus)"
        );
        return;
    }
    let (ok, msg) = promtool_check(&text).unwrap_or((false, "promtool did not run".into()));
    assert!(ok, "promtool check metrics failed:\n{msg}\n---\n{text}");
}

fn run(issue_id: &str, status: RunStatus, tokens: i64, measured: bool) -> RunRecord {
    RunRecord {
        issue_id: issue_id.into(),
        identifier: issue_id.into(),
        started_at_ms: 1_000,
        completed_at_ms: 31_000,
        input_tokens: tokens,
        output_tokens: tokens / 4,
        total_tokens: tokens + tokens / 4,
        cache_read_tokens: tokens / 2,
        cache_write_tokens: 3,
        tokens_measured: measured,
        dispatch_id: Some(format!("D{issue_id}{status}")),
        ..RunRecord::new(status)
    }
}

#[test]
fn counters_after_a_restart_are_at_least_their_value_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("sortie.db");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let kept = [
        "sortie_tokens_total{type=\"input\"}",
        "sortie_tokens_total{type=\"output\"}",
        "sortie_tokens_total{type=\"cache_read\"}",
        "sortie_tokens_total{type=\"cache_write\"}",
        "sortie_dispatches_total{outcome=\"success\"}",
        "sortie_worker_exits_total{exit_type=\"normal\"}",
        "sortie_worker_exits_total{exit_type=\"error\"}",
        "sortie_worker_exits_total{exit_type=\"cancelled\"}",
        "sortie_agent_runtime_seconds_total",
        "sortie_unmeasured_sessions_total",
    ];
    let mut before_restart: Option<String> = None;
    for life in 0..3 {
        let store = Store::open(&db, clock.clone()).expect("open store");
        let seed = ReadConn::open(&db)
            .and_then(|r| r.aggregate_totals())
            .expect("aggregates");
        let m = Metrics::new(&seed);
        let after_start = m.render(&GaugeValues::default());
        if let Some(before) = &before_restart {
            for series in kept {
                let (b, a) = (sample(before, series), sample(&after_start, series));
                assert!(
                    a.unwrap_or(0.0) >= b.unwrap_or(0.0) && a.is_some(),
                    "life {life}: {series} went from {b:?} to {a:?}"
                );
            }
        }
        // This life's work, recorded the way the orchestrator does: live deltas to the
        // metrics, the finished run to the store.
        for (n, (status, measured)) in [
            (RunStatus::Succeeded, true),
            (RunStatus::Failed, false),
            (RunStatus::Cancelled, true),
        ]
        .into_iter()
        .enumerate()
        {
            let r = run(&format!("I{life}{n}"), status, 1000, measured);
            m.dispatch("success");
            if measured {
                m.token_usage(&TokenUsage::new(
                    r.input_tokens as u64,
                    r.output_tokens as u64,
                    r.cache_read_tokens as u64,
                    r.cache_write_tokens as u64,
                ));
            } else {
                m.unmeasured_session();
            }
            m.worker_exit(status, 30.0);
            store.writer().record_run(r, vec![]).expect("record run");
        }
        before_restart = Some(m.render(&GaugeValues::default()));
        store.close().expect("close");
    }
    let last = before_restart.unwrap_or_default();
    assert_eq!(
        sample(&last, "sortie_dispatches_total{outcome=\"success\"}"),
        Some(9.0)
    );
    assert_eq!(sample(&last, "sortie_unmeasured_sessions_total"), Some(3.0));
    assert_eq!(
        sample(&last, "sortie_agent_runtime_seconds_total"),
        Some(270.0)
    );
    if promtool_available() {
        let (ok, msg) = promtool_check(&last).unwrap_or((false, "promtool did not run".into()));
        assert!(ok, "promtool after restart:\n{msg}");
    }
}
