//! A merge conflict dispatches a rebase run; a label command (a person adds the fix label to
//! the pull request) starts a session and the label is consumed — through the real binary and
//! the fake forge.

mod common;

use std::time::Duration;

use common::fake_github;
use common::reactions::{LABELS, PR, ReactionProject, idle, row};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str = "  merge_conflicts:\n    provider: github\n    max_retries: 1\n    poll_interval_ms: 60000\n  label_commands:\n    fix_label: sortie-fix\n    review_label: sortie-review\n    poll_interval_ms: 60000\n";

#[test]
fn a_conflict_gets_a_rebase_run_and_a_fix_label_starts_a_session() {
    let fake = fake_github::start(&[LABELS, &["sortie-fix", "sortie-review"]].concat());
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_mergeable(PR, Some(false), "dirty");
    });
    let p = ReactionProject::new(&fake, REACTIONS);
    let d = p.start();
    d.wait_until("the rebase run", WAIT, || p.prompts().len() >= 2);
    let s = d.wait_state("the rebase run ended", WAIT, |s| {
        idle(s) && row(s, "merge-conflict").is_some_and(|r| r["used_attempts"] == 1)
    });
    let r = row(&s, "merge-conflict").unwrap_or_default();
    assert_eq!(r["last_check"]["mergeable"], false, "{r}");

    // The conflict is gone; a person asks for a fix with the label.
    fake.with_state(|s| {
        s.set_mergeable(PR, Some(true), "clean");
        s.add_label_event(PR, "sortie-fix", "alice", true);
    });
    assert_eq!(d.post("/api/v1/reactions/1/label-fix/check").status, 202);
    d.wait_until("the label-fix session", WAIT, || p.prompts().len() >= 3);
    let removed = fake.requests(
        "DELETE",
        &format!("/repos/owner/repo/issues/{PR}/labels/sortie-fix"),
    );
    assert_eq!(removed.len(), 1, "the label is consumed once");
    assert_eq!(
        d.post("/api/v1/reactions/1/merge-conflict/check").status,
        202
    );
    let s = d.wait_state("the conflict episode over", WAIT, |s| {
        idle(s) && row(s, "merge-conflict").is_some_and(|r| r["last_check"]["mergeable"] == true)
    });
    let r = row(&s, "merge-conflict").unwrap_or_default();
    assert_eq!(r["used_attempts"], 0, "{r}");
    assert_eq!(p.prompts().len(), 3);
}
