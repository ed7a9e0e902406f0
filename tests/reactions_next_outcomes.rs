//! `next_outcomes` of an issue whose pull request is watched, through the real binary and the
//! fake GitHub forge: each pending reaction that can still see its event yields one pair, in
//! the reference's kind order, whose condition carries the time left in its watch and whose
//! text names the fix run it would dispatch (counted against its budget), the triage command
//! a reaction configured with one runs instead, or, once its fixes are used up, how it
//! escalates.

mod common;

use std::time::Duration;

use common::fake_github::{self, check_run_json};
use common::reactions::{LABELS, PR, ReactionProject, idle, row};

const WAIT: Duration = Duration::from_secs(40);

fn pairs(d: &common::Daemon) -> Vec<(String, String)> {
    let v = d.get("/api/v1/1").json();
    v["next_outcomes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
            (s("condition"), s("text"))
        })
        .collect()
}

fn watched(c: &str, event: &str) -> bool {
    c.starts_with("If a check in the next ") && c.ends_with(&format!(" finds {event}"))
}

#[test]
fn each_watching_reaction_says_what_a_check_that_finds_its_event_does() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_check_runs(
            "sha1",
            vec![check_run_json(11, "Test", "completed", Some("success"))],
        );
        s.set_mergeable(PR, Some(true), "clean");
    });
    let p = ReactionProject::new(
        &fake,
        "  merge_conflicts:\n    provider: github\n    max_retries: 1\n    poll_interval_ms: 500\n    triage: true\n  ci_failure:\n    provider: github\n    max_retries: 0\n    escalation: label\n    escalation_label: needs-human\n  review_comments:\n    provider: github\n    max_continuation_turns: 1\n    debounce_ms: 0\n    escalation: comment\n",
    );
    let d = p.start();
    d.wait_state("three reactions watching", WAIT, |s| {
        idle(s)
            && ["ci", "review", "merge-conflict"]
                .iter()
                .all(|k| row(s, k).is_some_and(|r| !r["last_check"].is_null()))
    });
    let got = pairs(&d);
    assert_eq!(got.len(), 3, "{got:?}");
    let (c, t) = &got[0];
    assert!(watched(c, "a failing CI run on the pull request"), "{c}");
    assert_eq!(
        t,
        "With 0 of 0 used, Sortie escalates to a person with the needs-human label."
    );
    let (c, t) = &got[1];
    assert!(watched(c, "new review comments on the pull request"), "{c}");
    assert_eq!(t, "Sortie dispatches review fix 1 of 1.");
    let (c, t) = &got[2];
    assert!(
        watched(c, "a new merge conflict on the pull request"),
        "{c}"
    );
    assert_eq!(
        t,
        "Sortie runs the reaction's triage command in place of the fix, and its verdict decides."
    );
    // No run or retry pair: the issue waits on its pull request only.
    assert!(
        got.iter().all(|(c, _)| c.starts_with("If a check")),
        "{got:?}"
    );

    // An escalated reaction yields no pair: a failing check spends CI's budget of 0.
    fake.with_state(|s| {
        s.set_check_runs(
            "sha1",
            vec![check_run_json(12, "Test", "completed", Some("failure"))],
        );
        s.set_job_log(12, "error: test_export failed\n");
    });
    d.wait_state("CI escalated", WAIT, |s| {
        row(s, "ci").is_some_and(|r| !r["escalated_at"].is_null())
    });
    let got = pairs(&d);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        watched(&got[0].0, "new review comments on the pull request"),
        "{got:?}"
    );
    assert!(
        watched(&got[1].0, "a new merge conflict on the pull request"),
        "{got:?}"
    );
}
