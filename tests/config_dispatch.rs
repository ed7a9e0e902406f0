//! `dispatch`: typed rule sets through the library's loader, every load error with its exact
//! message, template path refusals, the rule settings overlay and preflight, `sortie validate`
//! through the binary, and `config.dispatch` as the daemon serves it.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use sortie::config::dispatch::{PriorityPredicate, RuleMatch, SelectedBy};
use sortie::config::{LoadOptions, Workflow, parse_workflow};

const TRACKER: &str = "tracker:\n  kind: github\n  api_key: tok-123\n  project: acme/app\n  endpoint: http://127.0.0.1:9/api\n  active_states: [To Do, Doing]\n  terminal_states: [Done]\n  handoff_state: Review\n";

fn opts(cwd: &Path) -> LoadOptions {
    LoadOptions {
        cwd: cwd.to_path_buf(),
        home: None,
        ..LoadOptions::default()
    }
}

fn doc_with(tracker: &str, extra: &str) -> String {
    if extra.starts_with("agent:") {
        return format!("---\n{tracker}{extra}\n---\nWork on {{{{ .issue.identifier }}}}\n");
    }
    format!(
        "---\n{tracker}agent: {{kind: mock}}\n{extra}\n---\nWork on {{{{ .issue.identifier }}}}\n"
    )
}

fn load_at(dir: &Path, text: &str) -> Result<Workflow, sortie::config::ConfigError> {
    parse_workflow(text, &dir.join("WORKFLOW.md"), &opts(dir))
}

fn load(text: &str) -> Result<Workflow, sortie::config::ConfigError> {
    load_at(Path::new("/srv/flows"), text)
}

fn ok(extra: &str) -> Workflow {
    load(&doc_with(TRACKER, extra)).unwrap_or_else(|e| panic!("{e} for:\n{extra}"))
}

