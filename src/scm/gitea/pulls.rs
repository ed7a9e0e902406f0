//! The pull request itself: its read, the guarded merge, the head branch's deletion, and its
//! labels (label events from the issue timeline, removal by label id).

use serde_json::{Value, json};

use super::api::{Api, epoch_ms, own, scm_error};
use crate::http_client::{ErrorClass, HttpError, Method, Request, absent_is_ok, encode};
use crate::scm::{
    LabelEvent, MergeOutcome, MergeStrategy, PullRequestInfo, PullRequestRef, ScmErrorKind,
    ScmResult,
};

/// Pages of timeline events read (50 each).
const TIMELINE_PAGE_CAP: usize = 20;

/// Title prefixes Gitea treats as work in progress (its default `WORK_IN_PROGRESS_PREFIXES`).
const WIP_PREFIXES: &[&str] = &["WIP:", "[WIP]"];

/// Whether Gitea holds the pull request as a draft: the `draft` flag of newer versions, else a
/// work-in-progress title prefix.
pub fn is_draft(v: &Value) -> bool {
    if v["draft"].as_bool() == Some(true) {
        return true;
    }
    let title = v["title"]
        .as_str()
        .unwrap_or("")
        .trim_start()
        .to_uppercase();
    WIP_PREFIXES.iter().any(|p| title.starts_with(p))
}

/// `mergeable` as the trait's: Gitea's flag is false for a conflict, a failed check, a draft
/// and while the conflict check still runs (the API has no word for which). A draft reads as
/// not decided (`None`: nothing a rebase would fix), as does a pull request that is not open;
/// otherwise false is a conflict. `mergeable_state` gives the reading: `clean`, `dirty`,
/// `draft`, `merged` or `closed`.
pub fn mergeability(v: &Value) -> (Option<bool>, &'static str) {
    if v["merged"].as_bool() == Some(true) {
        return (None, "merged");
    }
    if v["state"].as_str() != Some("open") {
        return (None, "closed");
    }
    if is_draft(v) {
        return (None, "draft");
    }
    match v["mergeable"].as_bool() {
        Some(true) => (Some(true), "clean"),
        Some(false) => (Some(false), "dirty"),
        None => (None, "unknown"),
    }
}

/// A pull request as Gitea serves it.
pub fn info(v: &Value) -> PullRequestInfo {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let merged = v["merged"].as_bool() == Some(true);
    let (mergeable, word) = mergeability(v);
    PullRequestInfo {
        open: v["state"].as_str() == Some("open") && !merged,
        merged,
        merge_commit_sha: v["merge_commit_sha"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from),
        mergeable,
        mergeable_state: word.to_string(),
        head_sha: s(&v["head"]["sha"]),
        head_ref: s(&v["head"]["ref"]),
        url: s(&v["html_url"]),
        labels: label_names(v),
    }
}

fn label_names(v: &Value) -> Vec<String> {
    v["labels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["name"].as_str().map(String::from))
        .collect()
}

fn get_pull(api: &Api, pr: &PullRequestRef) -> ScmResult<Value> {
    let v = api
        .get_object(Request::get(Api::pull_path(pr)))
        .map_err(|e| scm_error(&e))?;
    if v["number"].as_u64().is_none() {
        return Err(own(
            ScmErrorKind::Payload,
            format!("GET {}: no pull request in the answer", Api::pull_path(pr)),
        ));
    }
    Ok(v)
}

pub fn read(api: &Api, pr: &PullRequestRef) -> ScmResult<PullRequestInfo> {
    get_pull(api, pr).map(|v| info(&v))
}

/// Gitea's merge style word for a strategy.
pub fn merge_style(strategy: MergeStrategy) -> &'static str {
    match strategy {
        MergeStrategy::Merge => "merge",
        MergeStrategy::Squash => "squash",
        MergeStrategy::Rebase => "rebase",
    }
}

