//! `reactions`, `ci_feedback` and `self_review`: typed settings through the library's loader,
//! messages through `sortie validate`, and `config.reactions` as the daemon serves it.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sortie::config::reactions::{DEFAULT_WATCH_WINDOW_MS, ReactionsConfig};
use sortie::config::{LoadOptions, Workflow, parse_workflow};
use sortie::domain::EscalationMode;
use sortie::scm::MergeStrategy;

const GITHUB_TRACKER: &str = "tracker:\n  kind: github\n  api_key: tok-123\n  project: acme/app\n  endpoint: http://127.0.0.1:9/api\n";

fn opts() -> LoadOptions {
    LoadOptions {
        cwd: PathBuf::from("/srv/flows"),
        home: None,
        ..LoadOptions::default()
    }
}

fn doc(tracker: &str, extra: &str) -> String {
    format!(
        "---\n{tracker}agent: {{kind: mock}}\n{extra}\n---\nWork on {{{{ .issue.identifier }}}}\n"
    )
}

fn load(text: &str) -> Result<Workflow, String> {
    parse_workflow(text, Path::new("/srv/flows/WORKFLOW.md"), &opts()).map_err(|e| e.to_string())
}

fn ok(extra: &str) -> Workflow {
    load(&doc(GITHUB_TRACKER, extra)).unwrap_or_else(|e| panic!("{e} for:\n{extra}"))
}

fn err(extra: &str) -> String {
    match load(&doc(GITHUB_TRACKER, extra)) {
        Ok(_) => panic!("expected an error for:\n{extra}"),
        Err(e) => e,
    }
}

fn warnings(w: &Workflow) -> Vec<String> {
    w.warnings.iter().map(ToString::to_string).collect()
}

#[test]
fn reactions_defaults_when_a_provider_is_named() {
    let w = ok(
        "reactions:\n  ci_failure: {provider: github}\n  review_comments: {}\n  \
         bot_review: {}\n  merge_conflicts: {}\n  auto_merge: {}\n  \
         merge_completion: {target_state: Done}\n  label_commands: {fix_label: fix-me}",
    );
    let r = &w.config.reactions;
    assert_eq!(r.provider.as_deref(), Some("github"));
    assert!(r.any());
    let ci = r.ci_failure.as_ref().unwrap();
    assert_eq!(
        (ci.max_retries, ci.max_log_lines, ci.triage),
        (2, 50, false)
    );
    assert_eq!(ci.escalation.mode, EscalationMode::None);
    assert_eq!(ci.escalation.label, "needs-human");
    assert_eq!(ci.escalation.watch_window_ms, DEFAULT_WATCH_WINDOW_MS);
    let rc = r.review_comments.as_ref().unwrap();
    assert_eq!(
        (
            rc.max_continuation_turns,
            rc.debounce_ms,
            rc.poll_interval_ms
        ),
        (3, 60_000, 120_000)
    );
    let bot = r.bot_review.as_ref().unwrap();
    assert_eq!(bot.bot_usernames, Vec::<String>::new());
    assert_eq!(bot.poll_interval_ms, 60_000);
    let mc = r.merge_conflicts.as_ref().unwrap();
    assert_eq!((mc.max_retries, mc.poll_interval_ms), (2, 60_000));
    let am = r.auto_merge.as_ref().unwrap();
    assert_eq!(am.strategy, MergeStrategy::Squash);
    assert!(am.require_ci);
    assert!(!am.delete_branch);
    let done = r.merge_completion.as_ref().unwrap();
    assert_eq!(done.target_state, "Done");
    let lc = r.label_commands.as_ref().unwrap();
    assert_eq!(lc.review_label, None);
    assert_eq!(lc.fix_label.as_deref(), Some("fix-me"));
    assert_eq!(lc.poll_interval_ms, 60_000);
    let s = w.config.scm_settings().expect("a provider applies");
    assert_eq!(s.kind, "github");
    assert_eq!(s.token, "tok-123");
    assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9/api"));
}