fn err(extra: &str) -> String {
    match load(&doc_with(TRACKER, extra)) {
        Ok(_) => panic!("expected an error for:\n{extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_valid_rule_set_loads_typed() {
    let w = ok("codex: {model: gpt-x}\n\
        dispatch:\n  rules:\n\
        \x20   - name: specify\n      match: {labels: feature, priority: {lte: 2}, assignee: [Ann, bob], issue_type: null, title: \"[docs]\"}\n      next: implement\n      agent: codex\n\
        \x20   - name: implement\n      stage: stage-implement\n      next: review\n      claude-code: {model: strong}\n\
        \x20   - name: review\n      stage: stage-review\n\
        \x20   - name: any\n      match: {identifier: [\"ACME-*\"], priority: {in: [1, 3]}}\n\
        \x20   - agent: mock\n\
        \x20 default: {agent: claude-code}\n  max_consecutive_hops: 4");
    let d = &w.config.dispatch;
    assert_eq!(d.rules.len(), 5);
    let specify = &d.rules[0];
    assert_eq!(specify.selected_by(), SelectedBy::Match);
    assert_eq!(
        specify.matcher,
        Some(RuleMatch {
            labels: vec!["feature".into()],
            assignee: vec!["Ann".into(), "bob".into()],
            title: vec!["[docs]".into()],
            priority: Some(PriorityPredicate::Lte(2)),
            ..Default::default()
        })
    );
    assert_eq!(specify.next.as_deref(), Some("implement"));
    assert_eq!(specify.selection.agent.as_deref(), Some("codex"));
    let implement = &d.rules[1];
    assert_eq!(implement.selected_by(), SelectedBy::Stage);
    assert_eq!(implement.matcher, None);
    assert_eq!(
        implement.settings.as_ref().map(|s| s["model"].clone()),
        Some(json!("strong"))
    );
    assert_eq!(d.rule_kind(implement, "mock"), "claude-code");
    assert_eq!(
        d.rules[3].matcher.as_ref().and_then(|m| m.priority.clone()),
        Some(PriorityPredicate::In(vec![1, 3]))
    );
    assert_eq!(d.rules[4].selected_by(), SelectedBy::CatchAll);
    assert_eq!(d.default.agent.as_deref(), Some("claude-code"));
    assert_eq!(d.chains(), vec![vec!["specify", "implement", "review"]]);
    assert_eq!((d.max_consecutive_hops, d.hop_ceiling()), (Some(4), 4));
    let checks: Vec<&str> = w.warnings.iter().map(|w| w.check.as_str()).collect();
    assert!(!checks.contains(&"unsupported_key"), "{:?}", w.warnings);
    assert!(
        !w.warnings.iter().any(|w| w.field == "codex"),
        "a routed kind's block is read: {:?}",
        w.warnings
    );
}

#[test]
fn empty_match_values_leave_the_key_out_and_no_block_is_the_default() {
    let w = ok(
        "dispatch:\n  rules:\n    - name: a\n      match: {labels: [], assignee: null}\n      agent: mock",
    );
    let rule = &w.config.dispatch.rules[0];
    assert_eq!(rule.matcher, Some(RuleMatch::default()));
    assert_eq!(rule.selected_by(), SelectedBy::CatchAll);
    let w = ok("dispatch: null");
    assert_eq!(w.config.dispatch, Default::default());
    assert_eq!(w.config.dispatch.hop_ceiling(), 10);
}

/// Each load error with its full message (`config: <field>: <message>`).
#[test]
fn every_error_has_its_message() {
    let rules = |body: &str| format!("dispatch:\n  rules:\n{body}");
    let cases: Vec<(String, &str)> = vec![
        (
            "dispatch: 5".into(),
            "config: dispatch: expected a map, got a number",
        ),
        (
            "dispatch: {rule: []}".into(),
            "config: dispatch.rule: unknown key; dispatch accepts rules, default and max_consecutive_hops",
        ),
        (
            "dispatch: {rules: {a: 1}}".into(),
            "config: dispatch.rules: expected a list, got a map",
        ),
        (
            "dispatch: {default: [a]}".into(),
            "config: dispatch.default: expected a map, got a list",
        ),
        (
            "dispatch: {default: {stage: s}}".into(),
            "config: dispatch.default.stage: unknown key; dispatch.default accepts only agent and template",
        ),
        (
            "dispatch: {default: {claude-code: {}}}".into(),
            "config: dispatch.default.claude-code: dispatch.default carries no settings block; the top-level claude-code block holds the default settings of agent kind \"claude-code\"",
        ),
        (
            "dispatch: {default: {agent: aider}}".into(),
            "config: dispatch.default.agent: agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)",
        ),
        (
            rules("    - 5"),
            "config: dispatch.rules[0]: expected a map, got a number",
        ),
        (
            rules("    - {name: a}"),
            "config: dispatch.rules[0]: rule must specify at least one of match, stage, agent, template, or a settings block",
        ),
        (
            rules("    - {name: a, next: b}"),
            "config: dispatch.rules[0]: rule must specify at least one of match, stage, agent, template, or a settings block",
        ),
        (
            rules("    - {name: a, tempalte: x}"),
            "config: dispatch.rules[0].tempalte: unknown rule key; a rule accepts name, stage, next, match, agent, template, or a settings block named for an agent kind (did you mean `template`?)",
        ),
        (
            rules("    - {name: Bad, agent: mock}"),
            "config: dispatch.rules[0].name: rule name \"Bad\" must match ^[a-z][a-z0-9_-]*$",
        ),
        (
            rules("    - {name: a, agent: mock}\n    - {name: a, agent: codex}"),
            "config: dispatch.rules[1].name: duplicate rule name \"a\" (first at index 0)",
        ),
        (
            rules("    - {name: a, agent: aider}"),
            "config: dispatch.rules[0].agent: agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)",
        ),
        (
            rules("    - {name: a, stage: 5}"),
            "config: dispatch.rules[0].stage: expected a label, got a number",
        ),
        (
            rules("    - {name: a, stage: true}"),
            "config: dispatch.rules[0].stage: expected a label, got a true/false value",
        ),
        (
            rules("    - {name: a, stage: [x]}"),
            "config: dispatch.rules[0].stage: expected a label, got a list",
        ),
        (
            rules("    - {name: a, stage: {x: 1}}"),
            "config: dispatch.rules[0].stage: expected a label, got a map",
        ),
        (
            rules("    - {name: a, stage: null}"),
            "config: dispatch.rules[0].stage: needs a label with a character other than white space",
        ),
        (
            rules("    - {name: a, stage: \"  \"}"),
            "config: dispatch.rules[0].stage: needs a label with a character other than white space",
        ),
        (
            rules("    - {name: a, stage: s, match: {}}"),
            "config: dispatch.rules[0]: a rule with a stage label is selected by that label and cannot also carry match",
        ),
        (
            rules("    - {stage: s}"),
            "config: dispatch.rules[0]: a rule that carries a stage label must have a name",
        ),
        (
            rules("    - {name: a, stage: Stage-X}\n    - {name: b, stage: stage-x}"),
            "config: dispatch.rules[1].stage: duplicate stage label \"stage-x\" (first at index 0)",
        ),
        (
            rules("    - {name: a, agent: mock, next: 3}"),
            "config: dispatch.rules[0].next: expected a rule name, got a number",
        ),
        (
            rules("    - {name: a, agent: mock, next: \"\"}"),
            "config: dispatch.rules[0].next: needs a rule name",
        ),
        (
            rules("    - {agent: mock, next: b}"),
            "config: dispatch.rules[0]: a rule that carries next must have a name",
        ),
        (
            rules("    - {name: a, agent: mock, next: zzz}"),
            "config: dispatch.rules[0].next: next \"zzz\" names no dispatch rule",
        ),
        (
            rules("    - {name: a, stage: s, next: a}"),
            "config: dispatch.rules[0].next: next names the rule that carries it",
        ),
        (
            rules("    - {name: a, match: {labels: x}, next: b}\n    - {name: b, agent: mock}"),
            "config: dispatch.rules[0].next: next \"b\" names a rule without a stage label; the rule a next names must carry stage",
        ),
        (
            rules(
                "    - {name: x, match: {labels: x}, next: a}\n    - {name: a, stage: sa, next: b}\n    - {name: b, stage: sb, next: a}",
            ),
            "config: dispatch.rules[1].next: next links form a cycle: a -> b -> a",
        ),
        (
            "dispatch: {max_consecutive_hops: abc}".into(),
            "config: dispatch.max_consecutive_hops: invalid integer value: abc",
        ),
        (
            "dispatch: {max_consecutive_hops: 18446744073709551615}".into(),
            "config: dispatch.max_consecutive_hops: value is outside the range an integer setting accepts, -9223372036854775808 to 9223372036854775807",
        ),
        (
            "dispatch: {max_consecutive_hops: 0}".into(),
            "config: dispatch.max_consecutive_hops: must be greater than 0",
        ),
        (
            "dispatch: {max_consecutive_hops: -2}".into(),
            "config: dispatch.max_consecutive_hops: must be greater than 0",
        ),
        (
            format!(
                "{}  max_consecutive_hops: 1",
                rules(
                    "    - {name: a, match: {labels: x}, next: b}\n    - {name: b, stage: sb, next: c}\n    - {name: c, stage: sc}\n"
                )
            ),
            "config: dispatch.max_consecutive_hops: must be at least 2, the number of hops in the longest stage chain (a -> b -> c)",
        ),
        (
            rules(
                "    - {name: a, match: {labels: x}}\n    - {match: {}, agent: mock}\n    - {name: s, stage: st}\n    - {name: late, agent: codex}",
            ),
            "config: dispatch.rules[1]: catch-all rule \"<none>\" takes every issue, so it shadows dispatch.rules[3] (\"late\"), which can never match; only rules with stage may follow a catch-all",
        ),
        (
            rules("    - {name: a, match: {label: x}}"),
            "config: dispatch.rules[0].match.label: unknown match key; match accepts labels, issue_type, priority, identifier, assignee and title (did you mean `labels`?)",
        ),
        (
            rules("    - {name: a, match: [x]}"),
            "config: dispatch.rules[0].match: expected a map, got a list",
        ),
        (
            rules("    - {name: a, match: {labels: [ok, 5]}}"),
            "config: dispatch.rules[0].match.labels[1]: expected a string, got a number",
        ),
        (
            rules("    - {name: a, match: {priority: {}}}"),
            "config: dispatch.rules[0].match.priority: priority predicate carries no operator; write exactly one of eq, lt, lte, gt, gte or in",
        ),
        (
            rules("    - {name: a, match: {priority: {lt: 1, gt: 0}}}"),
            "config: dispatch.rules[0].match.priority: priority predicate carries more than one operator (lt, gt); write exactly one",
        ),
        (
            rules("    - {name: a, match: {priority: {le: 1}}}"),
            "config: dispatch.rules[0].match.priority.le: unknown priority operator; use one of eq, lt, lte, gt, gte or in",
        ),
        (
            rules("    - {name: a, match: {priority: {eq: high}}}"),
            "config: dispatch.rules[0].match.priority.eq: invalid integer value: high",
        ),
        (
            rules("    - {name: a, match: {priority: {in: 2}}}"),
            "config: dispatch.rules[0].match.priority.in: in needs a non-empty list of integers, for example { in: [1, 2] }",
        ),
        (
            rules("    - {name: a, match: {priority: 2}}"),
            "config: dispatch.rules[0].match.priority: expected a map with one operator of eq, lt, lte, gt, gte or in, got a number",
        ),
        (
            rules("    - {name: a, match: {title: null}}"),
            "config: dispatch.rules[0].match.title: needs at least one phrase; remove the key to leave the title out of the match",
        ),
        (
            rules("    - {name: a, match: {title: []}}"),
            "config: dispatch.rules[0].match.title: needs at least one phrase; remove the key to leave the title out of the match",
        ),
        (
            rules("    - {name: a, match: {title: \" \"}}"),
            "config: dispatch.rules[0].match.title: needs a phrase with a character other than white space",
        ),
        (
            rules("    - {name: a, match: {title: [fix, \"\"]}}"),
            "config: dispatch.rules[0].match.title[1]: needs a phrase with a character other than white space",
        ),
        (
            rules("    - {name: a, match: {title: [[infra]]}}"),
            "config: dispatch.rules[0].match.title[0]: YAML read this phrase as a list; quote a phrase that starts with \"[\", for example \"[docs]\"",
        ),
        (
            rules("    - name: a\n      match:\n        title: [{fix: typo}]"),
            "config: dispatch.rules[0].match.title[0]: YAML read this phrase as a mapping; quote a phrase that contains \": \", for example \"fix: typo\"",
        ),
        (
            rules("    - {name: a, match: {title: 2024}}"),
            "config: dispatch.rules[0].match.title: YAML read this phrase as a number; quote it to match it as text, for example \"2024\"",
        ),
        (
            rules("    - {name: a, codex: {}}"),
            "config: dispatch.rules[0].codex: settings block for agent kind \"codex\", but this rule runs agent kind \"mock\", taken from agent.kind",
        ),
        (
            format!(
                "{}  default: {{agent: claude-code}}",
                rules("    - {name: a, codex: {}}\n")
            ),
            "config: dispatch.rules[0].codex: settings block for agent kind \"codex\", but this rule runs agent kind \"claude-code\", taken from dispatch.default.agent",
        ),
        (
            rules("    - {name: a, agent: opencode, codex: {}}"),
            "config: dispatch.rules[0].codex: settings block for agent kind \"codex\", but this rule runs agent kind \"opencode\"",
        ),
        (
            rules("    - name: a\n      mock:"),
            "config: dispatch.rules[0].mock: a settings block must be a map (write {} for an empty one), got a value of an unexpected type",
        ),
        (
            rules("    - {name: a, mock: {command: x}}"),
            "config: dispatch.rules[0].mock.command: a rule's settings block cannot write command; it comes from the agent section, which is workflow-wide",
        ),
        (
            rules("    - {name: a, mock: {stall_timeout_ms: 5}}"),
            "config: dispatch.rules[0].mock.stall_timeout_ms: a rule's settings block cannot write stall_timeout_ms; it comes from the agent section, which is workflow-wide",
        ),
        (
            rules("    - {mock: {model: x}}"),
            "config: dispatch.rules[0]: a rule that carries a settings block must have a name",
        ),
        (
            rules("    - {name: default, mock: {model: x}}"),
            "config: dispatch.rules[0].name: a rule that carries a settings block cannot be named \"default\", the name run history gives the dispatch.default selection",
        ),
        (
            rules("    - {name: a, stage: doing}"),
            "config: dispatch.rules[0].stage: rule \"a\": stage label \"doing\" collides with tracker.active_states entry \"Doing\"",
        ),
        (
            rules("    - {name: a, stage: DONE}"),
            "config: dispatch.rules[0].stage: rule \"a\": stage label \"DONE\" collides with tracker.terminal_states entry \"Done\"",
        ),
        (
            rules("    - {name: a, stage: review}"),
            "config: dispatch.rules[0].stage: rule \"a\": stage label \"review\" collides with tracker.handoff_state \"Review\"",
        ),
        (
            rules("    - {name: a, stage: Needs-Human}"),
            "config: dispatch.rules[0].stage: rule \"a\": stage label \"Needs-Human\" collides with the parking label \"needs-human\"",
        ),
        (
            format!(
                "reactions:\n  ci_failure: {{provider: github, escalation: label, escalation_label: ci-broken}}\n{}",
                rules("    - {name: a, stage: CI-Broken}")
            ),
            "config: dispatch.rules[0].stage: rule \"a\": stage label \"CI-Broken\" collides with the escalation_label of reactions.ci_failure \"ci-broken\"",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(err(&extra), want, "for:\n{extra}");
    }
    let no_handoff = TRACKER.replace("  handoff_state: Review\n", "");
    let text = doc_with(
        &no_handoff,
        "dispatch:\n  rules:\n    - {name: a, match: {labels: x}, next: b}\n    - {name: b, stage: sb}",
    );
    assert_eq!(
        load(&text).map(|_| ()).map_err(|e| e.to_string()),
        Err("config: dispatch.rules[0].next: next requires tracker.handoff_state, the state a stage ends on when a hop is not made".to_string())
    );
}

#[test]
fn a_malformed_glob_and_the_unreachable_check_name() {
    let e = err("dispatch:\n  rules:\n    - {name: a, match: {identifier: \"[ACME\"}}");
    assert!(
        e.starts_with("config: dispatch.rules[0].match.identifier: malformed glob \"[ACME\": "),
        "{e}"
    );
    let e = err("dispatch:\n  rules:\n    - {name: a, match: {labels: [ok, \"[z-a\"]}}");
    assert!(
        e.starts_with("config: dispatch.rules[0].match.labels[1]: malformed glob \"[z-a\""),
        "{e}"
    );
    let text = doc_with(
        TRACKER,
        "dispatch:\n  rules:\n    - {name: all, agent: mock}\n    - {name: b, match: {labels: x}}",
    );
    let Err(e) = load(&text) else {
        panic!("a catch-all before a match rule fails")
    };
    assert_eq!(e.check(), "unreachable_rules");
    assert!(
        e.to_string().contains("shadows dispatch.rules[1] (\"b\")"),
        "{e}"
    );
    // Stage rules may follow a catch-all.
    ok("dispatch:\n  rules:\n    - {name: all, agent: mock}\n    - {name: s, stage: st}");
}

struct Dir {
    _tmp: tempfile::TempDir,
    flows: PathBuf,
}

fn flows() -> Dir {
    let tmp = tempfile::tempdir().expect("temp dir");
    let flows = tmp.path().join("flows");
    std::fs::create_dir_all(flows.join("prompts")).expect("prompts dir");
    std::fs::write(
        tmp.path().join("outside.md"),
        "outside {{ .issue.identifier }}\n",
    )
    .expect("write");
    Dir { _tmp: tmp, flows }
}

fn template_load(dir: &Dir, template: &str) -> Result<Workflow, String> {
    let extra = format!(
        "dispatch:\n  rules:\n    - {{name: a, match: {{labels: x}}, template: {template:?}}}\n  default: {{template: ./prompts/ok.md}}"
    );
    load_at(&dir.flows, &doc_with(TRACKER, &extra)).map_err(|e| e.to_string())
}

#[test]
fn templates_are_read_and_kept_by_the_path_as_written() {
    let dir = flows();
    std::fs::write(
        dir.flows.join("prompts/ok.md"),
        "Fix {{ .issue.identifier }}\n",
    )
    .expect("write");
    std::fs::write(dir.flows.join("prompts/bug.md"), "Bug {{ .issue.title }}\n").expect("write");
    let w = template_load(&dir, "prompts/bug.md").expect("loads");
    let t = &w.config.dispatch.templates;
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        vec!["./prompts/ok.md", "prompts/bug.md"]
    );
    assert_eq!(t["prompts/bug.md"].text, "Bug {{ .issue.title }}\n");
    assert!(t["./prompts/ok.md"].path.ends_with("flows/prompts/ok.md"));
}

#[test]
fn template_paths_are_refused() {
    let dir = flows();
    let f = &dir.flows;
    std::fs::write(f.join("prompts/ok.md"), "ok\n").expect("write");
    std::fs::write(f.join("prompts/fm.md"), "---\nx: 1\n---\nbody\n").expect("write");
    std::fs::write(f.join("prompts/bad.md"), "{{ if }}\n").expect("write");
    std::os::unix::fs::symlink(f.join("../outside.md"), f.join("prompts/link.md"))
        .expect("symlink");
    let field = "config: dispatch.rules[0].template: ";
    let cases = [
        (
            "/etc/passwd",
            "template path \"/etc/passwd\" must be relative to the WORKFLOW.md directory, not absolute",
        ),
        (
            "~/p.md",
            "template path \"~/p.md\" must be relative to the WORKFLOW.md directory; \"~\" is not expanded",
        ),
        (
            "../outside.md",
            "template path \"../outside.md\" resolves outside the WORKFLOW.md directory",
        ),
        (
            "prompts/link.md",
            "template path \"prompts/link.md\" resolves outside the WORKFLOW.md directory",
        ),
        (
            "prompts/fm.md",
            "template file \"prompts/fm.md\" begins with \"---\"; a per-rule template carries no front matter",
        ),
    ];
    for (path, want) in cases {
        assert_eq!(
            template_load(&dir, path).err(),
            Some(format!("{field}{want}")),
            "for {path}"
        );
    }
    let missing = template_load(&dir, "prompts/none.md")
        .err()
        .unwrap_or_default();
    assert!(
        missing.starts_with(&format!(
            "{field}template file \"prompts/none.md\" not found"
        )),
        "{missing}"
    );
    let unreadable = template_load(&dir, "prompts").err().unwrap_or_default();
    assert!(
        unreadable.starts_with(&format!("{field}cannot read template file \"prompts\"")),
        "{unreadable}"
    );
    let bad = template_load(&dir, "prompts/bad.md")
        .err()
        .unwrap_or_default();
    assert!(
        bad.starts_with(&format!(
            "{field}template file \"prompts/bad.md\" does not parse: "
        )),
        "{bad}"
    );
    // `..` that stays inside the directory is fine.
    assert!(template_load(&dir, "prompts/../prompts/ok.md").is_ok());
}

#[test]
fn rule_settings_lay_over_the_kind_block_one_level_deep() {
    let w = ok("agent: {kind: mock, command: mock-agent}\n\
        claude-code: {model: base, effort: high, permission_mode: plan, allowed_tools: [a, b]}\n\
        dispatch:\n  rules:\n\
        \x20   - name: hard\n      match: {labels: hard}\n      agent: claude-code\n      claude-code: {model: \" strong \", effort: null, allowed_tools: [c]}\n\
        \x20   - name: plain\n      agent: claude-code");
    let dir = Path::new("/srv/flows");
    let c = &w.config;
    let hard = c.agent_settings_for("claude-code", "hard", dir);
    assert_eq!(
        serde_json::Value::Object(hard.block.clone()),
        json!({"model": " strong ", "permission_mode": "plan", "allowed_tools": ["c"]})
    );
    assert_eq!(hard.command, None, "only agent.kind reads agent.command");
    assert_eq!(hard.kind, "claude-code");
    assert_eq!(
        c.configured_model_for("claude-code", "hard").as_deref(),
        Some("strong")
    );
    assert_eq!(
        c.configured_model_for("claude-code", "plain").as_deref(),
        Some("base")
    );
    assert_eq!(
        c.configured_model_for("claude-code", "").as_deref(),
        Some("base")
    );
    assert_eq!(c.configured_model_for("mock", "hard"), None);
    assert_eq!(c.agent_settings(dir), c.agent_settings_for("mock", "", dir));
    assert_eq!(c.agent_settings(dir).command.as_deref(), Some("mock-agent"));
    let w = ok(
        "dispatch:\n  rules:\n    - {name: a, match: {labels: x}, agent: claude-code, claude-code: {modle: m}}",
    );
    assert!(
        w.warnings.iter().any(|w| w.check == "unknown_key"
            && w.field == "dispatch.rules[0].claude-code.modle"
            && w.message.contains("did you mean `model`?")),
        "{:?}",
        w.warnings
    );
}

#[test]
fn a_route_to_a_kind_without_a_block_fails_preflight() {
    let checks = |w: &Workflow| -> Vec<(String, String)> {
        w.config
            .preflight()
            .into_iter()
            .map(|p| (p.check, p.message))
            .collect()
    };
    let w = ok("dispatch:\n  rules:\n    - {name: fast, match: {labels: x}, agent: codex}");
    assert_eq!(
        checks(&w),
        vec![(
            "dispatch.agent.missing_block".to_string(),
            "dispatch rule \"fast\" (dispatch.rules[0]) routes to agent kind \"codex\", but neither a top-level codex block nor a settings block in the rule exists; add one, sortie does not fall back to another kind's settings".to_string()
        )]
    );
    let w = ok("dispatch:\n  default: {agent: codex}");
    assert_eq!(checks(&w).len(), 1);
    assert!(
        checks(&w)[0]
            .1
            .starts_with("dispatch.default routes to agent kind \"codex\"")
    );
    assert!(
        checks(&ok(
            "codex: {}\ndispatch:\n  rules:\n    - {name: fast, match: {labels: x}, agent: codex}"
        ))
        .is_empty()
    );
    assert!(checks(&ok("dispatch:\n  rules:\n    - {name: fast, match: {labels: x}, agent: codex, codex: {model: m}}")).is_empty());
}

#[test]
fn max_sessions_below_the_longest_chain_is_an_advisory() {
    let chain = "dispatch:\n  rules:\n    - {name: a, match: {labels: x}, next: b}\n    - {name: b, stage: sb, next: c}\n    - {name: c, stage: sc}";
    let w = ok(&format!("agent: {{kind: mock, max_sessions: 2}}\n{chain}"));
    let found: Vec<String> = w
        .warnings
        .iter()
        .filter(|w| w.check == "dispatch.next.max_sessions")
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        vec!["warning: dispatch.next.max_sessions: agent.max_sessions: agent.max_sessions is 2, but the longest stage chain (a -> b -> c) needs 3 runs; an issue stops before its chain ends".to_string()]
    );
    for max in ["0", "3"] {
        let w = ok(&format!(
            "agent: {{kind: mock, max_sessions: {max}}}\n{chain}"
        ));
        assert!(
            !w.warnings
                .iter()
                .any(|w| w.check == "dispatch.next.max_sessions"),
            "max_sessions {max}"
        );
    }
}

const FILE_TRACKER: &str = "tracker:\n  kind: file\n  path: issues.json\n  active_states: [To Do]\n  terminal_states: [Done]\n  handoff_state: Review\n";

/// `sortie validate` on a temporary workflow: exit code and output.
fn validate(workflow: &str) -> (i32, String) {
    let setup = common::Setup::new(workflow, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "WORKFLOW.md"])
        .output()
        .unwrap_or_else(|e| panic!("run sortie validate: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn validate_reports_a_cycle_and_the_max_sessions_advisory() {
    let (code, out) = validate(&doc_with(
        FILE_TRACKER,
        "dispatch:\n  rules:\n    - {name: a, stage: sa, next: b}\n    - {name: b, stage: sb, next: a}",
    ));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("error: config.dispatch.rules[0].next: next links form a cycle: a -> b -> a"),
        "{out}"
    );
    let (code, out) = validate(&format!(
        "---\n{FILE_TRACKER}agent: {{kind: mock, max_sessions: 1}}\n\
         dispatch:\n  rules:\n    - {{name: a, match: {{labels: x}}, next: b}}\n    - {{name: b, stage: sb}}\n---\nWork on {{{{ .issue.identifier }}}}\n"
    ));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("dispatch.next.max_sessions"), "{out}");
    assert!(
        out.contains("the longest stage chain (a -> b) needs 2 runs"),
        "{out}"
    );
    assert!(
        !out.contains("dispatch rules and stages are not built yet"),
        "{out}"
    );
}

