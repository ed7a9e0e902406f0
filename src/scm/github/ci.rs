//! The CI report of a ref: check runs (every page) and the combined commit status, joined by
//! `scm::verdict`, plus the log tail of the first failing GitHub Actions run. GitHub answers
//! a job-log read with a redirect to short-lived storage on another host; it is followed once,
//! explicitly, and the credential is not sent there (the client sends it only to the endpoint).

use serde_json::Value;

use super::api::Api;
use super::error::scm_error;
use crate::http_client::{HttpError, Request, encode};
use crate::scm::verdict::{self, RunVerdict};
use crate::scm::{CheckRun, CiReport, PullRequestRef, ScmResult, log_tail};

/// Pages of check runs read (100 each).
const CHECK_RUN_PAGE_CAP: usize = 10;
/// The app whose check runs are jobs with a readable log.
const ACTIONS_APP: &str = "github-actions";

/// A check run as GitHub serves it.
pub fn check_run(v: &Value) -> CheckRun {
    let s = |key: &str| v[key].as_str().unwrap_or("").to_string();
    CheckRun {
        id: v["id"].as_u64().unwrap_or(0),
        name: s("name"),
        status: verdict::normalize_status(v["status"].as_str().unwrap_or("")).to_string(),
        conclusion: v["conclusion"].as_str().map(String::from),
        // The run's page on GitHub; the app's own link when GitHub gives none.
        details_url: v["html_url"]
            .as_str()
            .filter(|u| !u.is_empty())
            .or_else(|| v["details_url"].as_str())
            .unwrap_or("")
            .to_string(),
        app_slug: v["app"]["slug"].as_str().unwrap_or("").to_string(),
    }
}

/// The contexts of a combined status as runs; `total_count: 0` gives none.
pub fn status_runs(v: &Value) -> Vec<CheckRun> {
    if v["total_count"].as_u64() == Some(0) {
        return Vec::new();
    }
    v["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            verdict::status_context(
                s["context"].as_str().unwrap_or(""),
                s["state"].as_str().unwrap_or(""),
                s["target_url"].as_str().unwrap_or(""),
            )
        })
        .collect()
}

pub fn report(
    api: &Api,
    pr: &PullRequestRef,
    git_ref: &str,
    max_log_lines: usize,
) -> ScmResult<CiReport> {
    let commit = format!("{}/commits/{}", Api::repo_path(pr), encode(git_ref));
    let pages = api
        .list(
            Request::get(format!("{commit}/check-runs")),
            CHECK_RUN_PAGE_CAP,
            "check runs",
            |body| body["check_runs"].as_array().cloned(),
        )
        .map_err(|e| scm_error(&e))?;
    let mut runs: Vec<CheckRun> = pages.iter().map(check_run).collect();
    let combined = api
        .get_cached(&format!("{commit}/status"), &[("per_page", "100")])
        .map_err(|e| scm_error(&e))?;
    runs.extend(status_runs(&combined));
    let log_excerpt = if max_log_lines > 0 {
        first_actions_failure(&runs)
            .map(|id| log_excerpt(api, pr, id, max_log_lines))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(CiReport::from_runs(git_ref, runs, log_excerpt))
}

/// The id of the first failing run that is a GitHub Actions job.
fn first_actions_failure(runs: &[CheckRun]) -> Option<u64> {
    runs.iter()
        .find(|r| verdict::run_verdict(r) == RunVerdict::Failing && r.app_slug == ACTIONS_APP)
        .map(|r| r.id)
        .filter(|id| *id > 0)
}

/// The log tail of job `id`; empty (with a warning) when it cannot be read: a missing log
/// must not hide the verdict.
fn log_excerpt(api: &Api, pr: &PullRequestRef, id: u64, max_lines: usize) -> String {
    match read_log(api, pr, id) {
        Ok(bytes) => log_tail::tail(&bytes, max_lines),
        Err(e) => {
            log::warn!(
                repository:% = pr.repository(),
                job_id:% = id,
                error:% = e;
                "job log not read"
            );
            String::new()
        }
    }
}

fn read_log(api: &Api, pr: &PullRequestRef, id: u64) -> Result<Vec<u8>, HttpError> {
    let path = format!("{}/actions/jobs/{id}/logs", Api::repo_path(pr));
    let first = api.send(Request::get(path.clone()).redirect_allowed())?;
    if !(300..400).contains(&first.status) {
        return Ok(first.body);
    }
    let Some(location) = first.header("location").map(str::to_string) else {
        return Err(HttpError::new(
            crate::http_client::ErrorClass::Payload,
            "GET",
            &path,
            format!("a {} answer without a Location", first.status),
        ));
    };
    // A relative target stays on the endpoint; an absolute one is fetched verbatim (without
    // the credential when it is another host). A second redirect is not followed.
    Ok(api.send(Request::get(location))?.body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CiStatus;

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/github/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn runs_of(name: &str) -> Vec<CheckRun> {
        fixture(name)["check_runs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(check_run)
            .collect()
    }

    #[test]
    fn the_recorded_check_runs_give_their_verdicts() {
        let cases = [
            ("check_runs_passing.json", CiStatus::Passing, (0, 0, 2)),
            ("check_runs_failing.json", CiStatus::Failing, (1, 0, 1)),
            ("check_runs_pending.json", CiStatus::Pending, (0, 1, 1)),
            ("check_runs_mixed.json", CiStatus::Failing, (1, 1, 1)),
            ("check_runs_empty.json", CiStatus::Pending, (0, 0, 0)),
        ];
        for (name, status, (failing, pending, passing)) in cases {
            let t = verdict::tally(&runs_of(name));
            assert_eq!(t.status, status, "{name}");
            assert_eq!(
                (t.failing, t.pending, t.passing),
                (failing, pending, passing),
                "{name}"
            );
        }
        let mixed = runs_of("check_runs_mixed.json");
        assert_eq!(verdict::tally(&mixed).failing_checks, ["test"]);
        assert_eq!(first_actions_failure(&mixed), Some(5001));
        assert_eq!(
            mixed[0].details_url,
            "https://github.com/owner/repo/runs/5001"
        );
        assert_eq!(mixed[2].conclusion, None);
        assert_eq!(
            first_actions_failure(&runs_of("check_runs_passing.json")),
            None
        );
    }

    #[test]
    fn combined_statuses_join_the_counts() {
        let none = serde_json::json!({"state": "pending", "total_count": 0, "statuses": []});
        assert!(status_runs(&none).is_empty());
        let some = serde_json::json!({"state": "failure", "total_count": 2, "statuses": [
            {"context": "ci/jenkins", "state": "error", "target_url": "https://ci/1"},
            {"context": "deploy", "state": "success", "target_url": null}]});
        let mut runs = runs_of("check_runs_passing.json");
        runs.extend(status_runs(&some));
        let t = verdict::tally(&runs);
        assert_eq!(t.status, CiStatus::Failing);
        assert_eq!((t.failing, t.pending, t.passing), (1, 0, 3));
        assert_eq!(t.failing_checks, ["ci/jenkins"]);
        // A failing status context has no job log.
        assert_eq!(first_actions_failure(&runs), None);
    }
}
