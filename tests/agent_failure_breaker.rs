//! The failure breaker through the real binary with the fake agent: runs of one issue that keep
//! failing with the same cause hold it after `agent.max_same_failures` runs; a run whose
//! failure the kind recognises as one that will not heal (not logged in, unsupported token, no
//! provider, provider unreachable, quota or billing) holds it at once. A held issue is listed
//! in `held[]` with reason `failure_held`, has an attention item that quotes the agent's own
//! words, is never retried, survives a restart, and is released by retry now, by
//! acknowledging its item, or by a workflow reload.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{FAKE_AGENT, Project};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(40);

/// Failure retries wait 50 ms instead of 10 s and more.
const FAST_RETRIES: &str = "  max_retry_backoff_ms: 50\n";

fn fixture(kind: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind)
        .join(name)
}

/// Steps that print `lines` on stderr, then exit 1.
fn failing(lines: &[&str]) -> Vec<Value> {
    let mut steps: Vec<Value> = lines.iter().map(|l| json!({"stderr": l})).collect();
    steps.push(json!({"exit": 1}));
    steps
}

/// The recorded stderr of a real CLI as failing steps.
fn recorded(kind: &str, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(kind, name)).unwrap();
    failing(&text.lines().collect::<Vec<_>>())
}

fn succeeding() -> Vec<Value> {
    vec![
        json!({"init": {}}),
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
        json!({"result": {"subtype": "success", "text": "ok"}}),
    ]
}

fn spawns(p: &Project) -> usize {
    std::fs::read_to_string(p.path("argv.log"))
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

fn held_of<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["held"]
        .as_array()?
        .iter()
        .find(|h| h["issue_identifier"] == identifier)
}

fn item_of<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["attention"]
        .as_array()?
        .iter()
        .find(|i| i["kind"] == "failure_held" && i["issue_identifier"] == identifier)
}

/// The issue is held by the breaker and has its attention item.
fn failure_held(s: &Value, identifier: &str) -> bool {
    held_of(s, identifier).is_some_and(|h| h["hold"]["reason"] == "failure_held")
        && item_of(s, identifier).is_some()
}

fn rescript(p: &Project, identifier: &str, lines: &[Value]) {
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(
        p.workspace(identifier).join(".scenario"),
        text.join("\n") + "\n",
    )
    .unwrap();
}