#[test]
fn written_values_are_read() {
    let w = ok(
        "reactions:\n  ci_failure:\n    provider: github\n    max_retries: 0\n    \
         max_log_lines: 10\n    escalation: label\n    escalation_label: help\n    \
         watch_window_ms: 0\n  bot_review:\n    bot_usernames: [review-bot]\n    \
         max_continuation_turns: 5\n    escalation: comment\n  auto_merge:\n    \
         strategy: rebase\n    require_ci: false\n    delete_branch: true\n    max_retries: 0",
    );
    let r = &w.config.reactions;
    let ci = r.ci_failure.as_ref().unwrap();
    assert_eq!((ci.max_retries, ci.max_log_lines), (0, 10));
    assert_eq!(ci.escalation.mode, EscalationMode::Label);
    assert_eq!(ci.escalation.label, "help");
    assert_eq!(ci.escalation.watch_window_ms, 0);
    let bot = r.bot_review.as_ref().unwrap();
    assert_eq!(bot.bot_usernames, vec!["review-bot".to_string()]);
    assert_eq!(bot.max_continuation_turns, 5);
    assert_eq!(bot.escalation.mode, EscalationMode::Comment);
    let am = r.auto_merge.as_ref().unwrap();
    assert_eq!(am.strategy, MergeStrategy::Rebase);
    assert!(!am.require_ci && am.delete_branch);
    assert_eq!(am.max_retries, 0);
}

#[test]
fn no_provider_applies_nothing_and_warns() {
    let w = ok("reactions:\n  ci_failure: {max_retries: 3}\n  review_comments: {}");
    assert_eq!(w.config.reactions, ReactionsConfig::default());
    assert!(w.config.scm_settings().is_none());
    let got = warnings(&w);
    assert!(
        got.iter()
            .any(|w| w.starts_with("warning: reactions_ignored: reactions:")
                && w.contains("provider: github")),
        "{got:?}"
    );
    // Without any reaction block there is nothing to warn about.
    let quiet = ok("");
    assert!(!warnings(&quiet).iter().any(|w| w.contains("reactions")));
}

#[test]
fn blocks_without_a_provider_use_the_agreed_one() {
    let w = ok("reactions:\n  review_comments: {provider: github}\n  merge_conflicts: {}");
    let r = &w.config.reactions;
    assert_eq!(r.provider.as_deref(), Some("github"));
    assert!(r.review_comments.is_some() && r.merge_conflicts.is_some());
    assert!(r.ci_failure.is_none());
}

#[test]
fn providers_must_agree() {
    let e =
        err("reactions:\n  ci_failure: {provider: github}\n  review_comments: {provider: gitlab}");
    assert!(
        e.starts_with("config: reactions.review_comments.provider: \"gitlab\" disagrees with reactions.ci_failure.provider \"github\""),
        "{e}"
    );
}

#[test]
fn an_unknown_provider_lists_the_supported_ones() {
    let e = err("reactions:\n  ci_failure: {provider: bitbucket}");
    assert_eq!(
        e,
        "config: reactions.ci_failure.provider: source control provider \"bitbucket\" is not supported by this build (supported: gitea, github, gitlab)"
    );
}

#[test]
fn the_provider_must_be_the_tracker_kind() {
    let file_tracker = "tracker:\n  kind: file\n  path: issues.json\n  active_states: [To Do]\n";
    let e = load(&doc(
        file_tracker,
        "reactions:\n  ci_failure: {provider: github}",
    ))
    .unwrap_err();
    assert!(
        e.starts_with(
            "config: reactions.ci_failure.provider: provider \"github\" must equal tracker.kind (\"file\")"
        ),
        "{e}"
    );
    assert!(e.contains("endpoint and token"), "{e}");
}

#[test]
fn string_members_must_be_strings() {
    for (yaml, want) in [
        (
            "reactions:\n  ci_failure: {provider: 3}",
            "config: reactions.ci_failure.provider: expected string, got int",
        ),
        (
            "reactions:\n  ci_failure: {provider: github, escalation: [label]}",
            "config: reactions.ci_failure.escalation: expected string, got []interface {}",
        ),
        (
            "reactions:\n  ci_failure: {provider: github, escalation_label: true}",
            "config: reactions.ci_failure.escalation_label: expected string, got bool",
        ),
    ] {
        assert_eq!(err(yaml), want, "{yaml}");
    }
}

