//! Auto-merge and merge completion through the real binary and the fake forge: a mergeable
//! pull request with passing CI is merged once (squash, guarded by its head), its branch is
//! deleted, and merge completion moves the issue to its target state with outcome `merged`.

mod common;

use std::time::Duration;

use common::fake_github::{self, check_run_json};
use common::reactions::{self, LABELS, PR, ReactionProject};

const WAIT: Duration = Duration::from_secs(40);
const REACTIONS: &str = "  auto_merge:\n    provider: github\n    strategy: squash\n    require_ci: true\n    delete_branch: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n";

#[test]
fn a_mergeable_passing_pull_request_is_merged_once_and_the_issue_moves_on() {
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
    let p = ReactionProject::new(&fake, REACTIONS);
    let d = p.start();
    let merge_path = format!("/repos/owner/repo/pulls/{PR}/merge");
    d.wait_until("the merge", WAIT, || {
        !fake.requests("PUT", &merge_path).is_empty()
    });
    let put = fake.requests("PUT", &merge_path)[0].json();
    assert_eq!(put["merge_method"], "squash", "{put}");
    assert_eq!(put["sha"], "sha1", "{put}");
    reactions::await_auto_merge_course(
        &d,
        "owner/repo",
        || fake.requests("PUT", &merge_path).len(),
        || fake.with_state(|s| s.labels(1)) == ["done"],
        || !fake.with_state(|s| s.branch_exists("sortie/1")),
    );
    assert_eq!(p.prompts().len(), 1, "merging starts no agent");
}