/// What a merge answer means (`repoMergePullRequest`): 200 merged; 405 (not allowed now:
/// checks, approvals, draft, still checking, style not allowed) and 404 (closed) not
/// mergeable; 409 the head guard refused ("head out of date") or a conflict, push rejection
/// or unrelated histories (not mergeable); 403 (not a rate limit), 422 and 423 (archived)
/// refused; anything else is an error.
pub fn merge_outcome(result: Result<(), HttpError>) -> ScmResult<MergeOutcome> {
    let Err(e) = result else {
        return Ok(MergeOutcome::Merged { sha: None });
    };
    match (e.status, e.class) {
        (Some(409), _) if e.detail.contains("head out of date") => Ok(MergeOutcome::HeadMoved),
        (Some(404 | 405 | 409), _) => Ok(MergeOutcome::NotMergeable(e.detail.clone())),
        (Some(403), ErrorClass::Auth) | (Some(422 | 423), _) => {
            Ok(MergeOutcome::Refused(e.detail.clone()))
        }
        _ => Err(scm_error(&e)),
    }
}

/// The body of `repoMergePullRequest`: the style as `do`, the key Gitea's description requires
/// since 1.21 (earlier descriptions spelled it `Do`; every version decodes the form's keys
/// without regard to case, so `do` is accepted by old and new servers alike), and
/// `head_commit_id` as the guard.
pub fn merge_body(strategy: MergeStrategy, head_sha: &str) -> Value {
    json!({"do": merge_style(strategy), "head_commit_id": head_sha,
        "delete_branch_after_merge": false})
}

/// Merges with `head_commit_id` as the guard; a merged answer is followed by a read for the
/// merge commit (Gitea's merge answer is empty), which may fail without undoing the merge.
pub fn merge(
    api: &Api,
    pr: &PullRequestRef,
    strategy: MergeStrategy,
    head_sha: &str,
) -> ScmResult<MergeOutcome> {
    let body = merge_body(strategy, head_sha);
    let req = Request::new(Method::Post, format!("{}/merge", Api::pull_path(pr))).json(&body);
    let outcome = merge_outcome(api.send(req).map(drop))?;
    if !matches!(outcome, MergeOutcome::Merged { .. }) {
        return Ok(outcome);
    }
    let sha = match get_pull(api, pr) {
        Ok(v) => info(&v).merge_commit_sha,
        Err(e) => {
            log::warn!(
                repository:% = pr.repository(),
                number:% = pr.number,
                error:% = e;
                "merge commit not read"
            );
            None
        }
    };
    Ok(MergeOutcome::Merged { sha })
}

/// `DELETE /repos/R/branches/{branch}` with the whole name as one encoded segment (`sortie/1`
/// as `sortie%2F1`): the description's `{branch}` is a single path segment, and Gitea, which
/// routes `/branches/*` and unescapes the parameter, reads the same branch from either form. A
/// branch already gone is `Ok`.
pub fn delete_branch(api: &Api, pr: &PullRequestRef, branch: &str) -> ScmResult<()> {
    if branch.trim().is_empty() {
        return Err(own(ScmErrorKind::Payload, "no branch to delete"));
    }
    let path = format!("{}/branches/{}", Api::repo_path(pr), encode(branch));
    absent_is_ok(api.send(Request::new(Method::Delete, path))).map_err(|e| scm_error(&e))
}

/// A timeline entry of type `label` as a label event: Gitea records an added label with body
/// `1` and a removed one with an empty body. `None` for other entries.
pub fn label_event(v: &Value) -> Option<LabelEvent> {
    if v["type"].as_str()? != "label" {
        return None;
    }
    Some(LabelEvent {
        label: v["label"]["name"].as_str()?.to_string(),
        actor: v["user"]["login"].as_str().unwrap_or("").to_string(),
        created_at_ms: epoch_ms(&v["created_at"]),
        added: v["body"].as_str() == Some("1"),
    })
}

pub fn label_events(api: &Api, pr: &PullRequestRef) -> ScmResult<Vec<LabelEvent>> {
    let req = Request::get(format!("{}/timeline", Api::issue_path(pr)));
    let entries = api
        .list(req, TIMELINE_PAGE_CAP, "timeline")
        .map_err(|e| scm_error(&e))?;
    let mut out: Vec<LabelEvent> = entries.iter().filter_map(label_event).collect();
    out.sort_by_key(|e| e.created_at_ms);
    Ok(out)
}

