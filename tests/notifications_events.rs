//! Operator notifications for the events the pull-request reactions raise and for a
//! destination's rate limit, through the real binary: a CI escalation reaches a destination
//! subscribed to `escalation`, an auto-merge reaches one subscribed to `merge`, and a
//! destination limited to two deliveries a minute sends two handoffs at once and holds the third
//! in its queue (shown in its health row) instead of sending it.

mod common;

use std::time::Duration;

use common::fake_github::{self, check_run_json};
use common::reactions::{self, Forge, LABELS, PR, ReactionProject, escalation_items};
use common::receiver::{self, PATH};
use common::{Project, fake_server::FakeServer};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const SECRET: &str = "whsec-events-0123456789";

/// The deliveries `hook` took, as their JSON bodies.
fn deliveries(hook: &FakeServer<receiver::Hook>) -> Vec<Value> {
    hook.requests("POST", PATH)
        .iter()
        .map(common::fake_server::Recorded::json)
        .collect()
}

fn delivered(hook: &FakeServer<receiver::Hook>, event: &str, issue_id: &str) -> usize {
    deliveries(hook)
        .iter()
        .filter(|b| b["event"] == event && b["issue_id"] == issue_id)
        .count()
}

/// A GitHub reaction project whose workflow also has a webhook destination for `events`.
fn project(
    fake: &fake_github::FakeGithub,
    hook_url: &str,
    reactions_yaml: &str,
    events: &str,
) -> ReactionProject {
    let forge = Forge {
        kind: "github",
        url: &fake.url,
        token: fake_github::TOKEN,
        project: "owner/repo",
        owner: "owner",
        repo: "repo",
    };
    let notify = format!(
        "notifications:\n  destinations:\n    - name: ops\n      kind: webhook\n      url: {hook_url}{PATH}\n      secret: {SECRET}\n      events: [{events}]\n"
    );
    let workflow = reactions::workflow(&forge, reactions_yaml).replacen(
        "reactions:\n",
        &format!("{notify}reactions:\n"),
        1,
    );
    let env = vec![(reactions::token_env(&forge), fake_github::TOKEN.to_string())];
    ReactionProject::with_workflow(&workflow, &forge, env)
}

#[test]
fn a_ci_escalation_reaches_a_destination_subscribed_to_escalations() {
    let hook = receiver::webhook(SECRET);
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_check_runs(
            "sha1",
            vec![check_run_json(11, "Test", "completed", Some("failure"))],
        );
    });
    let p = project(
        &fake,
        &hook.url,
        "  ci_failure:\n    provider: github\n    max_retries: 0\n    escalation: label\n    escalation_label: needs-human\n",
        "escalation",
    );
    let d = p.start();
    d.wait_state("the escalation", WAIT, |s| escalation_items(s) == 1);
    d.wait_until("the escalation notice", WAIT, || {
        delivered(&hook, "escalation", "1") == 1
    });
    let notice = deliveries(&hook)
        .into_iter()
        .find(|b| b["event"] == "escalation")
        .unwrap_or_default();
    assert_eq!(notice["destination"], "ops", "{notice}");
    assert!(
        notice["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{notice}"
    );
    // Subscribed to escalations only: the handoff before it was not sent.
    assert_eq!(
        delivered(&hook, "handoff", "1"),
        0,
        "{:?}",
        deliveries(&hook)
    );
    assert_eq!(delivered(&hook, "attention_raised", "1"), 0);
}

#[test]
fn an_auto_merge_reaches_a_destination_subscribed_to_merges() {
    let hook = receiver::webhook(SECRET);
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_mergeable(PR, Some(true), "clean");
        s.set_check_runs(
            "sha1",
            vec![check_run_json(1, "Test", "completed", Some("success"))],
        );
    });
    let p = project(
        &fake,
        &hook.url,
        "  auto_merge:\n    provider: github\n    strategy: squash\n    require_ci: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n",
        "merge, handoff",
    );
    let d = p.start();
    d.wait_until("the merge notice", WAIT, || {
        delivered(&hook, "merge", "1") == 1
    });
    let merge_path = format!("/repos/owner/repo/pulls/{PR}/merge");
    assert_eq!(fake.requests("PUT", &merge_path).len(), 1);
    assert_eq!(
        delivered(&hook, "handoff", "1"),
        1,
        "{:?}",
        deliveries(&hook)
    );
    let s = d.state();
    assert!(s["health"]["notifications"][0]["status"] == "pass", "{s}");
}

