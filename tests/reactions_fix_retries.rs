//! A reaction's fix run through the real binary, the fake GitHub forge and the fake agent,
//! when it cannot simply run: a fix run that fails is retried as the same reaction (its kind,
//! its pull request and the failing checks in its prompt), so it runs again while the issue
//! waits in the handoff state; a fix a spent session budget keeps from starting stays in
//! `budget_exhausted[]` tick after tick, and still counts as the reaction's continuation.

mod common;

use std::time::Duration;

use serde_json::{Value, json};

use common::fake_github::{self, FakeGithub, check_run_json};
use common::reactions::{self, LABELS, PR, ReactionProject};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str =
    "  ci_failure:\n    provider: github\n    max_retries: 2\n    escalation: none\n";

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", sha);
        s.set_check_runs(
            sha,
            vec![check_run_json(11, "Test", "completed", Some("failure"))],
        );
    });
}

/// A GitHub reaction project whose workflow gets `agent_extra` under `agent:`.
fn project(fake: &FakeGithub, agent_extra: &str) -> ReactionProject {
    let forge = reactions::Forge {
        kind: "github",
        url: &fake.url,
        token: fake_github::TOKEN,
        project: "owner/repo",
        owner: "owner",
        repo: "repo",
    };
    let wf = reactions::workflow(&forge, REACTIONS).replace(
        "  max_turns: 1\n",
        &format!("  max_turns: 1\n{agent_extra}"),
    );
    ReactionProject::with_workflow(
        &wf,
        &forge,
        vec![(reactions::token_env(&forge), fake_github::TOKEN.to_string())],
    )
}

#[test]
fn a_failed_fix_run_is_retried_as_the_same_reaction() {
    let fake = fake_github::start(LABELS);
    failing(&fake, "sha1");
    let p = project(&fake, "  max_retry_backoff_ms: 200\n");
    // The second invocation, the CI fix, fails after recording its head.
    let scenario = p.setup.path().join("scenario.jsonl");
    let text = std::fs::read_to_string(&scenario).unwrap_or_else(|e| panic!("{e}"));
    let failing_fix = json!({"exit": 1, "turn": 2}).to_string();
    let text = text.replacen(
        &json!({"init": {}}).to_string(),
        &format!("{failing_fix}\n{}", json!({"init": {}})),
        1,
    );
    std::fs::write(&scenario, text).unwrap_or_else(|e| panic!("{e}"));
    let d = p.start();

    d.wait_until("the fix run retried", WAIT, || p.prompts().len() >= 3);
    let retried = &p.prompts()[2];
    assert!(retried.contains("CI FAILING on sha1"), "{retried}");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let failed: Vec<&Value> = runs["runs"]
        .as_array()
        .map(|r| r.iter().filter(|x| x["status"] == "failed").collect())
        .unwrap_or_default();
    assert_eq!(failed.len(), 1, "{runs}");
    assert_eq!(failed[0]["reaction_kind"], "ci", "{runs}");
    d.wait_until("the retried fix recorded", WAIT, || {
        let runs = d.get("/api/v1/runs?limit=50").json();
        runs["runs"].as_array().is_some_and(|r| {
            r.iter()
                .any(|x| x["trigger"] == "error" && x["reaction_kind"] == "ci")
        })
    });
}

#[test]
fn a_fix_held_by_the_session_budget_stays_served_while_it_holds() {
    let fake = fake_github::start(LABELS);
    failing(&fake, "sha1");
    let p = project(&fake, "  max_sessions: 1\n");
    let d = p.start();
    let held = |s: &Value| {
        s["budget_exhausted"]
            .as_array()
            .is_some_and(|b| b.len() == 1 && b[0]["reason"] == "session_budget")
    };
    let s = d.wait_state("the fix held by the budget", WAIT, held);
    assert_eq!(p.prompts().len(), 1, "the held fix did not start: {s}");
    assert_eq!(
        s["budget_exhausted"][0]["issue_identifier"],
        s["active"][0]["issue_identifier"]
    );
    // Several poll ticks later the hold is still served, and the fix counts.
    let polls = || fake.requests("GET", "/repos/owner/repo/issues").len();
    let start = polls();
    for n in 1..=3 {
        d.wait_until(&format!("poll tick {n}"), WAIT, || {
            let _ = d.post("/api/v1/refresh");
            polls() >= start + n
        });
        let s = d.state();
        assert!(held(&s), "tick {n}: {s}");
        let e = &s["active"][0];
        assert_eq!(e["status"], "budget_exhausted", "{s}");
        assert_eq!(
            e["pr_loop"]["ci_failure"],
            json!({"result": "acted", "continuations": 1}),
            "{s}"
        );
    }
    assert_eq!(p.prompts().len(), 1);
}