/// Removes a label by the id the pull request's own label list gives (every Gitea version
/// takes ids); a label it does not carry, or one removed meanwhile (404), is `Ok`.
pub fn remove_label(api: &Api, pr: &PullRequestRef, label: &str) -> ScmResult<()> {
    let v = get_pull(api, pr)?;
    let id = v["labels"].as_array().into_iter().flatten().find_map(|l| {
        let name = l["name"].as_str()?;
        name.eq_ignore_ascii_case(label).then(|| l["id"].as_u64())?
    });
    let Some(id) = id else {
        return Ok(());
    };
    let path = format!("{}/labels/{id}", Api::issue_path(pr));
    absent_is_ok(api.send(Request::new(Method::Delete, path))).map_err(|e| scm_error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> HttpError {
        let mut e = HttpError::new(
            crate::http_client::classify(status, &[], body.as_bytes()),
            "POST",
            "/m",
            format!("status {status}: {body}"),
        );
        e.status = Some(status);
        e
    }

    #[test]
    fn the_merge_body_says_do_in_lower_case() {
        let body = merge_body(MergeStrategy::Squash, "s1");
        assert_eq!(body["do"], "squash");
        assert!(body.get("Do").is_none());
        assert_eq!(body["head_commit_id"], "s1");
    }

    #[test]
    fn merge_answers() {
        assert_eq!(
            merge_outcome(Ok(())),
            Ok(MergeOutcome::Merged { sha: None })
        );
        assert_eq!(
            merge_outcome(Err(http(409, r#"{"message":"head out of date"}"#))),
            Ok(MergeOutcome::HeadMoved)
        );
        for (s, body) in [
            (405, "Please try again later"),
            (409, "merge conflict"),
            (404, ""),
        ] {
            assert!(
                matches!(
                    merge_outcome(Err(http(s, body))),
                    Ok(MergeOutcome::NotMergeable(_))
                ),
                "{s}"
            );
        }
        for s in [422, 423] {
            assert!(matches!(
                merge_outcome(Err(http(s, "x"))),
                Ok(MergeOutcome::Refused(_))
            ));
        }
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
    fn pull_request_fields_and_mergeability() {
        let v = json!({"number": 7, "state": "open", "merged": false, "mergeable": true,
            "title": "Fix it", "head": {"ref": "feat/x", "sha": "s1"},
            "html_url": "https://g/o/r/pulls/7", "labels": [{"id": 3, "name": "bug"}],
            "merge_commit_sha": null});
        let i = info(&v);
        assert!(i.open && !i.merged);
        assert_eq!(
            (i.mergeable, i.mergeable_state.as_str()),
            (Some(true), "clean")
        );
        assert_eq!((i.head_sha.as_str(), i.head_ref.as_str()), ("s1", "feat/x"));
        assert_eq!(i.labels, ["bug"]);
        let with = |key: &str, val: Value| {
            let mut x = v.clone();
            x[key] = val;
            mergeability(&x)
        };
        assert_eq!(with("mergeable", json!(false)), (Some(false), "dirty"));
        assert_eq!(with("title", json!("WIP: Fix it")).0, None);
        assert_eq!(with("title", json!("[wip] Fix it")).0, None);
        assert_eq!(with("draft", json!(true)), (None, "draft"));
        assert_eq!(with("state", json!("closed")), (None, "closed"));
        let merged = info(&json!({"number": 7, "state": "closed", "merged": true,
            "merge_commit_sha": "m1"}));
        assert!(merged.merged && !merged.open);
        assert_eq!(merged.merge_commit_sha.as_deref(), Some("m1"));
    }

    #[test]
    fn timeline_label_entries_become_events() {
        let e = json!({"id": 1, "type": "label", "body": "1", "label": {"id": 3, "name": "sortie:fix"},
            "user": {"login": "al"}, "created_at": "2026-04-01T10:00:00Z"});
        let got = label_event(&e).unwrap_or_else(|| panic!("an event"));
        assert_eq!(
            (got.label.as_str(), got.actor.as_str(), got.added),
            ("sortie:fix", "al", true)
        );
        assert_eq!(got.created_at_ms, 1_775_037_600_000);
        let mut removed = e.clone();
        removed["body"] = json!("");
        assert_eq!(label_event(&removed).map(|e| e.added), Some(false));
        assert!(label_event(&json!({"type": "comment", "body": "1"})).is_none());
    }
}