fn wait_polls(d: &common::Daemon, n: usize) {
    let mut seen = std::collections::BTreeSet::new();
    d.wait_until("several poll ticks", T, || {
        if let Some(s) = d.try_state() {
            seen.insert(s["health"]["poll"]["checked_at"].to_string());
        }
        seen.len() > n
    });
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

#[test]
fn each_kind_recognises_its_own_cli_s_words() {
    use sortie::agent::failure_class::FailureClass;
    let class = |kind: &str, text: &str| {
        let d = sortie::registry::agent(kind).unwrap();
        (d.classify_failure)(text)
    };
    let classic = std::fs::read_to_string(fixture("copilot", "real_classic_pat_refused.txt"));
    assert_eq!(
        class("copilot-cli", &classic.unwrap()),
        Some(FailureClass::UnsupportedToken)
    );
    let offline = std::fs::read_to_string(fixture("copilot", "real_token_offline.txt"));
    assert_eq!(
        class("copilot-cli", &offline.unwrap()),
        Some(FailureClass::Unreachable)
    );
    assert_eq!(
        class("opencode", "Error: No providers found"),
        Some(FailureClass::NoProvider)
    );
    assert_eq!(
        class(
            "opencode",
            "opencode printed no JSON within 10000 ms (agent.read_timeout_ms): it likely cannot reach its model provider (no network, or no provider configured)"
        ),
        None,
        "sortie's own guess is not the agent's word"
    );
    assert_eq!(
        class("claude-code", "Credit balance is too low"),
        Some(FailureClass::QuotaOrBilling)
    );
    assert_eq!(
        class(
            "codex",
            "stream error: error sending request for url (https://api.openai.com/v1/responses)"
        ),
        Some(FailureClass::Unreachable)
    );
    assert_eq!(
        class(
            "agent-client-protocol",
            "Gemini API key is missing or not configured."
        ),
        Some(FailureClass::NotLoggedIn)
    );
    for kind in [
        "claude-code",
        "copilot-cli",
        "opencode",
        "codex",
        "agent-client-protocol",
    ] {
        assert_eq!(
            class(kind, "Error: getaddrinfo EAI_AGAIN api.example.com"),
            Some(FailureClass::Unreachable),
            "{kind}"
        );
        assert_eq!(class(kind, "error: 3 tests failed"), None, "{kind}");
    }
}

#[test]
fn three_runs_with_the_same_cause_hold_the_issue_until_a_person_asks_to_retry_it() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    p.scenario(
        "default",
        &failing(&[
            "starting up",
            "Error: the frobnicator is not ready (code 7)",
            "secret sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
            "bye",
        ]),
    );
    p.fake_agent_workflow(FAST_RETRIES, "");
    let d = p.start();
    let s = d.wait_state("the failure hold", T, |s| failure_held(s, "A-1"));

    assert_eq!(p.run_statuses("1"), vec!["failed"; 3]);
    assert_eq!(s["retrying"], json!([]), "a held issue is not retried");
    let hold = &held_of(&s, "A-1").unwrap()["hold"];
    assert_eq!(
        hold["reason_text"],
        "Held: 3 runs in a row failed with port_exit"
    );
    assert!(
        text(&hold["release_text"]).contains("retry it now"),
        "{hold}"
    );
    let item = item_of(&s, "A-1").unwrap();
    assert_eq!(item["severity"], "warning");
    assert_eq!(item["evidence"]["cause"], "port_exit");
    assert_eq!(item["evidence"]["runs"], 3);
    assert_eq!(item["evidence"]["agent_kind"], "claude-code");
    let why = text(&item["why_text"]);
    assert!(why.contains("frobnicator is not ready"), "{why}");
    assert!(
        why.contains("Its last 3 runs failed with port_exit"),
        "{why}"
    );
    assert!(
        !why.contains("abcdefghijklmnop"),
        "secrets are masked: {why}"
    );
    assert_eq!(item["action"]["kind"], "acknowledge");

    // Held, never looping.
    wait_polls(&d, 5);
    assert_eq!(spawns(&p), 3);
    // The issue's own page answers while it is held.
    assert_eq!(d.get("/api/v1/A-1").status, 200);

    // A person fixed the cause and asks to retry it now: the hold is released and it runs.
    rescript(&p, "A-1", &succeeding());
    let r = d.post("/api/v1/retries/A-1/run");
    assert_eq!(r.status, 202, "{}", r.body);
    let reply = r.json();
    assert_eq!(reply["issue_id"], "1", "{}", r.body);
    assert_eq!(
        reply["outcome_text"],
        "A-1 is released from its failure hold; the next poll tick dispatches it.",
        "{}",
        r.body
    );
    d.wait_until("the fourth run", T, || p.run_statuses("1").len() == 4);
    assert_eq!(p.run_statuses("1")[3], "succeeded");
    let s = d.wait_state("the hold gone", T, |s| item_of(s, "A-1").is_none());
    assert!(held_of(&s, "A-1").is_none());
    assert_eq!(
        p.db_i64("SELECT COUNT(*) FROM failure_holds"),
        0,
        "the stored hold is deleted"
    );
}

#[test]
fn a_spent_session_budget_holds_the_issue_instead_of_the_breaker() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "B-1", "title": "Work", "state": "To Do"}]));
    p.scenario("default", &failing(&["Error: flaky"]));
    p.fake_agent_workflow(&format!("{FAST_RETRIES}  max_sessions: 3\n"), "");
    let d = p.start();
    let s = d.wait_state("the budget hold", T, |s| {
        s["budget_exhausted"]
            .as_array()
            .is_some_and(|b| b.iter().any(|r| r["issue_identifier"] == "B-1"))
    });
    assert!(item_of(&s, "B-1").is_none(), "{s}");
    assert_eq!(p.run_statuses("1"), vec!["failed"; 3]);
}

#[test]
fn a_run_that_does_not_fail_ends_the_streak() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    // Invocations 1, 2, 4 and 5 fail, the others succeed; one turn per run, and without a
    // handoff state a run that succeeds is continued.
    let mut steps = Vec::new();
    for turn in [1, 2, 4, 5] {
        steps.push(json!({"stderr": "Error: flaky", "turn": turn}));
        steps.push(json!({"exit": 1, "turn": turn}));
    }
    p.scenario("default", &steps);
    p.fake_agent_workflow_full("", &format!("{FAST_RETRIES}  max_turns: 1\n"), "");
    std::fs::create_dir_all(p.path("state")).unwrap();
    let d = p.start_with_env(&[("FAKE_AGENT_STATE_DIR", p.path("state").to_str().unwrap())]);
    d.wait_until("six runs", T, || p.run_statuses("1").len() >= 6);
    let statuses = p.run_statuses("1");
    assert_eq!(
        statuses[..6],
        [
            "failed",
            "failed",
            "succeeded",
            "failed",
            "failed",
            "succeeded"
        ]
    );
    let s = d.state();
    assert!(
        item_of(&s, "A-1").is_none(),
        "two failures after a success are not three in a row: {s}"
    );
}

