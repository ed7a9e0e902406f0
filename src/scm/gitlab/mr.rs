//! The merge request itself: its read, the guarded merge, the source branch's deletion, and
//! its labels (resource label events and removal through an edit).

use serde_json::{Value, json};

use super::api::{Api, epoch_ms};
use super::error::{own, scm_error};
use crate::http_client::{ErrorClass, HttpError, Method, Request, absent_is_ok, encode};
use crate::scm::{
    LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef, ScmErrorKind,
    ScmResult,
};

/// Pages of label events read (100 each).
const EVENT_PAGE_CAP: usize = 20;

/// `detailed_merge_status` (<https://docs.gitlab.com/api/merge_requests/#merge-status>) as
/// the trait's `mergeable`: `mergeable` → yes; `conflict`, `broken_status` (or
/// `has_conflicts`) and `need_rebase` (a fast-forward project whose branch is behind) → no,
/// so the merge-conflict reaction's run rebases the branch; `checking`, `unchecked`,
/// `preparing`, `approvals_syncing` → not computed yet. Every other word blocks the merge
/// without anything a rebase would fix (`ci_must_pass`, `ci_still_running`,
/// `discussions_not_resolved`, `draft_status`, `not_approved`, `requested_changes`,
/// `not_open`, `merge_request_blocked`, `status_checks_must_pass`, `jira_association_missing`,
/// `security_policy_violations`, `merge_time`, `locked_paths`, `locked_lfs_files`,
/// `title_regex`, `commits_status`, …): it reads as not decided (`None`), so neither a merge
/// attempt nor a conflict fix follows while it holds; the word itself is kept in
/// `mergeable_state`.
pub fn mergeable_of(v: &Value) -> Option<bool> {
    if v["has_conflicts"].as_bool() == Some(true) {
        return Some(false);
    }
    match v["detailed_merge_status"].as_str() {
        Some("mergeable") => Some(true),
        Some("conflict" | "broken_status" | "need_rebase") => Some(false),
        Some(_) => None,
        // Instances before `detailed_merge_status` (GitLab < 15.6) give `merge_status`.
        None => match v["merge_status"].as_str() {
            Some("can_be_merged") => Some(true),
            Some("cannot_be_merged") => Some(false),
            _ => None,
        },
    }
}

