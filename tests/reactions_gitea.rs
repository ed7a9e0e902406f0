//! Reactions on Gitea through the real binary and the fake Gitea; the run records pull
//! request 7 of `owner/repo`. A failing status context of the head dispatches a CI-fix run
//! naming the failing context (Gitea gives no log to quote). With a mergeable pull request
//! and passing statuses it is merged once (squash, guarded by its head sha), its head branch
//! is deleted, and merge completion moves the issue to `done` with outcome `merged`.

mod common;

use std::time::Duration;

use common::fake_gitea::pulls::{merge_style, status_json};
use common::fake_gitea::{self, FakeGitea, TOKEN};
use common::reactions::{self, Forge, LABELS, PR, ReactionProject};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

const MERGE: &str = "  auto_merge:\n    provider: gitea\n    strategy: squash\n    require_ci: true\n    delete_branch: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n";
const CI: &str = "  ci_failure:\n    provider: gitea\n    max_retries: 1\n    max_log_lines: 5\n";

/// A fake with issue 1 in the backlog and pull request 7 from `sortie/1` at `sha1`.
fn fake_with_pull() -> FakeGitea {
    let fake = fake_gitea::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1", &[]);
    });
    fake
}

fn project(fake: &FakeGitea, reactions: &str) -> ReactionProject {
    let forge = Forge {
        kind: "gitea",
        url: &fake.url,
        token: TOKEN,
        project: "owner/repo",
        owner: "owner",
        repo: "repo",
    };
    ReactionProject::on(&forge, reactions)
}

#[test]
fn a_failing_status_context_dispatches_one_ci_fix_run_naming_it() {
    let fake = fake_with_pull();
    fake.with_state(|s| {
        s.set_status("sha1", status_json(801, "ci / build", "success", ""));
        s.set_status("sha1", status_json(802, "ci / test", "failure", ""));
    });
    let p = project(&fake, CI);
    let d = p.start();
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    let fix = &p.prompts()[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(
        fix.contains("check=ci / test/failure") && fix.contains("check=ci / build/success"),
        "{fix}"
    );
    assert!(fix.contains("LOG:\n\n"), "no log is quoted: {fix}");
    assert!(!p.prompts()[0].contains("CI FAILING"));
    let status = "/api/v1/repos/owner/repo/commits/sha1/status";
    assert!(!fake.requests("GET", status).is_empty());
}

#[test]
fn a_mergeable_passing_pull_request_is_merged_once_and_the_issue_moves_on() {
    let fake = fake_with_pull();
    fake.with_state(|s| s.set_status("sha1", status_json(801, "ci / test", "success", "")));
    let p = project(&fake, MERGE);
    let d = p.start();
    let merge_path = format!("/api/v1/repos/owner/repo/pulls/{PR}/merge");
    d.wait_until("the merge", WAIT, || {
        !fake.requests("POST", &merge_path).is_empty()
    });
    // The style and the guard as Gitea reads them; the key's spelling is the description's
    // business, which the vendor check holds the request to.
    let sent = fake.requests("POST", &merge_path)[0].json();
    assert_eq!(merge_style(&sent).as_deref(), Some("squash"));
    assert_eq!(
        (&sent["head_commit_id"], &sent["delete_branch_after_merge"]),
        (&json!("sha1"), &json!(false))
    );
    reactions::await_auto_merge_course(
        &d,
        "owner/repo",
        || fake.requests("POST", &merge_path).len(),
        || fake.with_state(|s| s.labels(1)) == ["done"],
        || !fake.with_state(|s| s.branch_exists("sortie/1")),
    );
    assert_eq!(p.prompts().len(), 1, "merging starts no agent");
}
