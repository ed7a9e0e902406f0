//! Prompt engine: data contract, helper functions, strictness, and error lines.

use sortie::domain::{BlockerRef, Comment, Issue, IssueRef};
use sortie::prompt::{PromptData, PromptError, PromptTemplate, RunInfo};

fn issue() -> Issue {
    Issue {
        blockers_read: Default::default(),
        id: "10001".into(),
        identifier: "PROJ-1".into(),
        display_identifier: "acme/PROJ-1".into(),
        title: "Implement login".into(),
        description: "Add OAuth2 <login> & SSO.".into(),
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
        comments: Some(vec![Comment {
            id: "c1".into(),
            author: "bob".into(),
            body: "Needs SSO support.".into(),
            created_at: "2026-03-01T10:00:00Z".into(),
        }]),
        blocked_by: vec![BlockerRef {
            id: "10002".into(),
            identifier: "PROJ-2".into(),
            state: "Done".into(),
        }],
        created_at: "2026-02-28T09:00:00Z".into(),
        updated_at: "2026-03-01T12:00:00Z".into(),
    }
}

/// An issue as candidate polling returns it: optionals absent, comments not fetched.
fn bare_issue() -> Issue {
    Issue {
        id: "7".into(),
        identifier: "PROJ-7".into(),
        title: "Bare".into(),
        state: "To Do".into(),
        ..Issue::default()
    }
}

fn data(issue: &Issue, attempt: Option<u32>) -> PromptData<'_> {
    PromptData {
        issue,
        attempt,
        run: RunInfo::for_turn(1, 5),
        reaction: None,
        stage: None,
    }
}

fn parse(src: &str) -> PromptTemplate {
    match PromptTemplate::parse(src, "WORKFLOW.md", 0) {
        Ok(t) => t,
        Err(e) => panic!("template should parse: {e}"),
    }
}

fn render(src: &str, issue: &Issue, attempt: Option<u32>) -> Result<String, PromptError> {
    parse(src).render(&data(issue, attempt))
}

fn ok(src: &str, issue: &Issue) -> String {
    match render(src, issue, None) {
        Ok(s) => s,
        Err(e) => panic!("render of {src:?} should succeed: {e}"),
    }
}

fn render_err(src: &str, issue: &Issue, offset: usize) -> PromptError {
    let t = match PromptTemplate::parse(src, "WORKFLOW.md", offset) {
        Ok(t) => t,
        Err(e) => panic!("template should parse: {e}"),
    };
    match t.render(&data(issue, None)) {
        Ok(out) => panic!("render of {src:?} should fail, got {out:?}"),
        Err(e) => e,
    }
}

fn parse_err(src: &str, offset: usize) -> PromptError {
    match PromptTemplate::parse(src, "WORKFLOW.md", offset) {
        Ok(_) => panic!("{src:?} should not parse"),
        Err(e) => e,
    }
}

#[test]
fn issue_fields_render() {
    let i = issue();
    assert_eq!(
        ok(
            "{{.issue.id}}|{{.issue.identifier}}|{{.issue.title}}|{{.issue.priority}}|{{.issue.state}}|{{.issue.branch_name}}|{{.issue.url}}|{{.issue.assignee}}|{{.issue.issue_type}}|{{.issue.created_at}}|{{.issue.updated_at}}",
            &i
        ),
        "10001|PROJ-1|Implement login|2|To Do|feature/PROJ-1|https://tracker.example.com/PROJ-1|alice|Story|2026-02-28T09:00:00Z|2026-03-01T12:00:00Z"
    );
    assert_eq!(
        ok(
            "{{.issue.parent.identifier}} {{range .issue.comments}}{{.author}}: {{.body}} ({{.id}}, {{.created_at}}){{end}} {{range .issue.blocked_by}}{{.identifier}}={{.state}}/{{.id}}{{end}}",
            &i
        ),
        "PROJ-0 bob: Needs SSO support. (c1, 2026-03-01T10:00:00Z) PROJ-2=Done/10002"
    );
}