/// A merge request as GitLab serves it.
pub fn info(v: &Value) -> PullRequestInfo {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let sha = |key: &str| v[key].as_str().filter(|s| !s.is_empty()).map(String::from);
    let state = v["state"].as_str().unwrap_or("");
    PullRequestInfo {
        open: state == "opened",
        merged: state == "merged",
        merge_commit_sha: sha("merge_commit_sha").or_else(|| sha("squash_commit_sha")),
        mergeable: mergeable_of(v),
        mergeable_state: v["detailed_merge_status"]
            .as_str()
            .or_else(|| v["merge_status"].as_str())
            .unwrap_or("")
            .to_string(),
        head_sha: s(&v["sha"]),
        head_ref: s(&v["source_branch"]),
        url: s(&v["web_url"]),
        labels: v["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().or_else(|| l["name"].as_str()).map(String::from))
            .collect(),
    }
}

pub fn read(api: &Api, pr: &PullRequestRef) -> ScmResult<PullRequestInfo> {
    let v = api
        .get_object(Request::get(Api::mr_path(pr)))
        .map_err(|e| scm_error(&e))?;
    if v["iid"].as_u64().is_none() {
        return Err(own(
            ScmErrorKind::Payload,
            format!("GET {}: no merge request in the answer", Api::mr_path(pr)),
        ));
    }
    Ok(info(&v))
}

/// What a merge answer means: 200 merged; 405 (draft, closed, pipeline, approvals) and 406
/// (conflict) not mergeable; 409 the `sha` guard refused (the head moved); 401/403 (not a rate
/// limit) and 422 refused; anything else is an error.
pub fn merge_outcome(result: Result<Value, HttpError>) -> ScmResult<MergeOutcome> {
    match result {
        Ok(body) => {
            let sha = |key: &str| {
                body[key]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(String::from)
            };
            Ok(MergeOutcome::Merged {
                sha: sha("merge_commit_sha").or_else(|| sha("squash_commit_sha")),
            })
        }
        Err(e) => match (e.status, e.class) {
            (Some(405 | 406), _) => Ok(MergeOutcome::NotMergeable(e.detail.clone())),
            (Some(409), _) => Ok(MergeOutcome::HeadMoved),
            (Some(403), ErrorClass::Auth) | (Some(422), _) => {
                Ok(MergeOutcome::Refused(e.detail.clone()))
            }
            _ => Err(scm_error(&e)),
        },
    }
}

pub fn merge(
    api: &Api,
    pr: &PullRequestRef,
    strategy: MergeStrategy,
    head_sha: &str,
) -> ScmResult<MergeOutcome> {
    let body = json!({"sha": head_sha, "squash": strategy == MergeStrategy::Squash});
    let req = Request::new(Method::Put, format!("{}/merge", Api::mr_path(pr))).json(&body);
    merge_outcome(api.send(req).and_then(|r| {
        if r.body.is_empty() {
            Ok(Value::Null)
        } else {
            r.json()
        }
    }))
}

pub fn delete_branch(api: &Api, pr: &PullRequestRef, branch: &str) -> ScmResult<()> {
    if branch.trim().is_empty() {
        return Err(own(ScmErrorKind::Payload, "no branch to delete"));
    }
    let path = format!(
        "{}/repository/branches/{}",
        Api::project_path(pr),
        encode(branch)
    );
    absent_is_ok(api.send(Request::new(Method::Delete, path))).map_err(|e| scm_error(&e))
}

/// A resource label event; `None` without a label name or with another action.
pub fn label_event(v: &Value) -> Option<LabelEvent> {
    let added = match v["action"].as_str()? {
        "add" => true,
        "remove" => false,
        _ => return None,
    };
    Some(LabelEvent {
        label: v["label"]["name"].as_str()?.to_string(),
        actor: v["user"]["username"].as_str().unwrap_or("").to_string(),
        created_at_ms: epoch_ms(&v["created_at"]),
        added,
    })
}

pub fn label_events(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
    let req = Request::get(format!("{}/resource_label_events", Api::mr_path(pr)));
    let events = api
        .list(req, EVENT_PAGE_CAP, "label events")
        .map_err(|e| scm_error(&e))?;
    let mut out: Vec<LabelEvent> = events.iter().filter_map(label_event).collect();
    out.sort_by_key(|e| e.created_at_ms);
    Ok(out)
}

/// `PUT` the merge request with `remove_labels`; GitLab ignores a label it does not carry.
pub fn remove_label(api: &Api, pr: &PullRequestRef, label: &str) -> ScmResult<()> {
    let req = Request::new(Method::Put, Api::mr_path(pr)).json(&json!({"remove_labels": label}));
    api.send(req).map(drop).map_err(|e| scm_error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> HttpError {
        let mut e = HttpError::new(
            crate::http_client::classify(status, &[], body.as_bytes()),
            "PUT",
            "/m",
            format!("status {status}: {body}"),
        );
        e.status = Some(status);
        e
    }

    #[test]
    fn merge_answers() {
        assert_eq!(
            merge_outcome(Ok(json!({"state": "merged", "merge_commit_sha": "abc"}))),
            Ok(MergeOutcome::Merged {
                sha: Some("abc".into())
            })
        );
        for s in [405, 406] {
            assert!(matches!(
                merge_outcome(Err(http(s, "no"))),
                Ok(MergeOutcome::NotMergeable(_))
            ));
        }
        assert_eq!(
            merge_outcome(Err(http(409, "SHA does not match HEAD of source branch"))),
            Ok(MergeOutcome::HeadMoved)
        );
        assert!(matches!(
            merge_outcome(Err(http(422, "x"))),
            Ok(MergeOutcome::Refused(_))
        ));
        assert_eq!(
            merge_outcome(Err(http(502, ""))).map_err(|e| e.kind),
            Err(ScmErrorKind::Transport)
        );
        assert_eq!(
            merge_outcome(Err(http(401, ""))).map_err(|e| e.kind),
            Err(ScmErrorKind::Auth)
        );
    }

    #[test]
    fn merge_request_fields() {
        let v = json!({"iid": 7, "state": "opened", "sha": "s1", "source_branch": "feat/x",
            "web_url": "https://gitlab.com/g/p/-/merge_requests/7", "labels": ["bug"],
            "detailed_merge_status": "mergeable", "has_conflicts": false,
            "merge_commit_sha": null, "squash_commit_sha": null});
        let i = info(&v);
        assert!(i.open && !i.merged);
        assert_eq!((i.mergeable, i.merge_commit_sha), (Some(true), None));
        assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), ("s1", "feat/x"));
        assert_eq!(i.labels, ["bug"]);
        let word = |w: &str| mergeable_of(&json!({"detailed_merge_status": w}));
        assert_eq!(word("conflict"), Some(false));
        assert_eq!(word("broken_status"), Some(false));
        assert_eq!(word("checking"), None);
        assert_eq!(word("need_rebase"), Some(false));
        for blocked in [
            "ci_must_pass",
            "ci_still_running",
            "discussions_not_resolved",
            "draft_status",
            "not_approved",
            "requested_changes",
            "not_open",
            "merge_request_blocked",
            "approvals_syncing",
            "preparing",
            "unchecked",
        ] {
            assert_eq!(word(blocked), None, "{blocked}");
        }
        let merged = info(&json!({"state": "merged", "squash_commit_sha": "q"}));
        assert!(merged.merged && !merged.open);
        assert_eq!(merged.merge_commit_sha.as_deref(), Some("q"));
    }

    #[test]
    fn label_events_keep_adds_and_removes() {
        let e = json!({"id": 1, "action": "add", "label": {"id": 3, "name": "sortie:fix"},
            "user": {"username": "al"}, "created_at": "2026-04-01T10:00:00.000Z"});
        let got = label_event(&e).unwrap_or_else(|| panic!("an event"));
        assert_eq!(
            (got.label.as_str(), got.actor.as_str(), got.added),
            ("sortie:fix", "al", true)
        );
        assert_eq!(got.created_at_ms, 1_775_037_600_000);
        assert_eq!(
            label_event(&json!({"action": "remove", "label": {"name": "x"}})).map(|e| e.added),
            Some(false)
        );
        assert!(label_event(&json!({"action": "add", "label": null})).is_none());
    }
}