#[test]
fn each_bad_value_has_its_message() {
    let p = "provider: github, ";
    for (block, want) in [
        (
            format!("ci_failure: {{{p}max_retries: -1}}"),
            "config: reactions.ci_failure.max_retries: must be non-negative",
        ),
        (
            format!("ci_failure: {{{p}max_log_lines: lots}}"),
            "config: reactions.ci_failure.max_log_lines: invalid integer value: lots",
        ),
        (
            format!("ci_failure: {{{p}escalation: page}}"),
            "config: reactions.ci_failure.escalation: invalid value \"page\" (expected label, comment or none)",
        ),
        (
            format!("ci_failure: {{{p}watch_window_ms: -5}}"),
            "config: reactions.ci_failure.watch_window_ms: must be non-negative",
        ),
        (
            format!("review_comments: {{{p}poll_interval_ms: 1000}}"),
            "config: reactions.review_comments.poll_interval_ms: must be at least 30000, got 1000",
        ),
        (
            format!("review_comments: {{{p}max_continuation_turns: 0}}"),
            "config: reactions.review_comments.max_continuation_turns: must be positive",
        ),
        (
            format!("review_comments: {{{p}debounce_ms: -1}}"),
            "config: reactions.review_comments.debounce_ms: must be non-negative",
        ),
        (
            format!("bot_review: {{{p}bot_usernames: review-bot}}"),
            "config: reactions.bot_review.bot_usernames: expected list, got string",
        ),
        (
            format!("auto_merge: {{{p}strategy: fast-forward}}"),
            "config: reactions.auto_merge.strategy: invalid value \"fast-forward\" (expected merge, squash or rebase)",
        ),
        (
            format!("auto_merge: {{{p}require_ci: yes-please}}"),
            "config: reactions.auto_merge.require_ci: expected bool, got string",
        ),
        (
            format!("merge_completion: {{{p}max_retries: 1}}"),
            "config: reactions.merge_completion.target_state: is required when reactions.merge_completion is set",
        ),
        (
            format!("label_commands: {{{p}poll_interval_ms: 60000}}"),
            "config: reactions.label_commands: needs review_label or fix_label (or both)",
        ),
    ] {
        assert_eq!(err(&format!("reactions:\n  {block}")), want, "{block}");
    }
}

#[test]
fn ci_feedback_is_folded_into_ci_failure_with_a_warning() {
    let w = ok("ci_feedback:\n  kind: github\n  max_retries: 4\n  max_log_lines: 7");
    let ci = w.config.reactions.ci_failure.as_ref().expect("folded");
    assert_eq!((ci.max_retries, ci.max_log_lines), (4, 7));
    assert_eq!(w.config.reactions.provider.as_deref(), Some("github"));
    let got = warnings(&w);
    assert!(
        got.iter().any(|w| w.starts_with(
            "warning: deprecated_key: ci_feedback: deprecated; read as reactions.ci_failure"
        )),
        "{got:?}"
    );
    // Its errors name the key as written.
    assert_eq!(
        err("ci_feedback: {kind: github, max_retries: -2}"),
        "config: ci_feedback.max_retries: must be non-negative"
    );
}

#[test]
fn reactions_ci_failure_wins_over_ci_feedback() {
    let w = ok(
        "ci_feedback: {kind: github, max_retries: 9}\nreactions:\n  ci_failure: {provider: github, max_retries: 1}",
    );
    assert_eq!(
        w.config.reactions.ci_failure.as_ref().unwrap().max_retries,
        1
    );
    let got = warnings(&w);
    assert!(
        got.iter().any(|w| w
            .contains("ci_feedback: deprecated and superseded by reactions.ci_failure; ignored")),
        "{got:?}"
    );
}

#[test]
fn triage_is_applied_and_not_reported_unsupported() {
    let w = ok(
        "reactions:\n  ci_failure: {provider: github, triage: true}\n  review_comments: {triage: false}\n  bot_review: {triage: true}\n  merge_conflicts: {triage: true}",
    );
    let r = &w.config.reactions;
    assert!(r.ci_failure.as_ref().unwrap().triage);
    assert!(!r.review_comments.as_ref().unwrap().triage);
    assert!(r.bot_review.as_ref().unwrap().triage);
    assert!(r.merge_conflicts.as_ref().unwrap().triage);
    let got = warnings(&w);
    assert!(!got.iter().any(|w| w.contains("triage")), "{got:?}");
}