#[test]
fn absent_optionals_are_present_nil_or_empty() {
    let i = bare_issue();
    let out = ok(
        "[{{.issue.description}}][{{if .issue.priority}}p{{else}}no priority{{end}}][{{if .issue.parent}}parent{{else}}no parent{{end}}][{{if eq .issue.comments nil}}not fetched{{end}}][{{len .issue.labels}} {{len .issue.blocked_by}}][{{.issue.priority}}][{{if .ci_failure}}ci{{end}}{{if .review_comments}}review{{end}}]",
        &i,
    );
    assert_eq!(
        out,
        "[][no priority][no parent][not fetched][0 0][<no value>][]"
    );
    let fetched_none = Issue {
        comments: Some(Vec::new()),
        ..bare_issue()
    };
    assert_eq!(
        ok(
            "{{range .issue.comments}}x{{else}}no comments{{end}} {{if ne .issue.comments nil}}fetched{{end}}",
            &fetched_none
        ),
        "no comments fetched"
    );
}

#[test]
fn display_identifier_is_not_in_the_contract() {
    let e = render_err("{{ .issue.display_identifier }}", &issue(), 0);
    assert!(e.to_string().contains("display_identifier"), "{e}");
}

#[test]
fn attempt_is_zero_on_first_dispatch_and_the_counter_on_retries() {
    let src = "{{ .attempt }}:{{ if .attempt }}retry {{ .attempt }}{{ else }}first run{{ end }}";
    assert_eq!(
        render(src, &issue(), None).ok().as_deref(),
        Some("0:first run")
    );
    assert_eq!(
        render(src, &issue(), Some(1)).ok().as_deref(),
        Some("1:retry 1")
    );
    assert_eq!(
        render(src, &issue(), Some(3)).ok().as_deref(),
        Some("3:retry 3")
    );
}

#[test]
fn run_values_follow_the_turn() {
    let t = parse("{{.run.turn_number}}/{{.run.max_turns}} {{.run.is_continuation}}");
    let i = issue();
    let first = t.render(&PromptData {
        issue: &i,
        attempt: None,
        run: RunInfo::for_turn(1, 3),
        reaction: None,
        stage: None,
    });
    let third = t.render(&PromptData {
        issue: &i,
        attempt: None,
        run: RunInfo::for_turn(3, 3),
        reaction: None,
        stage: None,
    });
    assert_eq!(first.ok().as_deref(), Some("1/3 false"));
    assert_eq!(third.ok().as_deref(), Some("3/3 true"));
}

#[test]
fn to_json_is_compact_sorted_and_html_escaped_like_go() {
    let i = issue();
    assert_eq!(
        ok("{{ toJSON .issue.labels }}", &i),
        r#"["feature","auth"]"#
    );
    assert_eq!(
        ok("{{ .issue.parent | toJSON }}", &i),
        r#"{"id":"10000","identifier":"PROJ-0"}"#
    );
    assert_eq!(
        ok("{{ toJSON .issue.description }}", &i),
        r#""Add OAuth2 \u003clogin\u003e \u0026 SSO.""#
    );
    assert_eq!(
        ok("{{ toJSON .issue.priority }} {{ toJSON .run }}", &i),
        r#"2 {"is_continuation":false,"max_turns":5,"turn_number":1}"#
    );
    assert_eq!(ok("{{ toJSON .issue.comments }}", &bare_issue()), "null");
    let whole = ok("{{ toJSON .issue }}", &i);
    let parsed: serde_json::Value = match serde_json::from_str(&whole) {
        Ok(v) => v,
        Err(e) => panic!("toJSON output must be JSON: {e}: {whole}"),
    };
    assert_eq!(parsed["blocked_by"][0]["identifier"], "PROJ-2");
    assert_eq!(parsed["comments"][0]["author"], "bob");
    assert!(parsed.get("display_identifier").is_none());
}

