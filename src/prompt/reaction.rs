//! The pull-request reaction a run continues, as templates see it: `.ci_failure` for a CI fix,
//! `.review_comments` for a review fix. Each stays nil on every other run, so a template
//! guards its reaction section with `{{ if .ci_failure }}` / `{{ with .review_comments }}`.

use gotmpl::Value;
use serde::{Deserialize, Serialize};

use crate::domain::CiStatus;

/// One check run of the failing head (`.ci_failure.check_runs[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRunContext {
    pub name: String,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    /// The forge's conclusion; empty while the run has none.
    pub conclusion: String,
    pub details_url: String,
}

/// `.ci_failure`: the verdict that started a CI-fix run. Logs are given to the run, never
/// persisted or served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiFailureContext {
    pub status: CiStatus,
    pub check_runs: Vec<CheckRunContext>,
    /// The tail of the first failing job's log; empty when none was read.
    pub log_excerpt: String,
    pub failing_count: u32,
    /// The ref that was checked (the head sha, else the branch); the template key is `ref`.
    #[serde(rename = "ref")]
    pub git_ref: String,
}

/// One comment of `.review_comments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewCommentContext {
    pub id: String,
    /// The file it is on; empty for a review's own body.
    pub file: String,
    pub start_line: u64,
    /// 0 when the comment is on one line.
    pub end_line: u64,
    /// The author's login.
    pub reviewer: String,
    pub body: String,
}

/// The reaction context of a run that continues a pull-request reaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReactionContext {
    CiFailure(CiFailureContext),
    ReviewComments(Vec<ReviewCommentContext>),
}

use super::value::{map, text};

fn int(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn check_run_value(c: &CheckRunContext) -> Value {
    map(vec![
        ("name", text(&c.name)),
        ("status", text(&c.status)),
        ("conclusion", text(&c.conclusion)),
        ("details_url", text(&c.details_url)),
    ])
}

impl CiFailureContext {
    fn value(&self) -> Value {
        map(vec![
            ("status", text(self.status.as_str())),
            (
                "check_runs",
                Value::List(self.check_runs.iter().map(check_run_value).collect()),
            ),
            ("log_excerpt", text(&self.log_excerpt)),
            ("failing_count", int(u64::from(self.failing_count))),
            ("ref", text(&self.git_ref)),
        ])
    }
}

impl ReviewCommentContext {
    fn value(&self) -> Value {
        map(vec![
            ("id", text(&self.id)),
            ("file", text(&self.file)),
            ("start_line", int(self.start_line)),
            ("end_line", int(self.end_line)),
            ("reviewer", text(&self.reviewer)),
            ("body", text(&self.body)),
        ])
    }
}

/// The `(ci_failure, review_comments)` root values of a render: the matching one from
/// `reaction`, nil for the other and for a run that continues no reaction.
pub(crate) fn root_values(reaction: Option<&ReactionContext>) -> (Value, Value) {
    match reaction {
        Some(ReactionContext::CiFailure(c)) => (c.value(), Value::Nil),
        Some(ReactionContext::ReviewComments(list)) => (
            Value::Nil,
            Value::List(list.iter().map(ReviewCommentContext::value).collect()),
        ),
        None => (Value::Nil, Value::Nil),
    }
}

/// A failing CI verdict with every member set, which `sortie validate` renders against.
pub fn sample_ci_failure() -> ReactionContext {
    ReactionContext::CiFailure(CiFailureContext {
        status: CiStatus::Failing,
        check_runs: vec![
            CheckRunContext {
                name: "test".into(),
                status: "completed".into(),
                conclusion: "failure".into(),
                details_url: "https://forge.example/checks/1".into(),
            },
            CheckRunContext {
                name: "lint".into(),
                status: "completed".into(),
                conclusion: "success".into(),
                details_url: "https://forge.example/checks/2".into(),
            },
        ],
        log_excerpt: "error: test failed".into(),
        failing_count: 1,
        git_ref: "0123456789abcdef0123456789abcdef01234567".into(),
    })
}

/// Review comments with every member set (one inline range, one review body).
pub fn sample_review_comments() -> ReactionContext {
    ReactionContext::ReviewComments(vec![
        ReviewCommentContext {
            id: "301".into(),
            file: "src/lib.rs".into(),
            start_line: 10,
            end_line: 12,
            reviewer: "someone".into(),
            body: "Please handle the error here.".into(),
        },
        ReviewCommentContext {
            id: "review-10".into(),
            file: String::new(),
            start_line: 0,
            end_line: 0,
            reviewer: "someone".into(),
            body: "A few things to fix.".into(),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::super::{PromptData, PromptTemplate, RunInfo, sample_issue};
    use super::*;

    fn render(src: &str, reaction: Option<&ReactionContext>) -> Result<String, String> {
        let t = PromptTemplate::parse(src, "WORKFLOW.md", 0).map_err(|e| e.to_string())?;
        let issue = sample_issue();
        t.render(&PromptData {
            issue: &issue,
            attempt: Some(1),
            run: RunInfo::for_turn(1, 3),
            reaction,
            stage: None,
        })
        .map_err(|e| e.to_string())
    }

    const CI: &str = "{{ with .ci_failure }}{{ .status }} {{ .ref }} {{ .failing_count }} \
        {{ range .check_runs }}[{{ .name }} {{ .status }} {{ .conclusion }} {{ .details_url }}]{{ end }} \
        {{ .log_excerpt }}{{ end }}{{ if .review_comments }}review{{ end }}";

    const REVIEW: &str = "{{ if .ci_failure }}ci{{ end }}{{ range .review_comments }}\
        <{{ .id }} {{ .file }}:{{ .start_line }}-{{ .end_line }} {{ .reviewer }}: {{ .body }}>{{ end }}";

    #[test]
    fn ci_failure_renders_only_on_a_ci_fix_run() {
        let ci = sample_ci_failure();
        assert_eq!(
            render(CI, Some(&ci)).unwrap(),
            "failing 0123456789abcdef0123456789abcdef01234567 1 \
             [test completed failure https://forge.example/checks/1]\
             [lint completed success https://forge.example/checks/2] error: test failed"
        );
        assert_eq!(render(CI, None).unwrap(), "");
        assert_eq!(
            render(CI, Some(&sample_review_comments())).unwrap(),
            "review"
        );
    }

    #[test]
    fn review_comments_render_only_on_a_review_fix_run() {
        let review = sample_review_comments();
        assert_eq!(
            render(REVIEW, Some(&review)).unwrap(),
            "<301 src/lib.rs:10-12 someone: Please handle the error here.>\
             <review-10 :0-0 someone: A few things to fix.>"
        );
        assert_eq!(render(REVIEW, None).unwrap(), "");
        assert_eq!(render(REVIEW, Some(&sample_ci_failure())).unwrap(), "ci");
    }

    #[test]
    fn check_render_finds_a_misspelled_reaction_key() {
        let good = PromptTemplate::parse(CI, "WORKFLOW.md", 0).unwrap();
        assert!(good.check_render().is_ok());
        let good = PromptTemplate::parse(REVIEW, "WORKFLOW.md", 0).unwrap();
        assert!(good.check_render().is_ok());
        for bad in [
            "{{ with .ci_failure }}{{ .log_excerp }}{{ end }}",
            "{{ if .ci_failure }}{{ .ci_failure.log_excerp }}{{ end }}",
            "{{ range .review_comments }}{{ .author }}{{ end }}",
        ] {
            let t = PromptTemplate::parse(bad, "WORKFLOW.md", 0).unwrap();
            assert!(t.check_render().is_err(), "{bad}");
        }
    }
}
