//! Turn prompt assembly (status suffix, continuation fallback) and `sortie validate` lint.

use sortie::domain::Issue;
use sortie::prompt::{
    CONTINUATION_PROMPT, PromptTemplate, STATUS_PROTOCOL_SUFFIX, WarningKind, build_turn_prompt,
    build_turn_prompt_with_tools, lint,
};

fn issue() -> Issue {
    Issue {
        id: "1".into(),
        identifier: "PROJ-1".into(),
        title: "Fix it".into(),
        state: "To Do".into(),
        ..Issue::default()
    }
}

fn parse(src: &str, offset: usize) -> PromptTemplate {
    match PromptTemplate::parse(src, "WORKFLOW.md", offset) {
        Ok(t) => t,
        Err(e) => panic!("template should parse: {e}"),
    }
}

fn turn(t: &PromptTemplate, attempt: Option<u32>, n: u32, tools: Option<&str>) -> String {
    match build_turn_prompt_with_tools(t, &issue(), attempt, n, 4, tools) {
        Ok(s) => s,
        Err(e) => panic!("turn {n} should build: {e}"),
    }
}

#[test]
fn first_turn_appends_the_status_protocol() {
    let t = parse("Work on {{ .issue.identifier }}.", 0);
    let first = build_turn_prompt(&t, &issue(), None, 1, 4);
    assert_eq!(
        first.ok(),
        Some(format!("Work on PROJ-1.\n\n{STATUS_PROTOCOL_SUFFIX}"))
    );
}

#[test]
fn first_turn_puts_tools_before_the_status_protocol() {
    let t = parse("Work.", 0);
    assert_eq!(
        turn(&t, None, 1, Some("## Tools\n- tracker_api")),
        format!("Work.\n\n## Tools\n- tracker_api\n\n{STATUS_PROTOCOL_SUFFIX}")
    );
}

#[test]
fn empty_first_turn_render_gets_only_the_suffix() {
    let t = parse("{{ if .run.is_continuation }}more{{ end }}", 0);
    assert_eq!(
        turn(&t, None, 1, None),
        format!("\n\n{STATUS_PROTOCOL_SUFFIX}")
    );
}

#[test]
fn continuation_turns_render_without_suffix_or_fall_back() {
    let t = parse(
        "{{ if .run.is_continuation }}Turn {{ .run.turn_number }}/{{ .run.max_turns }}, attempt {{ .attempt }}{{ else }}Start{{ end }}",
        0,
    );
    assert_eq!(turn(&t, Some(2), 2, Some("tools")), "Turn 2/4, attempt 2");

    let first_only = parse(
        "{{ if not .run.is_continuation }}Full task text{{ end }}\n  \n",
        0,
    );
    assert_eq!(turn(&first_only, None, 2, None), CONTINUATION_PROMPT);
    assert_eq!(turn(&first_only, None, 4, None), CONTINUATION_PROMPT);
    assert!(turn(&first_only, None, 1, None).starts_with("Full task text\n"));
}

#[test]
fn render_errors_propagate_from_every_turn() {
    let t = parse(
        "ok\n{{ if .run.is_continuation }}{{ .run.turn_numbr }}{{ end }}",
        3,
    );
    assert!(build_turn_prompt(&t, &issue(), None, 1, 4).is_ok());
    let e = build_turn_prompt(&t, &issue(), None, 2, 4).err();
    assert_eq!(
        e.map(|e| e.to_string()).as_deref(),
        Some(
            "template render error in WORKFLOW.md (line 5): map has no entry for key \"turn_numbr\" (in .run.turn_numbr)"
        )
    );
}

#[test]
fn status_suffix_names_every_token_and_the_statement() {
    for needle in [
        ".sortie/status",
        "mkdir -p .sortie",
        "`blocked`",
        "`needs-human-review`",
        "`no-change-needed`",
        "Line 1",
        "statement",
        "Do not write this file during normal work",
    ] {
        assert!(
            STATUS_PROTOCOL_SUFFIX.contains(needle),
            "suffix lacks {needle:?}"
        );
    }
    assert!(!CONTINUATION_PROMPT.trim().is_empty());
}

#[test]
fn lint_accepts_a_clean_template() {
    let t = parse(
        "{{ .issue.title }} {{ .attempt }} {{ .run.turn_number }} {{ .issue.parent.identifier }}\n{{ range .issue.comments }}{{ .body }} {{ $.issue.identifier }}{{ end }}{{ with .ci_failure }}{{ .log_excerpt }}{{ end }}{{ if .review_comments }}r{{ end }}",
        0,
    );
    assert_eq!(lint(&t), Vec::new());
}

#[test]
fn lint_reports_each_check_with_file_lines() {
    let src = "{{ .issue.title }}\n{{ .isue.title }}\n{{ .issue.titel }}\n{{ .run.turn }}\n{{ .attempt.count }}\n{{ .issue.parent.name }}\n{{ range .issue.labels }}{{ .issue.identifier }}{{ end }}\n{{ $.ci_failure.nope }}\n{{ .ci_failure.log_excerpt }}";
    let warnings = lint(&parse(src, 10));
    let got: Vec<(WarningKind, usize)> = warnings.iter().map(|w| (w.kind, w.line)).collect();
    assert_eq!(
        got,
        vec![
            (WarningKind::UnknownVar, 12),
            (WarningKind::UnknownField, 13),
            (WarningKind::UnknownField, 14),
            (WarningKind::UnknownField, 15),
            (WarningKind::UnknownField, 16),
            (WarningKind::DotContext, 17),
            (WarningKind::UnknownField, 18),
        ],
        "{warnings:#?}"
    );
    assert!(warnings[0].message.contains("\"isue\""));
    assert!(warnings[1].message.contains("\"titel\""));
    assert!(warnings[5].message.contains("$.issue.identifier"));
    assert_eq!(
        warnings[5].to_string(),
        "dot_context (line 17): .issue.identifier inside range/with reads the current element, not the root; use $.issue.identifier"
    );
    assert_eq!(WarningKind::UnknownVar.as_str(), "unknown_var");
    assert_eq!(WarningKind::UnknownField.as_str(), "unknown_field");
}
