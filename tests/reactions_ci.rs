//! The CI reaction through the real binary, the fake GitHub forge and the fake agent, which
//! leaves a pull-request record (`.sortie/scm.json`): a failing check dispatches exactly one
//! CI-fix run carrying the failing checks and the log excerpt; the same failing head
//! dispatches nothing more; a failing head of the fix exhausts `max_retries` and escalates
//! with a label; the escalation's attention item survives a restart and clears when the
//! check passes.

mod common;

use std::time::Duration;

use common::fake_github::{self, FakeGithub, check_run_json};
use common::reactions::{LABELS, ReactionProject, escalation_items, idle, row};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str = "  ci_failure:\n    provider: github\n    max_retries: 1\n    max_log_lines: 5\n    escalation: label\n    escalation_label: needs-human\n";

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.set_check_runs(
            sha,
            vec![
                check_run_json(11, "Test", "completed", Some("failure")),
                check_run_json(12, "Lint", "completed", Some("success")),
            ],
        );
        s.set_job_log(
            11,
            "2026-01-01T00:00:00.0000000Z \u{1b}[31merror\u{1b}[0m: test_export failed\n",
        );
    });
}

#[test]
fn a_failing_check_gets_one_fix_run_then_escalates_and_clears_when_it_passes() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(7, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let p = ReactionProject::new(&fake, REACTIONS);
    let d = p.start();

    // The first run hands off and leaves the record; the failing check dispatches one fix.
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    let fix = &p.prompts()[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(
        fix.contains("check=Test/failure") && fix.contains("check=Lint/success"),
        "{fix}"
    );
    assert!(fix.contains("error: test_export failed"), "{fix}");
    assert!(
        !fix.contains("\u{1b}[") && !fix.contains("2026-01-01T00"),
        "{fix}"
    );
    assert!(!p.prompts()[0].contains("CI FAILING"));

    // The fix recorded sha1 again before the forge moved; a second poll of the same failing
    // head dispatches nothing.
    let polls = fake
        .requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
        .len();
    d.wait_until("two more CI reads", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
            .len()
            >= polls + 2
            || fake.with_state(|s| s.labels(1).contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the fix handed off again", WAIT, idle);
    assert_eq!(p.prompts().len(), 2, "{s}");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let ci_failed = runs["runs"]
        .as_array()
        .map(|r| r.iter().filter(|x| x["status"] == "ci_failed").count())
        .unwrap_or(0);
    assert!(ci_failed >= 1, "{runs}");

    // The fix's head (its own work) fails too: max_retries 1 is spent, so it escalates.
    fake.with_state(|s| s.set_head(7, "sha2"));
    failing(&fake, "sha2");
    d.wait_until("the escalation label", WAIT, || {
        fake.with_state(|s| s.labels(1).contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the escalation item", WAIT, |s| escalation_items(s) == 1);
    let ci = row(&s, "ci").unwrap_or_default();
    assert_eq!(ci["escalation_trigger"], "budget_exhausted", "{ci}");
    assert_eq!(ci["used_attempts"], 1, "{ci}");
    assert_eq!(ci["max_attempts"], 1, "{ci}");
    assert!(ci["escalated_at"].is_string(), "{ci}");
    assert_eq!(p.prompts().len(), 2, "no run after the budget is spent");
    let escalated_at = ci["escalated_at"].clone();

    // A restart keeps the standing escalation. The state shows it as soon as it is decided;
    // its row is queued to the database writer then, so wait for the commit before the kill.
    let db = p.setup.path().join(".sortie.db");
    d.wait_until("the escalation committed", WAIT, || {
        common::store::count(
            &common::store::raw(&db),
            "SELECT COUNT(*) FROM reaction_escalations",
        ) == 1
    });
    drop(d);
    let d = p.start();
    let s = d.wait_state("the escalation after a restart", WAIT, |s| {
        escalation_items(s) == 1
    });
    let ci = row(&s, "ci").unwrap_or_default();
    assert_eq!(ci["escalated_at"], escalated_at, "{ci}");
    assert_eq!(ci["escalation_trigger"], "budget_exhausted", "{ci}");

    // A passing check ends it.
    fake.with_state(|s| {
        s.set_check_runs(
            "sha2",
            vec![check_run_json(13, "Test", "completed", Some("success"))],
        )
    });
    let s = d.wait_state("the escalation cleared", WAIT, |s| escalation_items(s) == 0);
    let ci = row(&s, "ci").unwrap_or_default();
    assert!(ci["escalated_at"].is_null(), "{ci}");
    assert_eq!(ci["last_check"]["status"], "passing", "{ci}");
    assert_eq!(p.prompts().len(), 2);
}

/// `max_retries: 0` escalates at the first failure; a failed escalation comment is logged and
/// the escalation stands.
#[test]
fn a_failed_escalation_write_keeps_the_escalation() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(7, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    fake.push_fault(
        "POST",
        "/repos/owner/repo/issues/1/comments",
        common::fake_server::Fault::server_error(502),
    );
    let p = ReactionProject::new(
        &fake,
        "  ci_failure:\n    provider: github\n    max_retries: 0\n    escalation: comment\n",
    );
    let d = p.start();
    let s = d.wait_state("the escalation", WAIT, |s| escalation_items(s) == 1);
    let ci = row(&s, "ci").unwrap_or_default();
    assert_eq!(ci["escalation_trigger"], "budget_exhausted", "{ci}");
    assert_eq!(ci["used_attempts"], 0, "{ci}");
    d.wait_until("the failed write logged", WAIT, || {
        d.log_text()
            .contains("reaction escalation write failed; the escalation stands")
    });
    let comments = fake.requests("POST", "/repos/owner/repo/issues/1/comments");
    assert_eq!(comments.len(), 1, "an escalation write is not retried");
    let s = d.state();
    assert_eq!(escalation_items(&s), 1, "{s}");
    assert_eq!(p.prompts().len(), 1, "no CI-fix run with max_retries 0");
}
