//! The vendor check itself (`tests/common/vendor_check.rs`): every exchange with the Gitea,
//! GitLab, Jira and Linear fakes is held against the vendor's own description, so the tracker,
//! contract and reaction tests over those fakes fail on a request the vendor does not accept or
//! an answer it would not give. These tests plant such violations and read what the check says,
//! so a clean run of the other tests means something (and a change of the checker's wording, or
//! a checker that checks nothing, cannot pass silently). They skip, as the fakes do, when the
//! checker is not installed outside CI.

mod common;

use common::fake_server::FakeServer;
use common::{fake_gitea, fake_gitlab, fake_jira, fake_linear, vendor_check};
use serde_json::json;

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build(),
    )
}

/// Sends `method url` with `auth` and, when given, a JSON `body`; the status.
fn send(url: &str, method: &str, auth: (&str, &str), body: Option<&str>) -> u16 {
    let a = agent();
    let resp = match (method, body) {
        ("GET", _) => a.get(url).header(auth.0, auth.1).call(),
        ("DELETE", _) => a.delete(url).header(auth.0, auth.1).call(),
        ("PUT", b) => a
            .put(url)
            .header(auth.0, auth.1)
            .header("Content-Type", "application/json")
            .send(b.unwrap_or("")),
        (_, b) => a
            .post(url)
            .header(auth.0, auth.1)
            .header("Content-Type", "application/json")
            .send(b.unwrap_or("")),
    };
    resp.map(|r| r.status().as_u16())
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
}

/// The fake's violations, or `None` when the checker is not installed (outside CI).
fn violations<S: Send + 'static>(fake: &FakeServer<S>) -> Option<String> {
    fake.is_checked()
        .then(|| fake.vendor_violations().join("\n"))
}

fn assert_says(found: &str, words: &[&str]) {
    for w in words {
        assert!(found.contains(w), "the check did not say {w:?}:\n{found}");
    }
}

#[test]
fn ci_has_the_checker() {
    // Panics when `CI` is set and the checker is missing; otherwise says why it skips.
    if let Some(addr) = vendor_check::checker() {
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    }
}

