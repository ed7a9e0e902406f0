//! Prompt templates: Go `text/template` syntax (via gotmpl) over the data map of
//! [`PromptData`], with Go's strictness (absent keys, fields of nil and unknown functions are
//! errors) and error lines that point into WORKFLOW.md.

mod balance;
mod data;
mod error;
mod functions;
mod lint;
mod locate;
mod reaction;
mod strict;
mod turn;
mod value;

use std::collections::BTreeMap;

use gotmpl::parse::{ListNode, Parser};
use gotmpl::{MissingKey, Template, TemplateError};

pub use data::{PromptData, RunInfo, StageValues};
pub use error::PromptError;
pub use lint::{PromptWarning, WarningKind, lint};
pub use reaction::{
    CheckRunContext, CiFailureContext, ReactionContext, ReviewCommentContext, sample_ci_failure,
    sample_review_comments,
};
pub use turn::{
    CONTINUATION_PROMPT, STATUS_PROTOCOL_SUFFIX, TurnContext, build_turn_prompt,
    build_turn_prompt_in, build_turn_prompt_with_reaction, build_turn_prompt_with_tools,
};

/// Go's name for the prompt template; also the key its body is executed under.
const MAIN: &str = "prompt";

/// Largest prompt template parsed: parsing takes a large multiple of the text in memory, so a
/// bigger body is refused with a clear error long before memory matters.
pub const MAX_TEMPLATE_BYTES: usize = 1024 * 1024;

/// An issue with every documented field present (parent, comments, blockers, labels,
/// priority), which `sortie validate` renders the template against.
pub fn sample_issue() -> crate::domain::Issue {
    use crate::domain::{BlockerRef, Comment, Issue, IssueRef};
    Issue {
        id: "10001".into(),
        identifier: "PROJ-1".into(),
        display_identifier: String::new(),
        title: "Sample issue".into(),
        description: "A representative issue used to check the prompt template.".into(),
        state: "To Do".into(),
        priority: Some(1),
        branch_name: "proj-1-sample-issue".into(),
        url: "https://tracker.example/PROJ-1".into(),
        assignee: "someone".into(),
        issue_type: "Task".into(),
        labels: vec!["sample".into()],
        parent: Some(IssueRef {
            id: "10000".into(),
            identifier: "PROJ-0".into(),
        }),
        comments: Some(vec![Comment {
            id: "1".into(),
            author: "someone".into(),
            body: "A comment.".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
        }]),
        blocked_by: vec![BlockerRef {
            id: "10002".into(),
            identifier: "PROJ-2".into(),
            state: "Done".into(),
        }],
        blockers_read: Default::default(),
        created_at: "2026-01-01T00:00:00Z".into(),
        updated_at: "2026-01-02T00:00:00Z".into(),
    }
}

/// A parsed, checked prompt template. Immutable and shareable across worker threads.
pub struct PromptTemplate {
    path: String,
    line_offset: usize,
    source: String,
    /// The body as parsed (for static analysis).
    parsed: ListNode,
    /// The body with strict field access.
    strict: ListNode,
    strict_defines: BTreeMap<String, ListNode>,
    engine: Template,
}

impl std::fmt::Debug for PromptTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptTemplate")
            .field("path", &self.path)
            .field("line_offset", &self.line_offset)
            .finish_non_exhaustive()
    }
}

impl Clone for PromptTemplate {
    fn clone(&self) -> Self {
        PromptTemplate {
            path: self.path.clone(),
            line_offset: self.line_offset,
            source: self.source.clone(),
            parsed: self.parsed.clone(),
            strict: self.strict.clone(),
            strict_defines: self.strict_defines.clone(),
            engine: build_engine(&self.strict, &self.strict_defines),
        }
    }
}

/// An executable template holding `main` as the prompt body next to the named definitions.
fn build_engine(main: &ListNode, defines: &BTreeMap<String, ListNode>) -> Template {
    let mut engine = Template::new(MAIN)
        .funcs(functions::function_map())
        .missing_key(MissingKey::Error);
    for (name, body) in defines {
        engine = engine.add_parse_tree(name, body.clone());
    }
    engine.add_parse_tree(MAIN, main.clone())
}

