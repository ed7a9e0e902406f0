//! Golden render of a realistic prompt template: conditionals, ranges over labels, blockers and
//! comments, pipelines and every helper. Set `SORTIE_BLESS=1` to rewrite the golden files after
//! an intended change (then review the diff).

use std::path::PathBuf;

use sortie::domain::{BlockerRef, Comment, Issue, IssueRef};
use sortie::prompt::{PromptData, PromptTemplate, RunInfo};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/prompt")
        .join(name)
}

fn read(name: &str) -> String {
    match std::fs::read_to_string(fixture(name)) {
        Ok(s) => s,
        Err(e) => panic!("read {name}: {e}"),
    }
}

fn issue() -> Issue {
    Issue {
        blockers_read: Default::default(),
        id: "10001".into(),
        identifier: "PROJ-1".into(),
        display_identifier: String::new(),
        title: "Implement login".into(),
        description: "Add OAuth2 login flow.\nKeep the session cookie <secure> & HttpOnly.".into(),
        state: "To Do".into(),
        priority: Some(2),
        branch_name: "feature/PROJ-1".into(),
        url: "https://tracker.example.com/PROJ-1".into(),
        assignee: "alice".into(),
        issue_type: "Story".into(),
        labels: vec!["feature".into(), "auth".into()],
        parent: Some(IssueRef {
            id: "10000".into(),
            identifier: "PROJ-0".into(),
        }),
        comments: Some(vec![
            Comment {
                id: "c1".into(),
                author: "bob".into(),
                body: "Needs SSO support.".into(),
                created_at: "2026-03-01T10:00:00Z".into(),
            },
            Comment {
                id: "c2".into(),
                author: "carol".into(),
                body: "Use the existing session store.".into(),
                created_at: "2026-03-01T11:30:00Z".into(),
            },
        ]),
        blocked_by: vec![
            BlockerRef {
                id: "10002".into(),
                identifier: "PROJ-2".into(),
                state: "Done".into(),
            },
            BlockerRef {
                id: "10005".into(),
                identifier: "PROJ-5".into(),
                state: "In Progress".into(),
            },
        ],
        created_at: "2026-02-28T09:00:00Z".into(),
        updated_at: "2026-03-01T12:00:00Z".into(),
    }
}

fn check_golden(golden: &str, actual: &str) {
    if std::env::var_os("SORTIE_BLESS").is_some() {
        if let Err(e) = std::fs::write(fixture(golden), actual) {
            panic!("bless {golden}: {e}");
        }
        return;
    }
    let expected = read(golden);
    assert!(
        expected == actual,
        "render differs from {golden}\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

fn render(issue: &Issue, attempt: Option<u32>, turn: u32) -> String {
    let t = match PromptTemplate::parse(&read("realistic.tmpl"), "WORKFLOW.md", 7) {
        Ok(t) => t,
        Err(e) => panic!("realistic.tmpl should parse: {e}"),
    };
    let data = PromptData {
        issue,
        attempt,
        run: RunInfo::for_turn(turn, 5),
        reaction: None,
        stage: None,
    };
    match t.render(&data) {
        Ok(s) => s,
        Err(e) => panic!("realistic.tmpl should render: {e}"),
    }
}

#[test]
fn realistic_first_dispatch_matches_golden() {
    check_golden("realistic.first.golden", &render(&issue(), None, 1));
}

#[test]
fn realistic_retry_with_sparse_issue_matches_golden() {
    let sparse = Issue {
        description: String::new(),
        priority: None,
        assignee: String::new(),
        issue_type: String::new(),
        labels: vec!["bug".into()],
        parent: None,
        comments: None,
        blocked_by: Vec::new(),
        ..issue()
    };
    check_golden("realistic.retry.golden", &render(&sparse, Some(2), 1));
}

#[test]
fn realistic_continuation_turn_matches_golden() {
    let no_comments = Issue {
        comments: Some(Vec::new()),
        ..issue()
    };
    check_golden(
        "realistic.continuation.golden",
        &render(&no_comments, Some(1), 3),
    );
}
