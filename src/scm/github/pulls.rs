//! The pull request itself: its read, the guarded merge, the head branch's deletion, and its
//! labels (events and removal; a pull request is an issue for GitHub's label API).

use serde_json::{Value, json};

use super::api::Api;
use super::error::{own, scm_error};
use crate::http_client::{HttpError, Method, Request, absent_is_ok, encode};
use crate::scm::http_error::kind_of;
use crate::scm::{
    LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef, ScmErrorKind,
    ScmResult,
};

/// Pages of issue events read (100 each).
const EVENT_PAGE_CAP: usize = 20;

fn pulls_path(pr: &PullRequestRef) -> String {
    format!("{}/pulls/{}", Api::repo_path(pr), pr.number)
}

fn issue_path(pr: &PullRequestRef) -> String {
    format!("{}/issues/{}", Api::repo_path(pr), pr.number)
}

/// A pull request as GitHub serves it.
pub fn info(v: &Value) -> PullRequestInfo {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    PullRequestInfo {
        open: v["state"].as_str() == Some("open"),
        merged: v["merged"].as_bool().unwrap_or(false),
        merge_commit_sha: v["merge_commit_sha"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from),
        mergeable: v["mergeable"].as_bool(),
        mergeable_state: s(&v["mergeable_state"]),
        head_sha: s(&v["head"]["sha"]),
        head_ref: s(&v["head"]["ref"]),
        url: s(&v["html_url"]),
        labels: v["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["name"].as_str().map(String::from))
            .collect(),
    }
}

pub fn read(api: &Api, pr: &PullRequestRef) -> ScmResult<PullRequestInfo> {
    let v = api
        .get_cached(&pulls_path(pr), &[])
        .map_err(|e| scm_error(&e))?;
    if v["number"].as_u64().is_none() {
        return Err(own(
            ScmErrorKind::Payload,
            format!("GET {}: no pull request in the answer", pulls_path(pr)),
        ));
    }
    Ok(info(&v))
}

/// The message GitHub gave with a refusal.
fn message_of(e: &HttpError) -> String {
    e.detail.clone()
}

/// What a merge answer means: 200 merged; 405 not mergeable; 409 the head moved; 403 (not a
/// rate limit) and 422 refused; anything else is an error.
pub fn merge_outcome(result: Result<Value, HttpError>) -> ScmResult<MergeOutcome> {
    match result {
        Ok(body) if body["merged"].as_bool() == Some(false) => Ok(MergeOutcome::NotMergeable(
            body["message"].as_str().unwrap_or("not merged").to_string(),
        )),
        Ok(body) => Ok(MergeOutcome::Merged {
            sha: body["sha"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(String::from),
        }),
        Err(e) => match (e.status, kind_of(&e)) {
            (Some(405), _) => Ok(MergeOutcome::NotMergeable(message_of(&e))),
            (Some(409), _) => Ok(MergeOutcome::HeadMoved),
            (Some(403), ScmErrorKind::Auth) | (Some(422), _) => {
                Ok(MergeOutcome::Refused(message_of(&e)))
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
    let body = json!({"merge_method": strategy.as_str(), "sha": head_sha});
    let req = Request::new(Method::Put, format!("{}/merge", pulls_path(pr))).json(&body);
    merge_outcome(api.send(req).and_then(|r| {
        if r.body.is_empty() {
            Ok(Value::Null)
        } else {
            r.json()
        }
    }))
}

/// `heads/<branch>` with each path segment encoded (branch names may hold `/`).
fn ref_path(branch: &str) -> String {
    branch.split('/').map(encode).collect::<Vec<_>>().join("/")
}

pub fn delete_branch(api: &Api, pr: &PullRequestRef, branch: &str) -> ScmResult<()> {
    if branch.trim().is_empty() {
        return Err(own(ScmErrorKind::Payload, "no branch to delete"));
    }
    let path = format!("{}/git/refs/heads/{}", Api::repo_path(pr), ref_path(branch));
    match api.send(Request::new(Method::Delete, path)) {
        Ok(_) => Ok(()),
        // GitHub answers 422 "Reference does not exist" for a branch already gone.
        Err(e) if e.status == Some(422) => Ok(()),
        Err(e) => Err(scm_error(&e)),
    }
}

/// A `labeled` or `unlabeled` event; `None` for any other event.
pub fn label_event(v: &Value) -> Option<LabelEvent> {
    let added = match v["event"].as_str()? {
        "labeled" => true,
        "unlabeled" => false,
        _ => return None,
    };
    Some(LabelEvent {
        label: v["label"]["name"].as_str()?.to_string(),
        actor: v["actor"]["login"].as_str().unwrap_or("").to_string(),
        created_at_ms: crate::clock::epoch_ms_of(&v["created_at"]),
        added,
    })
}

pub fn label_events(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
    let events = api
        .list(
            Request::get(format!("{}/events", issue_path(pr))),
            EVENT_PAGE_CAP,
            "issue events",
            |v| match v {
                Value::Array(items) => Some(items),
                _ => None,
            },
        )
        .map_err(|e| scm_error(&e))?;
    let mut out: Vec<LabelEvent> = events.iter().filter_map(label_event).collect();
    out.sort_by_key(|e| e.created_at_ms);
    Ok(out)
}

pub fn remove_label(api: &Api, pr: &PullRequestRef, label: &str) -> ScmResult<()> {
    let path = format!("{}/labels/{}", issue_path(pr), encode(label));
    absent_is_ok(api.send(Request::new(Method::Delete, path))).map_err(|e| scm_error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, headers: &[(&str, &str)], body: &str) -> HttpError {
        let h: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut e = HttpError::new(
            crate::http_client::classify(status, &h, body.as_bytes()),
            "PUT",
            "/m",
            format!("status {status}: {body}"),
        );
        e.status = Some(status);
        e.headers = h;
        e
    }

    #[test]
    fn merge_answers() {
        let merged = merge_outcome(Ok(json!({"sha": "abc", "merged": true})));
        assert_eq!(
            merged,
            Ok(MergeOutcome::Merged {
                sha: Some("abc".into())
            })
        );
        let not = merge_outcome(Err(http(405, &[], "Pull Request is not mergeable")));
        assert!(matches!(not, Ok(MergeOutcome::NotMergeable(m)) if m.contains("not mergeable")));
        assert_eq!(
            merge_outcome(Err(http(409, &[], "Head branch was modified"))),
            Ok(MergeOutcome::HeadMoved)
        );
        assert!(matches!(
            merge_outcome(Err(http(403, &[], "forbidden"))),
            Ok(MergeOutcome::Refused(_))
        ));
        assert!(matches!(
            merge_outcome(Err(http(422, &[], "invalid"))),
            Ok(MergeOutcome::Refused(_))
        ));
        let limited = merge_outcome(Err(http(403, &[("x-ratelimit-remaining", "0")], "")));
        assert_eq!(limited.map_err(|e| e.kind), Err(ScmErrorKind::RateLimited));
        let down = merge_outcome(Err(http(502, &[], "")));
        assert_eq!(down.map_err(|e| e.kind), Err(ScmErrorKind::Transport));
        assert_eq!(
            merge_outcome(Err(http(401, &[], ""))).map_err(|e| e.kind),
            Err(ScmErrorKind::Auth)
        );
    }

    #[test]
    fn pull_request_fields() {
        let v = json!({"number": 7, "state": "open", "merged": false, "merge_commit_sha": null,
            "mergeable": null, "mergeable_state": "unknown", "head": {"sha": "s1", "ref": "feat/x"},
            "html_url": "https://github.com/o/r/pull/7", "labels": [{"name": "bug"}]});
        let i = info(&v);
        assert!(i.open && !i.merged);
        assert_eq!((i.mergeable, i.merge_commit_sha), (None, None));
        assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), ("s1", "feat/x"));
        assert_eq!(i.labels, ["bug"]);
        assert_eq!(info(&json!({"mergeable": false})).mergeable, Some(false));
        assert_eq!(ref_path("feat/a b"), "feat/a%20b");
    }

    #[test]
    fn label_events_keep_only_labels() {
        let e = json!({"event": "labeled", "label": {"name": "sortie:fix"}, "actor": {"login": "al"},
            "created_at": "2026-04-01T10:00:00Z"});
        let got = label_event(&e).unwrap_or_else(|| panic!("an event"));
        assert_eq!(
            (got.label.as_str(), got.actor.as_str(), got.added),
            ("sortie:fix", "al", true)
        );
        assert_eq!(got.created_at_ms, 1_775_037_600_000);
        assert!(label_event(&json!({"event": "closed"})).is_none());
        assert_eq!(
            label_event(&json!({"event": "unlabeled", "label": {"name": "x"}})).map(|e| e.added),
            Some(false)
        );
    }
}
