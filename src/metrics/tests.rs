use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::domain::RunStatus;

/// The value of the sample whose line starts with `series` (name plus labels), if present.
pub(crate) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

fn seed() -> AggregateTotals {
    AggregateTotals {
        input_tokens: 1000,
        output_tokens: 200,
        total_tokens: 1200,
        cache_read_tokens: 50,
        cache_write_tokens: 7,
        dispatches: 9,
        seconds_running: 123.5,
        unmeasured_sessions: 2,
        estimated_cost_usd: 0.25,
        exits: BTreeMap::from([
            ("succeeded".to_string(), 5),
            ("failed".to_string(), 3),
            ("budget_stopped".to_string(), 1),
        ]),
        updated_at_ms: 0,
    }
}

#[test]
fn restart_counters_start_from_the_aggregate_row() {
    let m = Metrics::new(&seed());
    let text = m.render(&GaugeValues::default());
    assert_eq!(
        sample(&text, "sortie_tokens_total{type=\"input\"}"),
        Some(1000.0)
    );
    assert_eq!(
        sample(&text, "sortie_tokens_total{type=\"output\"}"),
        Some(200.0)
    );
    assert_eq!(
        sample(&text, "sortie_tokens_total{type=\"cache_read\"}"),
        Some(50.0)
    );
    assert_eq!(
        sample(&text, "sortie_tokens_total{type=\"cache_write\"}"),
        Some(7.0)
    );
    assert_eq!(
        sample(&text, "sortie_dispatches_total{outcome=\"success\"}"),
        Some(9.0)
    );
    assert_eq!(
        sample(&text, "sortie_dispatches_total{outcome=\"error\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "sortie_agent_runtime_seconds_total"),
        Some(123.5)
    );
    assert_eq!(sample(&text, "sortie_unmeasured_sessions_total"), Some(2.0));
    assert_eq!(sample(&text, "sortie_estimated_cost_usd_total"), Some(0.25));
    assert_eq!(
        sample(&text, "sortie_worker_exits_total{exit_type=\"normal\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(&text, "sortie_worker_exits_total{exit_type=\"error\"}"),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "sortie_worker_exits_total{exit_type=\"cancelled\"}"),
        Some(1.0)
    );
}

#[test]
fn recording_methods_move_their_series() {
    let m = Metrics::new(&AggregateTotals::default());
    m.dispatch("success");
    m.dispatch("error");
    m.worker_exit(RunStatus::Succeeded, 30.0);
    m.worker_exit(RunStatus::Failed, 5.0);
    m.unmeasured_session();
    m.token_usage(&TokenUsage::new(100, 20, 10, 1));
    m.poll(0.3, "success");
    m.poll(0.05, "skipped");
    m.retry("continuation");
    m.retry("ISSUE-1");
    m.reconciliation("stop");
    m.tracker_request("fetch_candidates", "success");
    m.handoff("success");
    m.dispatch_transition("skipped");
    m.tracker_comment("dispatch", "error");
    m.tool_call("Bash", "success");
    m.ci_status_check("failing");
    m.ci_escalation("label");
    m.review_check("dispatched");
    m.review_escalation("comment");
    m.self_review_iteration("iterate");
    m.self_review_session("pass");
    m.self_review_cap_reached();
    m.self_review_verification("cargo test --all-targets", 12.0);
    m.events_shed(7);
    let t = m.render(&GaugeValues::default());
    let checks = [
        ("sortie_dispatches_total{outcome=\"success\"}", 1.0),
        ("sortie_dispatches_total{outcome=\"error\"}", 1.0),
        ("sortie_worker_exits_total{exit_type=\"normal\"}", 1.0),
        ("sortie_worker_exits_total{exit_type=\"error\"}", 1.0),
        ("sortie_agent_runtime_seconds_total", 35.0),
        ("sortie_unmeasured_sessions_total", 1.0),
        ("sortie_agent_events_shed_total", 7.0),
        ("sortie_tokens_total{type=\"input\"}", 100.0),
        ("sortie_tokens_total{type=\"cache_write\"}", 1.0),
        ("sortie_poll_cycles_total{result=\"success\"}", 1.0),
        ("sortie_poll_cycles_total{result=\"skipped\"}", 1.0),
        ("sortie_poll_duration_seconds_count", 2.0),
        ("sortie_poll_duration_seconds_bucket{le=\"0.1\"}", 1.0),
        ("sortie_poll_duration_seconds_bucket{le=\"0.4\"}", 2.0),
        ("sortie_retries_total{trigger=\"continuation\"}", 1.0),
        ("sortie_retries_total{trigger=\"other\"}", 1.0),
        ("sortie_reconciliation_actions_total{action=\"stop\"}", 1.0),
        (
            "sortie_tracker_requests_total{operation=\"fetch_candidates\",result=\"success\"}",
            1.0,
        ),
        ("sortie_handoff_transitions_total{result=\"success\"}", 1.0),
        ("sortie_dispatch_transitions_total{result=\"skipped\"}", 1.0),
        (
            "sortie_tracker_comments_total{lifecycle=\"dispatch\",result=\"error\"}",
            1.0,
        ),
        (
            "sortie_tool_calls_total{result=\"success\",tool=\"Bash\"}",
            1.0,
        ),
        ("sortie_ci_status_checks_total{result=\"failing\"}", 1.0),
        ("sortie_ci_escalations_total{action=\"label\"}", 1.0),
        ("sortie_review_checks_total{result=\"dispatched\"}", 1.0),
        ("sortie_review_escalations_total{action=\"comment\"}", 1.0),
        (
            "sortie_self_review_iterations_total{verdict=\"iterate\"}",
            1.0,
        ),
        (
            "sortie_self_review_sessions_total{final_verdict=\"pass\"}",
            1.0,
        ),
        ("sortie_self_review_cap_reached_total", 1.0),
        (
            "sortie_worker_duration_seconds_bucket{exit_type=\"normal\",le=\"40\"}",
            1.0,
        ),
        (
            "sortie_worker_duration_seconds_sum{exit_type=\"error\"}",
            5.0,
        ),
        (
            "sortie_self_review_verification_duration_seconds_count{command=\"cargo test --all-targets\"}",
            1.0,
        ),
    ];
    for (series, want) in checks {
        assert_eq!(sample(&t, series), Some(want), "{series} in\n{t}");
    }
}

#[test]
fn gauges_are_set_at_scrape_time() {
    let m = Metrics::new(&AggregateTotals::default());
    let g = GaugeValues {
        running: 2,
        retrying: 1,
        max_concurrent_agents: 3,
        elapsed_seconds: 15.0,
        ssh_host_usage: vec![("build1".into(), 2), ("ci@build2:2222".into(), 0)],
    };
    let t = m.render(&g);
    assert!(
        t.contains("sortie_ssh_host_usage{host=\"build1\"} 2"),
        "{t}"
    );
    assert!(
        t.contains("sortie_ssh_host_usage{host=\"ci@build2:2222\"} 0"),
        "{t}"
    );
    assert_eq!(sample(&t, "sortie_sessions_running"), Some(2.0));
    assert_eq!(sample(&t, "sortie_sessions_retrying"), Some(1.0));
    assert_eq!(sample(&t, "sortie_slots_available"), Some(1.0));
    assert_eq!(
        sample(&t, "sortie_active_sessions_elapsed_seconds"),
        Some(15.0)
    );
    // Over-subscribed (limit lowered while sessions run): never negative.
    let t = m.render(&GaugeValues {
        max_concurrent_agents: 1,
        ssh_host_usage: vec![("ci@build2:2222".into(), 1)],
        ..g
    });
    assert_eq!(sample(&t, "sortie_slots_available"), Some(0.0));
    // A host that left the configuration reads 0 once its sessions ended.
    assert!(
        t.contains("sortie_ssh_host_usage{host=\"build1\"} 0"),
        "{t}"
    );
    assert!(
        t.contains("sortie_ssh_host_usage{host=\"ci@build2:2222\"} 1"),
        "{t}"
    );
    assert!(t.contains("sortie_build_info{go_version=\"rust"));
    // No sessions reads as idle.
    let m = Metrics::new(&AggregateTotals::default());
    let t = m.render(&GaugeValues::default());
    assert_eq!(sample(&t, "sortie_sessions_running"), Some(0.0));
    assert_eq!(
        sample(&t, "sortie_active_sessions_elapsed_seconds"),
        Some(0.0)
    );
}

#[test]
fn elapsed_sums_running_time_and_ignores_future_starts() {
    let clock = ManualClock::new(1_000_000);
    let starts = [990_000, 995_000, 1_005_000];
    assert_eq!(elapsed_seconds(starts.into_iter(), clock.now_ms()), 15.0);
    clock.advance(Duration::from_secs(10));
    assert_eq!(elapsed_seconds(starts.into_iter(), clock.now_ms()), 40.0);
}

#[test]
fn no_label_carries_an_issue_identifier() {
    let m = Metrics::new(&AggregateTotals::default());
    for i in 0..500 {
        let name = format!("MT-{i}");
        m.retry(&name);
        m.reconciliation(&name);
        m.tool_call(&name, &name);
        m.self_review_verification(&name, 1.0);
    }
    let t = m.render(&GaugeValues::default());
    let mt = t.lines().filter(|l| l.contains("MT-")).count();
    // Free-form labels keep at most their capped set; fixed labels none.
    assert!(mt <= 2 * catalogue::FREE_LABEL_CAP + 20 * catalogue::FREE_LABEL_CAP);
    assert!(
        !t.lines()
            .any(|l| l.starts_with("sortie_retries_total") && l.contains("MT-"))
    );
    let series = t.lines().filter(|l| !l.starts_with('#')).count();
    assert!(series < 2_500, "{series} series");
}

#[test]
fn every_catalogue_family_has_help_and_type() {
    let m = Metrics::new(&AggregateTotals::default());
    m.worker_exit(RunStatus::Succeeded, 1.0);
    m.tool_call("Read", "success");
    m.dispatch_rule_match("specify");
    m.self_review_session("pass");
    m.self_review_verification("make", 1.0);
    let t = m.render(&GaugeValues::default());
    for (name, kind) in [
        ("sortie_sessions_running", "gauge"),
        ("sortie_sessions_retrying", "gauge"),
        ("sortie_slots_available", "gauge"),
        ("sortie_active_sessions_elapsed_seconds", "gauge"),
        ("sortie_build_info", "gauge"),
        ("sortie_tokens_total", "counter"),
        ("sortie_agent_runtime_seconds_total", "counter"),
        ("sortie_estimated_cost_usd_total", "counter"),
        ("sortie_dispatches_total", "counter"),
        ("sortie_worker_exits_total", "counter"),
        ("sortie_retries_total", "counter"),
        ("sortie_reconciliation_actions_total", "counter"),
        ("sortie_poll_cycles_total", "counter"),
        ("sortie_tracker_requests_total", "counter"),
        ("sortie_candidate_holds_total", "counter"),
        ("sortie_dispatch_rule_match_total", "counter"),
        ("sortie_handoff_transitions_total", "counter"),
        ("sortie_dispatch_transitions_total", "counter"),
        ("sortie_tracker_comments_total", "counter"),
        ("sortie_tool_calls_total", "counter"),
        ("sortie_ci_status_checks_total", "counter"),
        ("sortie_ci_escalations_total", "counter"),
        ("sortie_review_checks_total", "counter"),
        ("sortie_review_escalations_total", "counter"),
        ("sortie_self_review_iterations_total", "counter"),
        ("sortie_self_review_sessions_total", "counter"),
        ("sortie_self_review_cap_reached_total", "counter"),
        ("sortie_webhook_deliveries_total", "counter"),
        ("sortie_webhook_body_bytes", "gauge"),
        ("sortie_http_connections_refused_total", "counter"),
        ("sortie_sandbox_denied_connections_total", "counter"),
        ("sortie_poll_duration_seconds", "histogram"),
        ("sortie_worker_duration_seconds", "histogram"),
        (
            "sortie_self_review_verification_duration_seconds",
            "histogram",
        ),
    ] {
        assert!(
            t.contains(&format!("# TYPE {name} {kind}\n")),
            "{name}\n{t}"
        );
        assert!(t.contains(&format!("# HELP {name} ")), "{name}");
    }
}