#[test]
fn unknown_keys_inside_blocks_are_warned() {
    let w = ok(
        "reactions:\n  ci_failure: {provider: github, max_retires: 3}\n  \
         label_commands: {review_label: r, escalation: label}\n  ci_fialure: {}\n\
         self_review: {enabled: false, max_iteration: 2}",
    );
    let got = warnings(&w);
    for want in [
        "warning: unknown_key: reactions.ci_failure.max_retires: not a key this reaction reads; ignored (did you mean `max_retries`?)",
        "warning: unknown_key: reactions.label_commands.escalation: not a key this reaction reads; ignored",
        "warning: unknown_key: reactions.ci_fialure: not a reaction kind this build has; ignored (did you mean `ci_failure`?)",
        "warning: unknown_key: self_review.max_iteration: not a recognised key; ignored (did you mean `max_iterations`?)",
    ] {
        assert!(got.contains(&want.to_string()), "missing {want}\n{got:?}");
    }
    assert!(
        !got.iter().any(|w| w.contains("unsupported_key: reactions")),
        "{got:?}"
    );
    assert!(
        !got.iter()
            .any(|w| w.contains("unsupported_key: self_review")),
        "{got:?}"
    );
}

#[test]
fn self_review_defaults_and_rules() {
    let off = ok("self_review: {enabled: false, max_iterations: 99}");
    assert!(!off.config.self_review.enabled);
    let on = ok("self_review:\n  enabled: true\n  verification_commands: [cargo test]");
    let s = &on.config.self_review;
    assert!(s.enabled);
    assert_eq!(s.max_iterations, 3);
    assert_eq!(s.verification_commands, vec!["cargo test".to_string()]);
    assert_eq!(
        (s.verification_timeout_ms, s.max_diff_bytes),
        (120_000, 102_400)
    );
    assert_eq!(s.reviewer, "same");
    let base = "self_review:\n  enabled: true\n";
    let cmds = "  verification_commands: [make check]\n";
    for (extra, want) in [
        (
            "".to_string(),
            "config: self_review.verification_commands: is required (a non-empty list of commands) when self_review.enabled is true",
        ),
        (
            "  verification_commands: []\n".to_string(),
            "config: self_review.verification_commands: is required (a non-empty list of commands) when self_review.enabled is true",
        ),
        (
            "  verification_commands: [1]\n".to_string(),
            "config: self_review.verification_commands: item 0: expected string, got int",
        ),
        (
            format!("{cmds}  max_iterations: 11\n"),
            "config: self_review.max_iterations: must be between 1 and 10, got 11",
        ),
        (
            format!("{cmds}  max_iterations: 0\n"),
            "config: self_review.max_iterations: must be between 1 and 10, got 0",
        ),
        (
            format!("{cmds}  verification_timeout_ms: 0\n"),
            "config: self_review.verification_timeout_ms: must be positive",
        ),
        (
            format!("{cmds}  max_diff_bytes: -1\n"),
            "config: self_review.max_diff_bytes: must be positive",
        ),
        (
            format!("{cmds}  reviewer: other\n"),
            "config: self_review.reviewer: unsupported reviewer \"other\" (only \"same\" is supported)",
        ),
    ] {
        assert_eq!(err(&format!("{base}{extra}")), want, "{extra}");
    }
}

/// `sortie validate` on a temporary workflow: exit code and stderr.
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
fn validate_reports_provider_errors_and_ignored_blocks() {
    let (code, out) = validate(&doc(
        GITHUB_TRACKER,
        "reactions:\n  ci_failure: {provider: github}\n  review_comments: {provider: gitlab}",
    ));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("reactions.review_comments.provider: \"gitlab\" disagrees with reactions.ci_failure.provider \"github\""),
        "{out}"
    );

    let file_tracker = "tracker:\n  kind: file\n  path: issues.json\n  active_states: [To Do]\n";
    let (code, out) = validate(&doc(
        file_tracker,
        "reactions:\n  auto_merge: {provider: github}",
    ));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("must equal tracker.kind (\"file\")"), "{out}");

    let (code, out) = validate(&doc(
        file_tracker,
        "reactions:\n  auto_merge: {strategy: squash}",
    ));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("reactions_ignored"), "{out}");
}

