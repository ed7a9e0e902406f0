//! The CI report of a ref: the combined commit status of the ref
//! (`GET /repos/R/commits/{ref}/status`), one check run per status context. Gitea Actions
//! reports its jobs as such contexts too. No log tail is read: a status carries only its
//! target URL, and Gitea's job-log API addresses jobs by ids the status does not give; the
//! report names the failing contexts and their URLs instead.

use serde_json::Value;

use super::api::{Api, PAGE_LIMIT, scm_error};
use crate::http_client::{Request, encode};
use crate::scm::{CheckRun, CiReport, PullRequestRef, ScmResult};

/// The app slug of contexts reported by Gitea Actions (their target is an actions run).
pub const ACTIONS_APP: &str = "gitea-actions";

/// A status word (`status` of a Gitea `CommitStatus`) as the verdict's `(status,
/// conclusion)`: `success` passes, `failure` and `error` fail, `warning` passes as neutral
/// (Gitea does not block a merge on it), `skipped` passes, `pending` and any other word is in
/// progress.
pub fn status_of(word: &str) -> (&'static str, Option<&'static str>) {
    match word {
        "success" => ("completed", Some("success")),
        "failure" | "error" => ("completed", Some("failure")),
        "warning" => ("completed", Some("neutral")),
        "skipped" => ("completed", Some("skipped")),
        _ => ("in_progress", None),
    }
}

/// A commit status as a check run.
pub fn status_run(v: &Value) -> CheckRun {
    let (status, conclusion) = status_of(v["status"].as_str().unwrap_or(""));
    let url = v["target_url"].as_str().unwrap_or("").to_string();
    CheckRun {
        id: v["id"].as_u64().unwrap_or(0),
        name: v["context"].as_str().unwrap_or("").to_string(),
        status: status.to_string(),
        conclusion: conclusion.map(String::from),
        app_slug: if url.contains("/actions/runs/") {
            ACTIONS_APP.to_string()
        } else {
            String::new()
        },
        details_url: url,
    }
}

pub fn report(api: &Api, pr: &PullRequestRef, git_ref: &str) -> ScmResult<CiReport> {
    let path = format!("{}/commits/{}/status", Api::repo_path(pr), encode(git_ref));
    let combined = api
        .get_object(Request::get(path).query("limit", PAGE_LIMIT))
        .map_err(|e| scm_error(&e))?;
    let runs: Vec<CheckRun> = combined["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(status_run)
        .collect();
    Ok(CiReport::from_runs(git_ref, runs, String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CiStatus;
    use crate::scm::verdict;
    use serde_json::json;

    #[test]
    fn status_words_give_their_verdicts() {
        let runs: Vec<CheckRun> = [
            json!({"id": 1, "context": "build", "status": "success",
                "target_url": "https://g/o/r/actions/runs/3/jobs/0"}),
            json!({"id": 2, "context": "lint", "status": "warning"}),
            json!({"id": 3, "context": "test", "status": "failure"}),
            json!({"id": 4, "context": "e2e", "status": "pending"}),
        ]
        .iter()
        .map(status_run)
        .collect();
        let t = verdict::tally(&runs);
        assert_eq!(t.status, CiStatus::Failing);
        assert_eq!((t.failing, t.pending, t.passing), (1, 1, 2));
        assert_eq!(t.failing_checks, ["test"]);
        assert_eq!(runs[0].app_slug, ACTIONS_APP);
        assert_eq!(runs[1].app_slug, "");
        for (w, want) in [
            ("error", CiStatus::Failing),
            ("skipped", CiStatus::Passing),
            ("", CiStatus::Pending),
        ] {
            let r = status_run(&json!({"context": "x", "status": w}));
            assert_eq!(verdict::tally(&[r]).status, want, "{w:?}");
        }
    }
}
