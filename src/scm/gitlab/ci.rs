//! The CI report of a ref: the merge request's `head_pipeline` when it is for that ref (else
//! the newest pipeline of the sha or branch), its jobs as check runs joined by
//! `scm::verdict`, and the trace tail of the first failing job. No pipeline at all is an empty
//! report (pending: CI may not have started).

use serde_json::Value;

use super::api::Api;
use super::error::scm_error;
use crate::http_client::{HttpError, Request};
use crate::scm::verdict::{self, RunVerdict};
use crate::scm::{CheckRun, CiReport, PullRequestRef, ScmResult, log_tail};

/// Pages of jobs read (100 each).
const JOB_PAGE_CAP: usize = 10;
/// What the runs of this forge are reported by.
pub const APP: &str = "gitlab-ci";

/// A job's (or pipeline's) status as the verdict's `(status, conclusion)`: `success`,
/// `failed` (`allow_failure` jobs read as neutral), `canceled`, `skipped` and `manual` (a job
/// waiting for a person does not hold the verdict) are completed; `running` is in progress;
/// anything else (`created`, `pending`, `preparing`, `scheduled`, `waiting_for_resource`) is
/// queued.
pub fn status_of(status: &str, allow_failure: bool) -> (&'static str, Option<&'static str>) {
    match status {
        "success" => ("completed", Some("success")),
        "failed" if allow_failure => ("completed", Some("neutral")),
        "failed" => ("completed", Some("failure")),
        "canceled" => ("completed", Some("cancelled")),
        "skipped" | "manual" => ("completed", Some("skipped")),
        "running" => ("in_progress", None),
        _ => ("queued", None),
    }
}

/// A job as a check run.
pub fn job_run(v: &Value) -> CheckRun {
    let (status, conclusion) = status_of(
        v["status"].as_str().unwrap_or(""),
        v["allow_failure"].as_bool().unwrap_or(false),
    );
    CheckRun {
        id: v["id"].as_u64().unwrap_or(0),
        name: v["name"].as_str().unwrap_or("").to_string(),
        status: status.to_string(),
        conclusion: conclusion.map(String::from),
        details_url: v["web_url"].as_str().unwrap_or("").to_string(),
        app_slug: APP.to_string(),
    }
}

/// A pipeline without jobs as one run (id 0: no trace to read).
fn pipeline_run(p: &Value) -> CheckRun {
    let (status, conclusion) = status_of(p["status"].as_str().unwrap_or(""), false);
    CheckRun {
        id: 0,
        name: "pipeline".into(),
        status: status.to_string(),
        conclusion: conclusion.map(String::from),
        details_url: p["web_url"].as_str().unwrap_or("").to_string(),
        app_slug: APP.to_string(),
    }
}

fn looks_like_sha(r: &str) -> bool {
    r.len() >= 7 && r.len() <= 64 && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The pipeline to judge: the head pipeline when it is for `git_ref`, else the newest one of
/// the ref.
fn pipeline(api: &Api, pr: &PullRequestRef, git_ref: &str) -> Result<Option<Value>, HttpError> {
    let mr = api.get_object(Request::get(Api::mr_path(pr)))?;
    let head = &mr["head_pipeline"];
    let for_ref = git_ref.is_empty()
        || head["sha"].as_str() == Some(git_ref)
        || mr["source_branch"].as_str() == Some(git_ref);
    if head.is_object() && for_ref {
        return Ok(Some(head.clone()));
    }
    let key = if looks_like_sha(git_ref) {
        "sha"
    } else {
        "ref"
    };
    let req = Request::get(format!("{}/pipelines", Api::project_path(pr)))
        .query(key, git_ref)
        .query("order_by", "id")
        .query("sort", "desc");
    Ok(api.list(req, 1, "pipelines")?.into_iter().next())
}

pub fn report(
    api: &Api,
    pr: &PullRequestRef,
    git_ref: &str,
    max_log_lines: usize,
) -> ScmResult<CiReport> {
    let pipeline = pipeline(api, pr, git_ref).map_err(|e| scm_error(&e))?;
    let mut runs = Vec::new();
    if let Some(p) = &pipeline
        && let Some(id) = p["id"].as_u64()
    {
        let req = Request::get(format!("{}/pipelines/{id}/jobs", Api::project_path(pr)));
        let jobs = api
            .list(req, JOB_PAGE_CAP, "pipeline jobs")
            .map_err(|e| scm_error(&e))?;
        runs = jobs.iter().map(job_run).collect();
        if runs.is_empty() {
            runs.push(pipeline_run(p));
        }
    }
    let log_excerpt = match first_failing_job(&runs) {
        Some(id) if max_log_lines > 0 => log_excerpt(api, pr, id, max_log_lines),
        _ => String::new(),
    };
    Ok(CiReport::from_runs(git_ref, runs, log_excerpt))
}

/// The id of the first failing job.
pub fn first_failing_job(runs: &[CheckRun]) -> Option<u64> {
    runs.iter()
        .find(|r| verdict::run_verdict(r) == RunVerdict::Failing && r.id > 0)
        .map(|r| r.id)
}

/// The trace tail of job `id`; empty (with a warning) when it cannot be read: a missing log
/// must not hide the verdict.
fn log_excerpt(api: &Api, pr: &PullRequestRef, id: u64, max_lines: usize) -> String {
    let path = format!("{}/jobs/{id}/trace", Api::project_path(pr));
    match api.send(Request::get(path)) {
        Ok(resp) => log_tail::tail(&resp.body, max_lines),
        Err(e) => {
            log::warn!(
                repository:% = pr.repository(),
                job_id:% = id,
                error:% = e;
                "job trace not read"
            );
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CiStatus;
    use serde_json::json;

    #[test]
    fn job_statuses_give_their_verdicts() {
        let jobs = [
            json!({"id": 1, "name": "build", "status": "success", "web_url": "u1"}),
            json!({"id": 2, "name": "lint", "status": "failed", "allow_failure": true}),
            json!({"id": 3, "name": "test", "status": "failed"}),
            json!({"id": 4, "name": "deploy", "status": "manual"}),
            json!({"id": 5, "name": "e2e", "status": "running"}),
        ];
        let runs: Vec<CheckRun> = jobs.iter().map(job_run).collect();
        let t = verdict::tally(&runs);
        assert_eq!(t.status, CiStatus::Failing);
        assert_eq!((t.failing, t.pending, t.passing), (1, 1, 3));
        assert_eq!(t.failing_checks, ["test"]);
        assert_eq!(first_failing_job(&runs), Some(3));
        assert_eq!(runs[0].details_url, "u1");
        for (s, want) in [
            ("pending", CiStatus::Pending),
            ("created", CiStatus::Pending),
            ("canceled", CiStatus::Failing),
            ("skipped", CiStatus::Passing),
        ] {
            let r = job_run(&json!({"id": 9, "name": "x", "status": s}));
            assert_eq!(verdict::tally(&[r]).status, want, "{s}");
        }
        assert!(looks_like_sha("0123abcd") && !looks_like_sha("feat/x"));
    }
}
