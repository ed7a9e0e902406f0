//! `POST /api/v1/refresh` coalescing through the real binary: refreshes that arrive while a
//! tick is busy join one pending poll instead of queueing one each.

mod common;

use std::time::{Duration, Instant};

use common::Project;
use serde_json::json;

fn refresh(port: u16) -> serde_json::Value {
    let body = ureq::post(&format!("http://127.0.0.1:{port}/api/v1/refresh"))
        .send_empty()
        .expect("refresh")
        .into_body()
        .read_to_string()
        .expect("body");
    serde_json::from_str(&body).expect("json")
}

#[test]
fn refreshes_during_a_busy_tick_coalesce_into_one_pending_poll() {
    let p = Project::new();
    // A large backlog that is not active: every tick parses all of it (slow), dispatches none.
    let issues: Vec<serde_json::Value> = (0..40_000)
        .map(|i| {
            json!({"id": i.to_string(), "identifier": format!("BIG-{i}"),
                   "title": "x".repeat(80), "state": "Backlog",
                   "description": "y".repeat(200)})
        })
        .collect();
    p.issues(json!(issues));
    p.fake_agent_workflow("", "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace("interval_ms: 200", "interval_ms: 600000"),
    );
    let d = p.start();
    d.wait_state("the first poll", Duration::from_secs(60), |s| {
        s["health"]["poll"]["outcome"] == "succeeded"
    });

    // The first refresh starts a tick; the next two arrive while it runs.
    let started = Instant::now();
    let first = refresh(p.port());
    assert_eq!(first["coalesced"], false, "{first}");
    let (second, third) = std::thread::scope(|s| {
        let a = s.spawn(|| refresh(p.port()));
        let b = s.spawn(|| refresh(p.port()));
        (a.join().unwrap(), b.join().unwrap())
    });
    let took = started.elapsed();
    // Neither waited behind the busy tick (its reads run off the orchestrator thread). A
    // refresh that finds one pending joins it: the first's (still waiting for the poll floor)
    // or the one the second queued behind the busy poll, so at least one of them coalesced
    // and at most one more poll is pending.
    let coalesced: Vec<bool> = [&second, &third]
        .iter()
        .map(|r| r["coalesced"].as_bool().unwrap())
        .collect();
    assert!(
        coalesced.iter().filter(|c| **c).count() >= 1,
        "{second} {third} (took {took:?})"
    );
    for r in [&second, &third] {
        assert_eq!(r["operations"], json!(["poll", "reconcile"]));
    }
}