#[test]
fn a_rate_limited_destination_holds_what_is_over_its_limit_in_its_queue() {
    let hook = receiver::webhook(SECRET);
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "R-1", "title": "One", "state": "To Do"},
        {"id": "2", "identifier": "R-2", "title": "Two", "state": "To Do"},
        {"id": "3", "identifier": "R-3", "title": "Three", "state": "To Do"},
    ]));
    p.scenario(
        "default",
        &[
            json!({"init": {}}),
            json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}),
            json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow(
        "  max_sessions: 3\n",
        &format!(
            "notifications:\n  destinations:\n    - name: ops\n      kind: webhook\n      url: {}{PATH}\n      secret: {SECRET}\n      events: [handoff]\n      rate_limit_per_minute: 2\n",
            hook.url
        ),
    );
    let d = p.start();
    let s = d.wait_state("two sent and one held by the limit", WAIT, |s| {
        s["health"]["notifications"][0]["queued"] == 1
            && hook.requests("POST", PATH).len() == 2
            && ["1", "2", "3"]
                .iter()
                .all(|id| p.issue_state(id) == "Review")
    });
    let row = &s["health"]["notifications"][0];
    assert_eq!(row["status"], "pass", "{row}");
    let sent = deliveries(&hook);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent.iter().all(|b| b["event"] == "handoff"), "{sent:?}");
}

#[test]
fn a_destination_whose_url_variable_is_unset_is_shown_failing_until_the_workflow_drops_it() {
    let hook = receiver::webhook(SECRET);
    let p = Project::new();
    p.issues(json!([]));
    let ops = format!(
        "    - name: ops\n      kind: webhook\n      url: {}{PATH}\n      secret: {SECRET}\n",
        hook.url
    );
    let pager = "    - name: pager\n      kind: slack\n      url: $SORTIE_TEST_NEVER_SET_URL\n";
    p.fake_agent_workflow(
        "",
        &format!("notifications:\n  destinations:\n{ops}{pager}"),
    );
    let d = p.start();
    let item_of = |s: &Value| -> Option<Value> {
        s["attention"]
            .as_array()?
            .iter()
            .find(|i| i["kind"] == "notification_destination_disabled")
            .cloned()
    };
    let s = d.wait_state("the disabled destination's item", WAIT, |s| {
        item_of(s).is_some()
    });
    let item = item_of(&s).unwrap_or_default();
    assert_eq!(item["evidence"]["destination"], "pager", "{item}");
    assert_eq!(item["severity"], "warning", "{item}");
    let why = item["why_text"].as_str().unwrap_or_default();
    assert!(why.contains("empty after $VAR expansion"), "{why}");
    let rows = s["health"]["notifications"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).cloned();
    let pager_row = row("pager").unwrap_or_default();
    assert_eq!(pager_row["status"], "fail", "{pager_row}");
    assert!(
        pager_row["disabled"]
            .as_str()
            .is_some_and(|w| w.contains(".url")),
        "{pager_row}"
    );
    let ops_row = row("ops").unwrap_or_default();
    assert_eq!(ops_row["status"], "pass", "{ops_row}");
    assert!(ops_row.get("disabled").is_none(), "{ops_row}");

    // The workflow drops it: the row and the item go.
    p.fake_agent_workflow("", &format!("notifications:\n  destinations:\n{ops}"));
    d.wait_state("the disabled destination gone", WAIT, |s| {
        item_of(s).is_none()
            && s["health"]["notifications"]
                .as_array()
                .is_some_and(|r| r.len() == 1 && r[0]["name"] == "ops")
    });
}