#[test]
fn validate_accepts_triage_and_reports_ci_feedback_and_bad_values() {
    let (code, out) = validate(&doc(
        GITHUB_TRACKER,
        "ci_feedback: {kind: github}\nreactions:\n  merge_conflicts: {triage: true, max_retires: 1}",
    ));
    assert_eq!(code, 0, "{out}");
    for want in ["deprecated_key", "reactions.merge_conflicts.max_retires"] {
        assert!(out.contains(want), "missing {want}: {out}");
    }
    assert!(
        !out.contains("merge_conflicts.triage"),
        "triage is built: {out}"
    );
    let (code, out) = validate(&doc(
        GITHUB_TRACKER,
        "self_review: {enabled: true, verification_commands: [make], reviewer: other}",
    ));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("self_review.reviewer: unsupported reviewer \"other\""),
        "{out}"
    );
}

#[test]
fn validate_fails_a_template_that_misspells_a_ci_failure_key() {
    let wf = "---\ntracker:\n  kind: file\n  path: issues.json\n  active_states: [To Do]\n\
              agent: {kind: mock}\n---\n\
              {{ .issue.identifier }}{{ if .ci_failure }}{{ .ci_failure.log_exerpt }}{{ end }}\n";
    let (code, out) = validate(wf);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("log_exerpt"), "{out}");
    let fixed = wf.replace("log_exerpt", "log_excerpt");
    let (code, out) = validate(&fixed);
    assert_eq!(code, 0, "{out}");
}

/// The daemon serves `config.reactions` as the reference's table describes it.
#[test]
fn the_daemon_serves_config_reactions() {
    let fake = common::fake_github::start_repo("owner/repo", &["backlog", "review", "done"]);
    let wf = format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  \
         active_states: [backlog]\n  terminal_states: [done]\n  handoff_state: review\n\
         polling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\nagent:\n  kind: mock\n  max_turns: 1\n\
         reactions:\n  ci_failure:\n    provider: github\n    escalation: label\n  \
         review_comments: {{escalation: label}}\n  \
         bot_review: {{max_continuation_turns: 5, poll_interval_ms: 60000, bot_usernames: [review-bot]}}\n  \
         merge_conflicts: {{max_retries: 1, escalation: label}}\n  \
         auto_merge: {{strategy: squash, require_ci: true, delete_branch: true, max_retries: 0, escalation: label}}\n  \
         label_commands: {{review_label: sortie-review}}\n\
         ---\nWork on {{{{ .issue.identifier }}}}.\n",
        url = fake.url
    );
    let setup = common::Setup::new(&wf, "[]");
    let d = setup.start(&[("GITHUB_TOKEN", common::fake_github::TOKEN)]);
    let state = d.wait_state("state served", Duration::from_secs(30), |s| {
        s["config"]["reactions"].is_object()
    });
    assert_eq!(
        state["config"]["reactions"],
        serde_json::json!({
            "ci_failure": {"max_retries": 2, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "review_comments": {"max_continuation_turns": 3, "debounce_ms": 60000, "poll_interval_ms": 120000, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "bot_review": {"max_continuation_turns": 5, "poll_interval_ms": 60000, "bot_usernames": ["review-bot"], "triage": false, "escalation": "none"},
            "merge_conflicts": {"max_retries": 1, "poll_interval_ms": 60000, "triage": false, "escalation": "label", "escalation_label": "needs-human"},
            "auto_merge": {"strategy": "squash", "require_ci": true, "delete_branch": true, "poll_interval_ms": 60000, "max_retries": null, "escalation": "label", "escalation_label": "needs-human"},
            "label_commands": {"review_label": "sortie-review", "poll_interval_ms": 60000}
        })
    );
    d.stop();
}