#[test]
fn join_accepts_lists_and_piped_values() {
    let i = issue();
    assert_eq!(ok(r#"{{ join ", " .issue.labels }}"#, &i), "feature, auth");
    assert_eq!(ok(r#"{{ .issue.labels | join "+" }}"#, &i), "feature+auth");
    assert_eq!(
        ok(r#"{{ join "," .issue.blocked_by }}"#, &i),
        "map[id:10002 identifier:PROJ-2 state:Done]"
    );
    assert_eq!(ok(r#"{{ join ", " .issue.labels }}"#, &bare_issue()), "");
    let e = render_err(r#"{{ join ", " .issue.title }}"#, &i, 0);
    assert_eq!(
        e.to_string(),
        "template render error in WORKFLOW.md (line 1): join: unsupported type string, want []string or []any"
    );
    let e = render_err(r#"{{ .issue.comments | join ", " }}"#, &bare_issue(), 0);
    assert!(
        e.to_string().contains("join: unsupported type <nil>"),
        "{e}"
    );
}

#[test]
fn lower_lowercases_strings_only() {
    let i = issue();
    assert_eq!(
        ok("{{ lower .issue.state }} {{ .issue.title | lower }}", &i),
        "to do implement login"
    );
    assert_eq!(ok(r#"{{ lower "ÄBC" }}"#, &i), "äbc");
    let e = render_err("{{ lower .issue.priority }}", &i, 0);
    assert!(e.to_string().contains("lower: wrong type"), "{e}");
}

#[test]
fn go_builtins_work() {
    let i = issue();
    let src = r#"{{ and .issue.parent .issue.parent.identifier }}|{{ or .issue.assignee "nobody" }}|{{ not .run.is_continuation }}|{{ eq .issue.state "To Do" "Done" }}|{{ ne .issue.priority 2 }}|{{ lt .issue.priority 3 }}|{{ le 2 2 }}|{{ gt 1 2 }}|{{ ge 2 3 }}|{{ len .issue.title }}|{{ index .issue.labels 1 }}|{{ print "a" 1 }}|{{ printf "%s-%03d" .issue.identifier .issue.priority }}|{{ slice .issue.title 0 9 }}|{{ println "x" -}}"#;
    assert_eq!(
        ok(src, &i),
        "PROJ-0|alice|true|true|false|true|true|false|false|15|auth|a1|PROJ-1-002|Implement|x\n"
    );
}

#[test]
fn go_syntax_trim_comments_variables_with_and_root() {
    let i = issue();
    let src = "{{/* a comment */ -}}\n{{- $id := .issue.identifier -}}\n{{ with .issue.parent }}{{ .identifier }} child {{ $id }} of {{ $.issue.title }}{{ end }}\n{{- range $n, $l := .issue.labels }} {{ $n }}={{ $l }}{{ end }}\n{{ if eq .attempt 1 }}one{{ else if eq .attempt 0 }}zero{{ else }}many{{ end }}";
    assert_eq!(
        ok(src, &i),
        "PROJ-0 child PROJ-1 of Implement login 0=feature 1=auth\nzero"
    );
}

#[test]
fn misspelled_key_names_the_key_and_the_line() {
    let src = "# Task\n\nWork on {{ .issue.identifer }} now.\n";
    let e = render_err(src, &issue(), 0);
    assert_eq!(
        e,
        PromptError::Render {
            path: "WORKFLOW.md".into(),
            line: Some(3),
            message: "map has no entry for key \"identifer\" (in .issue.identifer)".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "template render error in WORKFLOW.md (line 3): map has no entry for key \"identifer\" (in .issue.identifer)"
    );
    let with_offset = render_err(src, &issue(), 12);
    assert!(
        with_offset
            .to_string()
            .starts_with("template render error in WORKFLOW.md (line 15): "),
        "{with_offset}"
    );
    let root = render_err("ok\n{{ .isue.title }}", &issue(), 0);
    assert!(
        root.to_string().contains("(line 2)") && root.to_string().contains("\"isue\""),
        "{root}"
    );
}

#[test]
fn render_error_lines_inside_blocks() {
    let src = "line 1\n{{ if .issue.title }}\n  title ok\n  {{ range .issue.labels }}\n    {{ . }}\n  {{ end }}\n  {{ range .issue.comments }}\n    {{ .author }}\n    {{ .bdy }}\n  {{ end }}\n{{ end }}\n";
    let e = render_err(src, &issue(), 4);
    assert_eq!(
        e.to_string(),
        "template render error in WORKFLOW.md (line 13): map has no entry for key \"bdy\" (in .bdy)"
    );
    let in_else = "{{ if .issue.parent }}\n{{ else }}\n\n{{ .issue.nope }}\n{{ end }}";
    let e = render_err(in_else, &bare_issue(), 0);
    assert!(e.to_string().contains("(line 4)"), "{e}");
    let in_pipe = "a\n\n{{ with .issue.nope }}x{{ end }}";
    let e = render_err(in_pipe, &issue(), 0);
    assert!(e.to_string().contains("(line 3)"), "{e}");
    let after_vars = "{{ $x := .issue.labels }}\n{{ index $x 5 }}";
    let e = render_err(after_vars, &issue(), 0);
    assert!(e.to_string().contains("(line 2)"), "{e}");
}

#[test]
fn field_of_nil_is_a_render_error() {
    let e = render_err("x\n{{ .issue.parent.identifier }}", &bare_issue(), 0);
    assert_eq!(
        e.to_string(),
        "template render error in WORKFLOW.md (line 2): nil pointer evaluating .issue.parent.identifier: .issue.parent is nil"
    );
    // Guarded access is fine, as in Go.
    assert_eq!(
        ok(
            "{{ with .issue.parent }}{{ .identifier }}{{ else }}none{{ end }}",
            &bare_issue()
        ),
        "none"
    );
    let e = render_err("{{ .issue.title.length }}", &issue(), 0);
    assert!(
        e.to_string()
            .contains("can't evaluate field length in type string"),
        "{e}"
    );
}

#[test]
fn parse_errors_carry_file_lines() {
    let e = parse_err("# Task\n\n{{ if .issue.title }}\nunclosed\n", 6);
    assert_eq!(
        e.to_string(),
        "template parse error in WORKFLOW.md (line 9): unexpected EOF: {{if}} is never closed with {{end}}"
    );
    let e = parse_err(
        "{{ range .issue.labels }}{{ . }}{{ end }}\n{{ end }}\nrest",
        2,
    );
    assert_eq!(
        e,
        PromptError::Parse {
            path: "WORKFLOW.md".into(),
            line: Some(4),
            message: "unexpected {{end}}".into(),
        }
    );

    let e = parse_err("one\ntwo\n{{ .issue.title", 10);
    assert!(
        e.to_string()
            .starts_with("template parse error in WORKFLOW.md (line 13): "),
        "{e}"
    );
}

#[test]
fn unknown_function_is_a_parse_error_with_line() {
    let e = parse_err("hello\n\n{{ upper .issue.title }}", 5);
    assert_eq!(
        e.to_string(),
        "template parse error in WORKFLOW.md (line 8): function \"upper\" not defined"
    );
    let e = parse_err("{{ define \"x\" }}{{ shout . }}{{ end }}", 0);
    assert!(
        e.to_string().contains("function \"shout\" not defined"),
        "{e}"
    );
    let e = parse_err("{{ __sortie_field . \"\" \"issue\" }}", 0);
    assert!(e.to_string().contains("not defined"), "{e}");
}

#[test]
fn named_templates_render_and_the_body_name_is_reserved() {
    let src = "{{ define \"labels\" }}{{ join \", \" . }}{{ end }}Labels: {{ template \"labels\" .issue.labels }}";
    assert_eq!(ok(src, &issue()), "Labels: feature, auth");
    let redefined = "{{ define \"a\" }}A{{ end }}{{ define \"a\" }}{{ end }}{{ template \"a\" }}";
    assert_eq!(ok(redefined, &issue()), "A");
    let e = parse_err(
        "{{ define \"a\" }}A{{ end }}\n{{ define \"a\" }}B{{ end }}",
        0,
    );
    assert!(
        e.to_string().contains("(line 2): multiple definition"),
        "{e}"
    );
    let e = parse_err("{{ define \"prompt\" }}x{{ end }}", 0);
    assert!(e.to_string().contains("reserved"), "{e}");
}

#[test]
fn templates_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<PromptTemplate>();
    let t = parse("{{ .issue.identifier }}");
    let copy = t.clone();
    assert_eq!(
        copy.render(&data(&issue(), None)).ok().as_deref(),
        Some("PROJ-1")
    );
    assert_eq!(copy.source(), "{{ .issue.identifier }}");
}