/// The message of an engine error without gotmpl's category prefix.
fn engine_message(err: &TemplateError) -> String {
    match err {
        TemplateError::Exec(message) => message.clone(),
        TemplateError::Parse { message, .. } | TemplateError::Lex { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    }
}

impl PromptTemplate {
    /// Parses `source` (the WORKFLOW.md body). `path_for_errors` and `line_offset` (the number of
    /// lines before the body, i.e. the front matter) make error lines point into the file.
    pub fn parse(
        source: &str,
        path_for_errors: &str,
        line_offset: usize,
    ) -> Result<PromptTemplate, PromptError> {
        let parse_error = |line: usize, message: String| PromptError::Parse {
            path: path_for_errors.to_string(),
            line: (line > 0).then_some(line + line_offset),
            message,
        };
        let engine_error = |err: TemplateError| match &err {
            TemplateError::Parse { line, .. } | TemplateError::Lex { line, .. } => {
                parse_error(*line, engine_message(&err))
            }
            _ => parse_error(0, engine_message(&err)),
        };
        if source.len() > MAX_TEMPLATE_BYTES {
            return Err(parse_error(
                0,
                format!(
                    "prompt template is too large: {} bytes (the limit is {MAX_TEMPLATE_BYTES} bytes)",
                    source.len()
                ),
            ));
        }
        let (parsed, parsed_defines) = Parser::with_name(Some(MAIN), source, "{{", "}}")
            .and_then(Parser::parse)
            .map_err(engine_error)?;
        if let Some((line, message)) = balance::block_imbalance(source) {
            return Err(parse_error(line, message));
        }

        let mut strict_defines = BTreeMap::new();
        for define in &parsed_defines {
            if let Some((line, name)) = strict::unknown_function(&define.body) {
                return Err(parse_error(
                    line,
                    format!("function \"{name}\" not defined"),
                ));
            }
            if define.name.as_str() == MAIN {
                return Err(parse_error(
                    define.pos.line,
                    format!("template name \"{MAIN}\" is reserved for the prompt body"),
                ));
            }
            // Go's rule: an empty redefinition is ignored, two non-empty ones are an error.
            let earlier_non_empty = strict_defines
                .get(define.name.as_str())
                .is_some_and(|p: &ListNode| !p.is_empty_tree());
            if earlier_non_empty {
                if define.body.is_empty_tree() {
                    continue;
                }
                return Err(parse_error(
                    define.pos.line,
                    format!("multiple definition of template \"{}\"", define.name),
                ));
            }
            strict_defines.insert(define.name.to_string(), strict::rewrite_list(&define.body));
        }
        if let Some((line, name)) = strict::unknown_function(&parsed) {
            return Err(parse_error(
                line,
                format!("function \"{name}\" not defined"),
            ));
        }
        let strict = strict::rewrite_list(&parsed);
        let engine = build_engine(&strict, &strict_defines);
        Ok(PromptTemplate {
            path: path_for_errors.to_string(),
            line_offset,
            source: source.to_string(),
            parsed,
            strict,
            strict_defines,
            engine,
        })
    }

    /// Renders the template. Errors name the failing line in the workflow file.
    pub fn render(&self, data: &PromptData<'_>) -> Result<String, PromptError> {
        let root = data.root_value();
        self.engine
            .execute_template_to_string(MAIN, &root)
            .map_err(|err| {
                let probe = |tree: &ListNode| {
                    build_engine(tree, &self.strict_defines)
                        .execute_template_to_string(MAIN, &root)
                        .is_err()
                };
                PromptError::Render {
                    path: self.path.clone(),
                    line: locate::failing_line(&self.strict, &probe).map(|l| l + self.line_offset),
                    message: engine_message(&err),
                }
            })
    }

    /// Renders against [`sample_issue`] as a first dispatch (turn 1), as a retried
    /// continuation (attempt 1, turn 2), and as a CI-fix and a review-fix run (attempt 1, turn
    /// 1, with [`sample_ci_failure`] / [`sample_review_comments`]), so a misspelled key or a
    /// field of nil is found before any issue is dispatched. The first failure is returned.
    pub fn check_render(&self) -> Result<(), PromptError> {
        let issue = sample_issue();
        let ci = sample_ci_failure();
        let review = sample_review_comments();
        for (attempt, turn, reaction) in [
            (None, 1, None),
            (Some(1), 2, None),
            (Some(1), 1, Some(&ci)),
            (Some(1), 1, Some(&review)),
        ] {
            self.render(&PromptData {
                issue: &issue,
                attempt,
                run: RunInfo::for_turn(turn, 3),
                reaction,
                stage: None,
            })?;
        }
        Ok(())
    }

    /// The template source as given to [`PromptTemplate::parse`].
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The path used in error messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn line_offset(&self) -> usize {
        self.line_offset
    }

    pub(crate) fn parsed(&self) -> &ListNode {
        &self.parsed
    }
}
