//! The CI verdict over a commit's check runs and commit-status contexts, without I/O.
//!
//! A run fails on `failure`, `action_required`, `cancelled` or `timed_out`, even while other
//! runs are in flight; it passes when completed with `success`, `neutral` or `skipped`; anything
//! else (not completed, no conclusion, `stale`, an unknown word) is pending. No runs at all is
//! pending: CI may not have started yet.

use super::{CheckRun, CiReport};
use crate::domain::CiStatus;

/// What one run says about the commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunVerdict {
    Passing,
    Pending,
    Failing,
}

/// A run's status word as the verdict reads it: `queued`, `in_progress` or `completed`
/// (anything else reads `queued`).
pub fn normalize_status(status: &str) -> &'static str {
    match status {
        "in_progress" => "in_progress",
        "completed" => "completed",
        _ => "queued",
    }
}

/// The verdict of one run.
pub fn run_verdict(run: &CheckRun) -> RunVerdict {
    match run.conclusion.as_deref() {
        Some("failure" | "action_required" | "cancelled" | "timed_out") => RunVerdict::Failing,
        Some("success" | "neutral" | "skipped") if normalize_status(&run.status) == "completed" => {
            RunVerdict::Passing
        }
        _ => RunVerdict::Pending,
    }
}

/// The counts and the aggregate over a set of runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub status: CiStatus,
    /// Names of the failing runs, in the given order.
    pub failing_checks: Vec<String>,
    pub failing: u32,
    pub pending: u32,
    pub passing: u32,
}

impl CiReport {
    /// The report of `git_ref` over `runs`, counted by [`tally`]; `log_excerpt` as read (empty
    /// when none).
    pub fn from_runs(git_ref: &str, runs: Vec<CheckRun>, log_excerpt: String) -> CiReport {
        let t = tally(&runs);
        CiReport {
            status: t.status,
            git_ref: git_ref.to_string(),
            check_runs: runs,
            failing_checks: t.failing_checks,
            failing: t.failing,
            pending: t.pending,
            passing: t.passing,
            log_excerpt,
        }
    }
}

/// The aggregate: any failing run ⇒ failing; else every run passing (and at least one) ⇒
/// passing; else pending.
pub fn tally(runs: &[CheckRun]) -> Tally {
    let mut t = Tally {
        status: CiStatus::Pending,
        failing_checks: Vec::new(),
        failing: 0,
        pending: 0,
        passing: 0,
    };
    for run in runs {
        match run_verdict(run) {
            RunVerdict::Failing => {
                t.failing += 1;
                t.failing_checks.push(run.name.clone());
            }
            RunVerdict::Pending => t.pending += 1,
            RunVerdict::Passing => t.passing += 1,
        }
    }
    t.status = if t.failing > 0 {
        CiStatus::Failing
    } else if t.pending == 0 && t.passing > 0 {
        CiStatus::Passing
    } else {
        CiStatus::Pending
    };
    t
}

/// A commit-status context as a run named by its context: `success` passes, `failure` and
/// `error` fail, `pending` (or any other word) is pending.
pub fn status_context(context: &str, state: &str, target_url: &str) -> CheckRun {
    let (status, conclusion) = match state {
        "success" => ("completed", Some("success")),
        "failure" | "error" => ("completed", Some("failure")),
        _ => ("in_progress", None),
    };
    CheckRun {
        id: 0,
        name: context.to_string(),
        status: status.to_string(),
        conclusion: conclusion.map(String::from),
        details_url: target_url.to_string(),
        app_slug: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, status: &str, conclusion: Option<&str>) -> CheckRun {
        CheckRun {
            id: 1,
            name: name.into(),
            status: status.into(),
            conclusion: conclusion.map(String::from),
            details_url: String::new(),
            app_slug: "github-actions".into(),
        }
    }

    #[test]
    fn the_per_run_table() {
        use RunVerdict::*;
        let table = [
            ("completed", Some("success"), Passing),
            ("completed", Some("neutral"), Passing),
            ("completed", Some("skipped"), Passing),
            ("completed", Some("failure"), Failing),
            ("completed", Some("action_required"), Failing),
            ("completed", Some("cancelled"), Failing),
            ("completed", Some("timed_out"), Failing),
            ("completed", Some("stale"), Pending),
            ("completed", Some("startup_failure_v2"), Pending),
            ("completed", None, Pending),
            ("in_progress", None, Pending),
            ("queued", None, Pending),
            ("waiting", None, Pending),
            ("requested", Some("success"), Pending),
        ];
        for (status, conclusion, want) in table {
            assert_eq!(
                run_verdict(&run("x", status, conclusion)),
                want,
                "{status} {conclusion:?}"
            );
        }
        assert_eq!(normalize_status("waiting"), "queued");
        assert_eq!(normalize_status("in_progress"), "in_progress");
    }

    #[test]
    fn the_aggregate_table() {
        let pass = run("a", "completed", Some("success"));
        let fail = run("b", "completed", Some("failure"));
        let busy = run("c", "in_progress", None);
        let cancelled = run("d", "completed", Some("cancelled"));
        let cases: [(&[CheckRun], CiStatus); 6] = [
            (&[], CiStatus::Pending),
            (std::slice::from_ref(&pass), CiStatus::Passing),
            (&[pass.clone(), busy.clone()], CiStatus::Pending),
            (
                &[pass.clone(), fail.clone(), busy.clone()],
                CiStatus::Failing,
            ),
            (&[busy.clone(), cancelled.clone()], CiStatus::Failing),
            (&[run("e", "completed", Some("skipped"))], CiStatus::Passing),
        ];
        for (runs, want) in cases {
            assert_eq!(tally(runs).status, want, "{runs:?}");
        }
        let t = tally(&[fail, pass, busy, cancelled]);
        assert_eq!((t.failing, t.pending, t.passing), (2, 1, 1));
        assert_eq!(t.failing_checks, ["b", "d"]);
    }

    #[test]
    fn commit_statuses_count_like_runs() {
        let ok = status_context("ci/jenkins", "success", "https://ci/1");
        assert_eq!(run_verdict(&ok), RunVerdict::Passing);
        assert_eq!(ok.details_url, "https://ci/1");
        assert_eq!(
            run_verdict(&status_context("x", "failure", "")),
            RunVerdict::Failing
        );
        let err = status_context("lint", "error", "");
        assert_eq!(run_verdict(&err), RunVerdict::Failing);
        assert_eq!(
            run_verdict(&status_context("x", "pending", "")),
            RunVerdict::Pending
        );
        let t = tally(&[ok, err]);
        assert_eq!(
            (t.status, t.failing_checks),
            (CiStatus::Failing, vec!["lint".to_string()])
        );
    }
}