#[test]
fn a_failure_that_will_not_heal_holds_at_once_for_each_recognised_cause() {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "N-1", "title": "DNS", "state": "To Do"},
        {"id": "2", "identifier": "N-2", "title": "Refused", "state": "To Do"},
        {"id": "3", "identifier": "N-3", "title": "Billing", "state": "To Do"},
        {"id": "4", "identifier": "N-4", "title": "Key", "state": "To Do"}
    ]));
    p.scenario(
        "N-1",
        &failing(&[
            "node:internal/process",
            "Error: getaddrinfo ENOTFOUND api.anthropic.com",
            "    at GetAddrInfoReqWrap.onlookupall",
        ]),
    );
    p.scenario(
        "N-2",
        &failing(&["Error: connect ECONNREFUSED 127.0.0.1:443"]),
    );
    p.scenario("N-3", &failing(&["Credit balance is too low"]));
    p.scenario("N-4", &failing(&["Invalid API key · Please run /login"]));
    p.fake_agent_workflow(FAST_RETRIES, "");
    let d = p.start();
    let s = d.wait_state("four failure holds", T, |s| {
        ["N-1", "N-2", "N-3", "N-4"]
            .iter()
            .all(|i| failure_held(s, i))
    });
    let want = [
        ("N-1", "provider_unreachable", "ENOTFOUND api.anthropic.com"),
        ("N-2", "provider_unreachable", "ECONNREFUSED"),
        ("N-3", "quota_or_billing", "Credit balance is too low"),
        ("N-4", "not_logged_in", "Invalid API key"),
    ];
    for (identifier, cause, said) in want {
        let item = item_of(&s, identifier).unwrap();
        assert_eq!(item["evidence"]["cause"], cause, "{item}");
        assert_eq!(item["evidence"]["runs"], 1, "{item}");
        let why = text(&item["why_text"]);
        assert!(why.contains(said), "{why}");
        assert!(why.contains("Its run failed"), "{why}");
        assert!(why.contains("To do: "), "{why}");
    }
    let n1 = &held_of(&s, "N-1").unwrap()["hold"];
    assert_eq!(
        n1["reason_text"],
        "Held: the agent's CLI cannot reach its model API"
    );
    wait_polls(&d, 5);
    assert_eq!(spawns(&p), 4, "one run each, no retry");
    for id in ["1", "2", "3", "4"] {
        assert_eq!(p.run_statuses(id), vec!["failed"], "issue {id}");
    }
}

#[test]
fn a_hold_survives_a_restart_and_acknowledging_its_item_releases_it() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    p.scenario(
        "default",
        &failing(&["Error: getaddrinfo EAI_AGAIN api.anthropic.com"]),
    );
    p.fake_agent_workflow(FAST_RETRIES, "");
    let d = p.start();
    let before = d.wait_state("the failure hold", T, |s| failure_held(s, "A-1"));
    let id_before = item_of(&before, "A-1").unwrap()["id"].clone();
    assert_eq!(d.stop(), Some(0));

    let d = p.start();
    let s = d.wait_state("the hold restored", T, |s| failure_held(s, "A-1"));
    let item = item_of(&s, "A-1").unwrap();
    assert_eq!(item["id"], id_before, "the same item after the restart");
    assert!(text(&item["why_text"]).contains("EAI_AGAIN"), "{item}");
    wait_polls(&d, 4);
    assert_eq!(spawns(&p), 1, "not dispatched after the restart");

    rescript(&p, "A-1", &succeeding());
    let r = d.post(&format!(
        "/api/v1/attention/{}/acknowledge",
        text(&item["id"])
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    d.wait_until("the second run", T, || p.run_statuses("1").len() == 2);
    assert_eq!(p.run_statuses("1"), vec!["failed", "succeeded"]);
}

#[test]
fn a_workflow_reload_releases_every_failure_hold() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "A-1", "title": "Work", "state": "To Do"}]));
    p.scenario(
        "default",
        &failing(&[
            "Error: You exceeded your current quota, please check your plan and billing details.",
        ]),
    );
    p.fake_agent_workflow(FAST_RETRIES, "");
    let d = p.start();
    let s = d.wait_state("the failure hold", T, |s| failure_held(s, "A-1"));
    assert_eq!(
        item_of(&s, "A-1").unwrap()["evidence"]["cause"],
        "quota_or_billing"
    );
    rescript(&p, "A-1", &succeeding());
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    std::fs::write(p.workflow(), wf.replace("Work on ", "Please work on ")).unwrap();
    d.wait_until("the second run", T, || p.run_statuses("1").len() == 2);
    assert_eq!(p.run_statuses("1"), vec!["failed", "succeeded"]);
    let s = d.wait_state("no hold left", T, |s| item_of(s, "A-1").is_none());
    assert!(held_of(&s, "A-1").is_none());
}