/// The daemon serves `config.dispatch` as the reference's table describes it.
#[test]
fn the_daemon_serves_config_dispatch() {
    let wf = format!(
        "---\n{FILE_TRACKER}polling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\n\
         claude-code: {{model: base}}\n\
         dispatch:\n  rules:\n\
         \x20   - name: specify\n      match: {{labels: [feature, \"ui-*\"], title: fix, priority: {{lte: 2}}}}\n      next: implement\n\
         \x20   - name: implement\n      stage: stage-implement\n      agent: claude-code\n      claude-code: {{model: strong}}\n\
         \x20   - match: {{priority: {{in: [3, 4]}}}}\n      agent: mock\n\
         \x20 default: {{template: ./prompts/default.md}}\n\
         ---\nWork on {{{{ .issue.identifier }}}}.\n"
    );
    let setup = common::Setup::new(&wf, "[]");
    std::fs::create_dir_all(setup.path().join("prompts")).expect("prompts dir");
    std::fs::write(
        setup.path().join("prompts/default.md"),
        "Default {{ .issue.identifier }}\n",
    )
    .expect("write");
    let d = setup.start(&[]);
    let state = d.wait_state("state served", Duration::from_secs(30), |s| {
        s["config"]["dispatch"]["rules"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    });
    assert_eq!(
        state["config"]["dispatch"],
        json!({
            "rules": [
                {"name": "specify", "selected_by": "match",
                 "match": {"labels": ["feature", "ui-*"], "title": ["fix"], "priority": {"op": "lte", "value": 2}},
                 "next": "implement", "agent_kind": "mock", "usage_arrival": state["config"]["agent"]["usage_arrival"]},
                {"name": "implement", "selected_by": "stage", "stage": "stage-implement",
                 "agent_kind": "claude-code", "usage_arrival": "incremental"},
                {"selected_by": "match", "match": {"priority": {"op": "in", "values": [3, 4]}},
                 "agent_kind": "mock", "usage_arrival": state["config"]["agent"]["usage_arrival"]}
            ],
            "default": {"agent_kind": "mock", "usage_arrival": state["config"]["agent"]["usage_arrival"]},
            "chains": [["specify", "implement"]],
            "max_consecutive_hops": null,
            "hop_ceiling": 10
        })
    );
    d.stop();
}