#[test]
fn gitea_requests_outside_the_description_are_reported_in_its_words() {
    let fake = fake_gitea::start(&["bug"]);
    fake.with_state(|s| s.add_pull(7, "feat/x", "s1", &[]));
    let repo = format!("{}/api/v1/repos/owner/repo", fake.url);
    let auth = ("Authorization", &*format!("token {}", fake_gitea::TOKEN));
    let auth = (auth.0, auth.1);
    send(
        &format!("{repo}/pulls/7/merge"),
        "POST",
        auth,
        Some(r#"{"Do": "merge"}"#),
    );
    send(&format!("{repo}/branches/feat/x"), "DELETE", auth, None);
    send(
        &format!("{repo}/pulls/7/reviews/1/comments?page=1&limit=50"),
        "GET",
        auth,
        None,
    );
    // Described requests leave nothing to report.
    send(&format!("{repo}/branches/feat%2Fx"), "DELETE", auth, None);
    let Some(found) = violations(&fake) else {
        return;
    };
    assert_says(
        &found,
        &[
            "POST /api/v1/repos/owner/repo/pulls/7/merge [request] body: Request body must have required property 'do'",
            "repoMergePullRequest: Merge a pull request",
            "DELETE /api/v1/repos/owner/repo/branches/feat/x [request]",
            "NO_PATH_MATCHED",
            "query parameter \"page\" is not declared by the operation",
            "repoGetPullReviewComments",
        ],
    );
    assert!(!found.contains("feat%2Fx"), "{found}");
    assert_eq!(
        found.lines().filter(|l| l.contains("[request]")).count(),
        4,
        "{found}"
    );
}

#[test]
fn gitea_answers_the_vendor_would_not_give_are_reported() {
    let fake = fake_gitea::start(&["bug"]);
    fake.with_state(|s| {
        s.add_pull(7, "feat/x", "s1", &[]);
        s.set_pull(7, "mergeable", json!("yes"));
        s.set_pull(7, "user", json!({"id": 1, "login": "al", "username": "al"}));
    });
    let auth = ("Authorization", &*format!("token {}", fake_gitea::TOKEN));
    let auth = (auth.0, auth.1);
    send(
        &format!("{}/api/v1/repos/owner/repo/pulls/7", fake.url),
        "GET",
        auth,
        None,
    );
    let Some(found) = violations(&fake) else {
        return;
    };
    assert_says(
        &found,
        &[
            "[answer] body.mergeable: Response body property mergeable must be boolean",
            "body.user.username: property \"username\" is not in the description's schema",
        ],
    );
}

#[test]
fn gitlab_violations_are_reported_and_documented_contradictions_excused() {
    let fake = fake_gitlab::start();
    fake.with_state(|s| s.add_issue(1, "One", &["bug"], false));
    let auth = ("PRIVATE-TOKEN", fake_gitlab::TOKEN);
    let issues = format!("{}{}/issues", fake.url, fake_gitlab::project_path());
    send(&format!("{issues}?state=bogus"), "GET", auth, None);
    send(&format!("{issues}/1/links?per_page=100"), "GET", auth, None);
    // `add_labels` as a comma-separated string: the description types an array, GitLab's
    // reference a string (allowlisted).
    send(
        &format!("{issues}/1"),
        "PUT",
        auth,
        Some(r#"{"add_labels": "a,b"}"#),
    );
    let Some(found) = violations(&fake) else {
        return;
    };
    assert_says(
        &found,
        &[
            "query.state: Request query parameter state must be equal to one of the allowed values: opened, closed, all",
            "query parameter \"per_page\" is not declared by the operation",
            "getApiV4ProjectsIdIssuesIssueIidLinks: List issue relations",
        ],
    );
    assert!(!found.contains("add_labels"), "{found}");
    assert_eq!(
        found.lines().filter(|l| l.contains("[request]")).count(),
        2,
        "{found}"
    );
}

#[test]
fn jira_violations_are_reported_in_its_words() {
    let fake = fake_jira::start();
    let key = fake.with_state(|s| s.add_issue(1, "One", "To Do"));
    let basic = data_encoding::BASE64
        .encode(format!("{}:{}", fake_jira::EMAIL, fake_jira::TOKEN).as_bytes());
    let auth = ("Authorization", &*format!("Basic {basic}"));
    let auth = (auth.0, auth.1);
    let issue = format!("{}/rest/api/3/issue/{key}", fake.url);
    send(
        &format!("{issue}/transitions"),
        "POST",
        auth,
        Some(r#"{"transition": 31}"#),
    );
    send(
        &format!("{issue}/comment?maxResults=many"),
        "GET",
        auth,
        None,
    );
    let Some(found) = violations(&fake) else {
        return;
    };
    assert_says(
        &found,
        &[
            "doTransition: Transition issue",
            "transition must be object",
            "query parameter maxresults must be integer",
        ],
    );
}

#[test]
fn linear_documents_variables_and_answers_are_checked_against_the_schema() {
    let fake = fake_linear::start();
    let url = format!("{}{}", fake.url, fake_linear::PATH);
    let auth = ("Authorization", fake_linear::TOKEN);
    let bad_field = json!({"query": "query SortieProbe { viewer { id nickname } }",
        "operationName": "SortieProbe"});
    let bad_var = json!({"query": "query SortieProbe($id: String!) { issue(id: $id) { id } }",
        "operationName": "SortieProbe", "variables": {"id": 7}});
    send(&url, "POST", auth, Some(&bad_field.to_string()));
    send(&url, "POST", auth, Some(&bad_var.to_string()));
    let Some(found) = violations(&fake) else {
        return;
    };
    assert_says(
        &found,
        &[
            "document: Cannot query field \"nickname\" on type \"User\"",
            "variables: Variable \"$id\" has invalid value",
        ],
    );
}