#[test]
fn runs_that_stall_the_same_way_hold_the_issue_and_leaving_the_active_states_ends_the_hold() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "S-1", "title": "Silent", "state": "To Do"}]));
    p.scenario("default", &[json!({"init": {}}), json!({"hang": true})]);
    p.fake_agent_workflow(
        &format!("{FAST_RETRIES}  stall_timeout_ms: 300\n  max_same_failures: 2\n"),
        "",
    );
    let d = p.start();
    let s = d.wait_state("the stall hold", T, |s| failure_held(s, "S-1"));
    assert_eq!(p.run_statuses("1").len(), 2);
    let item = item_of(&s, "S-1").unwrap();
    assert_eq!(item["evidence"]["cause"], "stall", "{item}");
    assert_eq!(
        held_of(&s, "S-1").unwrap()["hold"]["reason_text"],
        "Held: 2 runs in a row stalled (no agent event within agent.stall_timeout_ms)"
    );
    assert_eq!(
        s["retrying"],
        json!([]),
        "the stall's queued retry is cancelled"
    );
    wait_polls(&d, 4);
    assert_eq!(spawns(&p), 2);

    // The issue is closed in the tracker: nobody needs to act on it any more.
    p.issues(json!([{"id": "1", "identifier": "S-1", "title": "Silent", "state": "Done"}]));
    d.wait_state("the hold gone", T, |s| item_of(s, "S-1").is_none());
    d.wait_until("the stored hold deleted", T, || {
        p.db_i64("SELECT COUNT(*) FROM failure_holds") == 0
    });
}

#[test]
fn a_turn_silent_for_the_read_timeout_reads_as_waiting_for_the_agent_s_first_output() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "W-1", "title": "Slow", "state": "To Do"}]));
    let go = p.path("markers/go");
    let mut steps = vec![json!({"wait_file": go})];
    steps.extend(succeeding());
    p.scenario("default", &steps);
    p.fake_agent_workflow("  read_timeout_ms: 300\n", "");
    let d = p.start();
    let s = d.wait_state("the waiting row", T, |s| {
        s["running"][0]["waiting_for_first_output"] == true
    });
    let row = &s["running"][0];
    assert_eq!(
        row["status_text"], "Turn 1, waiting for the agent's first output",
        "{row}"
    );
    assert!(
        text(&row["status_text_full"]).contains("agent.read_timeout_ms"),
        "{row}"
    );
    std::fs::write(&go, "").unwrap();
    d.wait_until("the run", T, || p.run_statuses("1") == vec!["succeeded"]);
}

/// A project whose agent is the fake Copilot CLI (a symlink named `copilot`), with a token in
/// its environment so the session preflight passes.
fn copilot_project() -> Project {
    let p = Project::new();
    std::fs::create_dir_all(p.path("bin")).unwrap();
    std::os::unix::fs::symlink(FAKE_AGENT, p.path("bin/copilot")).unwrap();
    p.fake_agent_workflow(FAST_RETRIES, "");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    let wf = wf
        .replace("kind: claude-code", "kind: copilot-cli")
        .replace(FAKE_AGENT, &p.path("bin/copilot").display().to_string());
    p.write("WORKFLOW.md", &wf);
    p
}

#[test]
fn the_copilot_cli_s_recorded_refusals_hold_with_their_own_words() {
    let p = copilot_project();
    p.issues(json!([
        {"id": "1", "identifier": "C-1", "title": "Classic token", "state": "To Do"},
        {"id": "2", "identifier": "C-2", "title": "Offline", "state": "To Do"}
    ]));
    p.scenario("C-1", &recorded("copilot", "real_classic_pat_refused.txt"));
    p.scenario("C-2", &recorded("copilot", "real_token_offline.txt"));
    let d = p.start_with_env(&[("COPILOT_GITHUB_TOKEN", "test-token-not-real")]);
    let s = d.wait_state("both held", T, |s| {
        failure_held(s, "C-1") && failure_held(s, "C-2")
    });
    let c1 = item_of(&s, "C-1").unwrap();
    assert_eq!(c1["evidence"]["cause"], "unsupported_token", "{c1}");
    let why = text(&c1["why_text"]);
    assert!(
        why.contains("Classic Personal Access Tokens (ghp_) are not supported by Copilot"),
        "the informative line, not the last one: {why}"
    );
    let c2 = item_of(&s, "C-2").unwrap();
    assert_eq!(c2["evidence"]["cause"], "provider_unreachable", "{c2}");
    assert!(
        text(&c2["why_text"]).contains("network fetch failed"),
        "{c2}"
    );
    assert_eq!(p.run_statuses("1"), vec!["failed"]);
    assert_eq!(p.run_statuses("2"), vec!["failed"]);
}
