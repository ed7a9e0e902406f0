//! Reactions on GitLab through the real binary and the fake GitLab; the run records merge
//! request !7 of `group/sub/project`. A failing job of the head pipeline dispatches a CI-fix
//! run carrying the failing job and its trace tail (ANSI stripped). With a mergeable merge
//! request and a passing head pipeline it is merged once (squash, guarded by its head sha), its source
//! branch is deleted, and merge completion moves the issue to `done` with outcome `merged`.

mod common;

use std::time::Duration;

use common::fake_gitlab::{self, FakeGitlab, TOKEN, job_json, pipeline_json};
use common::reactions::{self, Forge, PR as MR, ReactionProject};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

const MERGE: &str = "  auto_merge:\n    provider: gitlab\n    strategy: squash\n    require_ci: true\n    delete_branch: true\n    poll_interval_ms: 60000\n  merge_completion:\n    target_state: done\n    poll_interval_ms: 60000\n";
const CI: &str = "  ci_failure:\n    provider: gitlab\n    max_retries: 1\n    max_log_lines: 5\n";

/// The run's merge request is !7 of `group/sub/project`.
fn project(fake: &FakeGitlab, reactions: &str) -> ReactionProject {
    let forge = Forge {
        kind: "gitlab",
        url: &fake.url,
        token: TOKEN,
        project: fake_gitlab::PROJECT,
        owner: "group/sub",
        repo: "project",
    };
    ReactionProject::on(&forge, reactions)
}

#[test]
fn a_failing_pipeline_job_dispatches_one_ci_fix_run_with_its_trace() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_mr(MR, "sortie/1", "sha1");
        s.add_pipeline(
            pipeline_json(9001, "sha1", "sortie/1", "failed"),
            vec![
                job_json(8001, "build", "success"),
                job_json(8002, "test", "failed"),
            ],
        );
        s.set_trace(
            8002,
            "\u{1b}[0K\u{1b}[31merror\u{1b}[0m: test_export failed\n",
        );
    });
    let p = project(&fake, CI);
    let d = p.start();
    d.wait_until("the CI-fix run", WAIT, || p.prompts().len() >= 2);
    let fix = &p.prompts()[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    assert!(
        fix.contains("check=test/failure") && fix.contains("check=build/success"),
        "{fix}"
    );
    assert!(fix.contains("error: test_export failed"), "{fix}");
    assert!(!fix.contains("\u{1b}["), "{fix}");
    assert!(!p.prompts()[0].contains("CI FAILING"));
}

#[test]
fn a_mergeable_passing_merge_request_is_merged_once_and_the_issue_moves_on() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_mr(MR, "sortie/1", "sha1");
        s.add_pipeline(
            pipeline_json(9001, "sha1", "sortie/1", "success"),
            vec![job_json(8001, "test", "success")],
        );
    });
    let p = project(&fake, MERGE);
    let d = p.start();
    let merge_path = format!("{}/merge_requests/{MR}/merge", fake_gitlab::project_path());
    d.wait_until("the merge", WAIT, || {
        !fake.requests("PUT", &merge_path).is_empty()
    });
    let put = fake.requests("PUT", &merge_path)[0].json();
    assert_eq!(put, json!({"sha": "sha1", "squash": true}));
    reactions::await_auto_merge_course(
        &d,
        "group/sub/project",
        || fake.requests("PUT", &merge_path).len(),
        || {
            fake.with_state(|s| s.labels(1))
                .contains(&"done".to_string())
        },
        || !fake.with_state(|s| s.branch_exists("sortie/1")),
    );
    assert_eq!(p.prompts().len(), 1, "merging starts no agent");
}
