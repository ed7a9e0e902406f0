//! Loader-level tests: whole WORKFLOW.md texts through `parse_workflow` / `load_workflow`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use super::*;

const WF: &str = "/srv/flows/WORKFLOW.md";

fn opts(env: &[(&str, &str)]) -> LoadOptions {
    LoadOptions {
        env_file: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        cwd: PathBuf::from("/run/cwd"),
        home: Some(PathBuf::from("/home/op")),
    }
}

/// A minimal valid front matter plus `extra` YAML lines.
fn doc(extra: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\n{extra}\n---\nHello\n"
    )
}

fn load(text: &str, o: &LoadOptions) -> Result<Workflow, ConfigError> {
    parse_workflow(text, Path::new(WF), o)
}

fn err(text: &str, o: &LoadOptions) -> String {
    match load(text, o) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn ok(text: &str, o: &LoadOptions) -> Workflow {
    match load(text, o) {
        Ok(w) => w,
        Err(e) => panic!("unexpected error {e} for:\n{text}"),
    }
}

#[test]
fn defaults_for_a_minimal_file() {
    let w = ok(&doc(""), &opts(&[]));
    let c = &w.config;
    assert_eq!(w.prompt_template, "Hello");
    // Opening line, five YAML lines (the last one blank), closing line.
    assert_eq!(w.prompt_line_offset, 7);
    assert_eq!(c.polling.interval_ms, 30_000);
    assert_eq!(c.workspace.root, PathBuf::from("/tmp/sortie_workspaces"));
    assert_eq!(c.hooks.timeout_ms, 60_000);
    assert_eq!(c.hooks.after_create, None);
    assert_eq!(c.agent.kind, "claude-code");
    assert_eq!(c.agent.command, None);
    assert_eq!(c.agent.max_turns, 20);
    assert_eq!(c.agent.max_sessions, None);
    assert_eq!(c.agent.max_tokens, None);
    assert_eq!(c.agent.max_concurrent_agents, 10);
    assert_eq!(c.agent.turn_timeout_ms, 3_600_000);
    assert_eq!(c.agent.read_timeout_ms, 5_000);
    assert_eq!(c.agent.stop_grace_ms, 5_000);
    assert_eq!(c.agent.stall_timeout_ms, Some(300_000));
    assert_eq!(c.agent.max_retry_backoff_ms, 300_000);
    assert_eq!(c.db_path, PathBuf::from("/srv/flows/.sortie.db"));
    assert_eq!(c.server, ServerConfig::default());
    assert_eq!(c.logging, LoggingConfig::default());
    assert_eq!(c.tracker.comments, TrackerComments::default());
    assert_eq!(c.tracker.handoff_state, None);
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
}

#[test]
fn tmpdir_from_injected_env() {
    let w = ok(&doc(""), &opts(&[("TMPDIR", "/var/tmp")]));
    assert_eq!(
        w.config.workspace.root,
        PathBuf::from("/var/tmp/sortie_workspaces")
    );
}

#[test]
fn no_front_matter_means_empty_config_and_whole_prompt() {
    // Empty config fails the promotion rule; the cause named is the missing front matter.
    let e = err("Just a prompt\n", &opts(&[]));
    assert!(e.starts_with("no front matter found in "), "{e}");
    assert!(e.contains("line 1 is not '---'"), "{e}");
    let w = ok(
        "Just {{ .issue.title }}\n",
        &opts(&[("SORTIE_TRACKER_ACTIVE_STATES", "Todo")]),
    );
    assert_eq!(w.prompt_template, "Just {{ .issue.title }}");
    assert_eq!(w.prompt_line_offset, 0);
}

#[test]
fn full_typed_config() {
    let text = "---
tracker:
  kind: jira
  endpoint: https://x.example/$NOT_EXPANDED
  api_key: $JIRA_USER:${JIRA_TOKEN}
  project: $PROJ
  active_states: [To Do, In Progress]
  terminal_states: [Done]
  query_filter: labels = bot
  handoff_state: Review
  in_progress_state: in progress
  no_change_state: Won't Do
  comments: {on_dispatch: true, on_completion: false, on_failure: true}
polling: {interval_ms: \"15000\"}
workspace: {root: ~/ws/$TEAM}
hooks:
  after_create: git init -q .
  before_run: echo $HOME
  timeout_ms: 1000.0
agent:
  kind: mock
  command: ' fake-agent --x '
  max_turns: 3
  max_sessions: 4
  max_tokens: 500000
  max_cost_usd: 2.5
  max_daily_cost_usd: 0
  max_concurrent_agents: 2
  max_concurrent_agents_by_state: {In Progress: 1, Review: 0, Todo: x}
  turn_timeout_ms: 100
  read_timeout_ms: 200
  stop_grace_ms: 1500
  stall_timeout_ms: 0
  max_retry_backoff_ms: 0
db_path: data/sortie.db
server: {port: 8080, host: 0.0.0.0}
logging: {level: DEBUG, format: Json}
mock: {turn_delay_ms: 5}
---
Body
";
    let o = opts(&[
        ("JIRA_USER", "me@example.com"),
        ("JIRA_TOKEN", "tok-123456"),
        ("PROJ", "ABC"),
        ("TEAM", "core"),
    ]);
    let w = ok(text, &o);
    let c = &w.config;
    let t = &c.tracker;
    assert_eq!(t.kind, "jira");
    assert_eq!(
        t.endpoint.as_deref(),
        Some("https://x.example/$NOT_EXPANDED")
    );
    assert_eq!(t.api_key.as_deref(), Some("me@example.com:tok-123456"));
    assert_eq!(t.project.as_deref(), Some("ABC"));
    assert_eq!(t.query_filter.as_deref(), Some("labels = bot"));
    assert_eq!(t.handoff_state.as_deref(), Some("Review"));
    assert_eq!(t.in_progress_state.as_deref(), Some("in progress"));
    assert_eq!(t.no_change_state.as_deref(), Some("Won't Do"));
    assert!(t.comments.on_dispatch && !t.comments.on_completion && t.comments.on_failure);
    assert_eq!(c.polling.interval_ms, 15_000);
    assert_eq!(c.workspace.root, PathBuf::from("/home/op/ws/core"));
    assert_eq!(c.hooks.after_create.as_deref(), Some("git init -q ."));
    assert_eq!(c.hooks.before_run.as_deref(), Some("echo $HOME"));
    assert_eq!(c.hooks.timeout_ms, 1000);
    let a = &c.agent;
    assert_eq!(a.kind, "mock");
    assert_eq!(a.command.as_deref(), Some("fake-agent --x"));
    assert_eq!(a.max_turns, 3);
    assert_eq!(a.max_sessions, Some(4));
    assert_eq!(a.max_tokens, Some(500_000));
    assert_eq!(a.max_cost_usd, Some(2.5));
    assert_eq!(a.max_daily_cost_usd, None);
    assert_eq!(a.max_concurrent_agents, 2);
    assert_eq!(
        a.max_concurrent_agents_by_state,
        BTreeMap::from([("in progress".to_string(), 1)])
    );
    assert_eq!(a.turn_timeout_ms, 100);
    assert_eq!(a.read_timeout_ms, 200);
    assert_eq!(a.stop_grace_ms, 1500);
    assert_eq!(
        c.agent_settings(Path::new(".")).stop_grace(),
        std::time::Duration::from_millis(1500)
    );
    assert_eq!(a.stall_timeout_ms, None);
    assert_eq!(a.max_retry_backoff_ms, 300_000);
    assert_eq!(c.db_path, PathBuf::from("/srv/flows/data/sortie.db"));
    assert_eq!(c.server.port, Some(8080));
    assert_eq!(c.server.host, Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
    assert_eq!(c.logging.level, Some(LogLevel::Debug));
    assert_eq!(c.logging.format, Some(LogFormat::Json));
    let mock = c
        .adapter_block("mock")
        .map(|m| m.get("turn_delay_ms").cloned());
    assert_eq!(mock, Some(Some(serde_json::json!(5))));
    assert_eq!(c.adapter_block("absent"), None);
    // Secrets: the whole key and each substituted value.
    let s = c.secrets();
    assert!(s.contains(&"me@example.com:tok-123456".to_string()));
    assert!(s.contains(&"tok-123456".to_string()));
    assert!(s.contains(&"me@example.com".to_string()));
    // The by-state entries that were dropped are reported.
    assert_eq!(
        w.warnings
            .iter()
            .filter(|x| x.check == "invalid_value")
            .count(),
        2,
        "{:?}",
        w.warnings
    );
    // Debug output never shows the key.
    assert!(!format!("{c:?}").contains("tok-123456"));
}

#[test]
fn load_workflow_reads_relative_path_and_reports_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("WORKFLOW.md"),
        doc("file: {path: issues.json}"),
    )
    .unwrap();
    let mut o = opts(&[]);
    o.cwd = dir.path().to_path_buf();
    let w = load_workflow(Path::new("WORKFLOW.md"), &o).unwrap();
    assert_eq!(w.path, dir.path().join("WORKFLOW.md"));
    assert_eq!(
        w.config.tracker_path(),
        Some(dir.path().join("issues.json").as_path())
    );
    assert_eq!(w.config.db_path, dir.path().join(".sortie.db"));

    let e = load_workflow(Path::new("nope.md"), &o).unwrap_err();
    let text = e.to_string();
    let want = format!(
        "workflow file not found: {}: ",
        dir.path().join("nope.md").display()
    );
    assert!(text.starts_with(&want), "{text}");
    assert_eq!(e.check(), "workflow_load");
}

#[test]
fn file_path_rules() {
    // Relative to the workflow dir, `~` expanded, tracker.path accepted as fallback.
    let w = ok(&doc("file: {path: ./data/issues.json}"), &opts(&[]));
    assert_eq!(
        w.config.tracker_path,
        Some(PathBuf::from("/srv/flows/./data/issues.json"))
    );
    let w = ok(&doc("file: {path: ~/i.json}"), &opts(&[]));
    assert_eq!(
        w.config.tracker_path,
        Some(PathBuf::from("/home/op/i.json"))
    );
    let w = ok(&doc("  path: /abs/i.json"), &opts(&[]));
    assert_eq!(w.config.tracker_path, Some(PathBuf::from("/abs/i.json")));
    let w = ok(
        &doc("claude-code: {permission_mode: acceptEdits}"),
        &opts(&[]),
    );
    assert_eq!(w.config.tracker_path, None);
    assert_eq!(
        w.config.config_preflight(),
        vec![
            "file.path is required for tracker kind \"file\"".to_string(),
            "agent.command is required for agent kind \"claude-code\"".to_string(),
        ]
    );
    let checks: Vec<String> = w.config.preflight().into_iter().map(|p| p.check).collect();
    assert_eq!(checks, ["config.file.path", "config.agent.command"]);
}

#[test]
fn path_rules_for_workspace_and_db() {
    let w = ok(
        &doc("workspace: {root: rel/ws}\ndb_path: /abs/x.db"),
        &opts(&[]),
    );
    assert_eq!(w.config.workspace.root, PathBuf::from("/run/cwd/rel/ws"));
    assert_eq!(w.config.db_path, PathBuf::from("/abs/x.db"));
    let w = ok(&doc("db_path: ~/x.db"), &opts(&[]));
    assert_eq!(w.config.db_path, PathBuf::from("/home/op/x.db"));
    let w = ok(&doc("db_path: \"\""), &opts(&[]));
    assert_eq!(w.config.db_path, PathBuf::from("/srv/flows/.sortie.db"));
    assert_eq!(
        err(&doc("db_path: 5"), &opts(&[])),
        "config: db_path: expected string, got int"
    );
    assert_eq!(
        err(&doc("db_path: $UNSET_DB"), &opts(&[])),
        "config: db_path: resolved to empty (check environment variable)"
    );
    let mut no_home = opts(&[]);
    no_home.home = None;
    assert_eq!(
        err(&doc("workspace: {root: ~/ws}"), &no_home),
        "config: workspace.root: cannot expand ~: home directory is unknown"
    );
}

#[test]
fn integer_coercion_errors_name_the_field() {
    for (yaml, want) in [
        (
            "polling: {interval_ms: soon}",
            "config: polling.interval_ms: invalid integer value: soon",
        ),
        (
            "agent: {max_turns: 2.5}",
            "config: agent.max_turns: invalid integer value: 2.5",
        ),
        (
            "agent: {stall_timeout_ms: [1]}",
            "config: agent.stall_timeout_ms: invalid integer value: [1]",
        ),
        (
            "agent: {max_sessions: -1}",
            "config: agent.max_sessions: must be non-negative",
        ),
        (
            "agent: {max_tokens: -1}",
            "config: agent.max_tokens: must be non-negative",
        ),
        (
            "agent: {max_tokens: lots}",
            "config: agent.max_tokens: invalid integer value: lots",
        ),
        (
            "agent: {max_cost_usd: -2}",
            "config: agent.max_cost_usd: must be non-negative",
        ),
        (
            "agent: {max_cost_usd: cheap}",
            "config: agent.max_cost_usd: invalid number value: cheap",
        ),
        (
            "polling: {interval_ms: -5}",
            "config: polling.interval_ms: must be positive",
        ),
        (
            "agent: {read_timeout_ms: -1}",
            "config: agent.read_timeout_ms: must be non-negative",
        ),
        (
            "agent: {stop_grace_ms: -1}",
            "config: agent.stop_grace_ms: must be non-negative",
        ),
    ] {
        assert_eq!(err(&doc(yaml), &opts(&[])), want, "{yaml}");
    }
}

#[test]
fn lenient_fields_fall_back_with_warnings() {
    let w = ok(
        &doc("hooks: {timeout_ms: -1, after_run: 5}\nagent: {max_turns: -3, kind: [x]}"),
        &opts(&[]),
    );
    assert_eq!(w.config.hooks.timeout_ms, 60_000);
    assert_eq!(w.config.hooks.after_run, None);
    assert_eq!(w.config.agent.max_turns, 1);
    assert_eq!(w.config.agent.kind, "claude-code");
    let rendered: Vec<String> = w.warnings.iter().map(ToString::to_string).collect();
    assert!(
        rendered.contains(
            &"warning: invalid_value: hooks.timeout_ms: -1 is not a positive integer; using 60000"
                .to_string()
        ),
        "{rendered:?}"
    );
    assert!(
        rendered.contains(&"warning: clamped: agent.max_turns: -3 is below 1; using 1".to_string()),
        "{rendered:?}"
    );
    assert!(
        rendered.contains(
            &"warning: type_mismatch: hooks.after_run: expected string, got int; treated as empty"
                .to_string()
        ),
        "{rendered:?}"
    );
    assert!(rendered.contains(&"warning: type_mismatch: agent.kind: expected string, got []interface {}; treated as empty".to_string()), "{rendered:?}");
}

#[test]
fn stall_timeout_absent_zero_negative() {
    let stall = |y: &str| ok(&doc(y), &opts(&[])).config.agent.stall_timeout_ms;
    assert_eq!(stall(""), Some(300_000));
    assert_eq!(stall("agent: {stall_timeout_ms: 0}"), None);
    assert_eq!(stall("agent: {stall_timeout_ms: '42'}"), Some(42));
    // Negative was read as "off"; it is now an error naming the key.
    assert_eq!(
        err(&doc("agent: {stall_timeout_ms: -1}"), &opts(&[])),
        "config: agent.stall_timeout_ms: must be non-negative (0 turns stall detection off)"
    );
}

#[test]
fn poll_interval_zero_and_negative_backoff_are_errors() {
    assert_eq!(
        err(&doc("polling: {interval_ms: 0}"), &opts(&[])),
        "config: polling.interval_ms: must be positive"
    );
    assert_eq!(
        err(&doc("agent: {max_retry_backoff_ms: -5}"), &opts(&[])),
        "config: agent.max_retry_backoff_ms: must be non-negative"
    );
    let w = ok(&doc("agent: {max_retry_backoff_ms: 0}"), &opts(&[]));
    assert_eq!(w.config.agent.max_retry_backoff_ms, 300_000);
}

#[test]
fn max_same_failures_defaults_to_three_and_refuses_what_is_not_a_count() {
    let w = ok(&doc("agent: {}"), &opts(&[]));
    assert_eq!(w.config.agent.max_same_failures, 3);
    let w = ok(&doc("agent: {max_same_failures: 0}"), &opts(&[]));
    assert_eq!(w.config.agent.max_same_failures, 0, "0 turns the count off");
    let w = ok(&doc("agent: {max_same_failures: 5}"), &opts(&[]));
    assert_eq!(w.config.agent.max_same_failures, 5);
    assert_eq!(
        err(&doc("agent: {max_same_failures: -1}"), &opts(&[])),
        "config: agent.max_same_failures: must be a whole number of runs, 1 or more (0 turns the same-cause hold off)"
    );
    let bad = err(&doc("agent: {max_same_failures: many}"), &opts(&[]));
    assert!(bad.contains("agent.max_same_failures"), "{bad}");
}

#[test]
fn state_names_are_trimmed_and_case_folded() {
    let w = ok(
        &doc("agent:\n  max_concurrent_agents_by_state: {' To Do ': 2, 'to do': 1, ' ': 3}"),
        &opts(&[]),
    );
    assert_eq!(
        w.config.agent.max_concurrent_agents_by_state,
        BTreeMap::from([("to do".to_string(), 1)])
    );
    assert_eq!(
        err(&doc("  handoff_state: ' to do '"), &opts(&[])),
        "config: tracker.handoff_state: \"to do\" collides with active state \"To Do\""
    );
    let w = ok(&doc("  handoff_state: ' Review '"), &opts(&[]));
    assert_eq!(w.config.tracker.handoff_state.as_deref(), Some("Review"));
}

#[test]
fn worker_hosts_load_once_each_in_order_with_their_options() {
    let w = ok(
        &doc(
            "worker:\n  ssh_hosts: [build1, 'ci@build2:2222', build1, '[::1]:2200']\n  max_concurrent_agents_per_host: 2\n  ssh_strict_host_key_checking: yes",
        ),
        &opts(&[]),
    );
    let worker = &w.config.worker;
    let names: Vec<&str> = worker.hosts.iter().map(|h| h.name()).collect();
    assert_eq!(names, ["build1", "ci@build2:2222", "[::1]:2200"]);
    assert_eq!(worker.hosts[1].target.destination, "ci@build2");
    assert_eq!(worker.hosts[1].target.port, Some(2222));
    assert_eq!(worker.max_per_host, Some(2));
    assert_eq!(
        worker.options.strict_host_key_checking,
        crate::ssh::StrictHostKeyChecking::Yes
    );
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    // No hosts: every session runs here; a cap of 0 or less is no cap.
    let w = ok(
        &doc("worker: {ssh_hosts: [], max_concurrent_agents_per_host: 0}"),
        &opts(&[]),
    );
    assert!(!w.config.worker.remote());
    assert_eq!(w.config.worker.max_per_host, None);
    // Self-review does not run on SSH hosts, and loading says so.
    let w = ok(
        &doc(
            "worker: {ssh_hosts: [h]}\nself_review: {enabled: true, verification_commands: [make]}",
        ),
        &opts(&[]),
    );
    assert!(
        w.warnings
            .iter()
            .any(|w| w.check == "self_review_local_only" && w.field == "self_review"),
        "{:?}",
        w.warnings
    );
    assert_eq!(
        w.config.worker.options.strict_host_key_checking,
        crate::ssh::StrictHostKeyChecking::AcceptNew
    );
}

#[test]
fn bad_worker_values_are_errors_except_the_cap() {
    for (extra, want) in [
        (
            "worker: {ssh_hosts: build1}",
            "config: worker.ssh_hosts: expected a list of host names, got string",
        ),
        (
            "worker: {ssh_hosts: [3]}",
            "config: worker.ssh_hosts[0]: expected string, got int",
        ),
        (
            "worker: {ssh_hosts: [ok, '-oProxyCommand=x']}",
            "config: worker.ssh_hosts[1]: \"-oProxyCommand=x\" starts with '-' (it would be read as an ssh option)",
        ),
        (
            "worker: {ssh_hosts: ['h:99999']}",
            "config: worker.ssh_hosts[0]: \"h:99999\" has port \"99999\" (expected 1 to 65535)",
        ),
        (
            "worker: {ssh_hosts: [h], ssh_strict_host_key_checking: maybe}",
            "config: worker.ssh_strict_host_key_checking: invalid value \"maybe\" (expected accept-new, yes or no)",
        ),
        (
            "worker: {ssh_hosts: [h], ssh_config_file: ./no-such-ssh-config}",
            "is not a file",
        ),
    ] {
        let e = err(&doc(extra), &opts(&[]));
        assert!(e.contains(want), "{extra}: {e}");
    }
    let w = ok(
        &doc(
            "worker: {ssh_hosts: [h], max_concurrent_agents_per_host: lots, ssh_hostz: 1}\nnotifications: {x: 1}\nagent: {max_cost_usd: 3}\nagnet: {}",
        ),
        &opts(&[]),
    );
    assert_eq!(w.config.worker.max_per_host, None);
    let got: Vec<String> = w.warnings.iter().map(ToString::to_string).collect();
    for want in [
        "warning: invalid_value: worker.max_concurrent_agents_per_host: invalid integer value: lots; no per-host cap applies",
        "warning: unknown_key: notifications.x: not a recognised key; ignored",
        "warning: unknown_key: agnet: not a recognised top-level key; ignored (did you mean `agent`?)",
    ] {
        assert!(got.contains(&want.to_string()), "{got:?}");
    }
    assert!(
        got.iter().any(|w| w.contains("worker.ssh_hostz")),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|w| w.contains("agent.max_cost_usd")),
        "the money budget is enforced: {got:?}"
    );
}

#[test]
fn state_field_rules() {
    let base =
        "---\ntracker:\n  kind: file\n  active_states: [To Do, Doing]\n  terminal_states: [Done]\n";
    let e = |extra: &str, env: &[(&str, &str)]| err(&format!("{base}{extra}\n---\n"), &opts(env));
    assert_eq!(
        e("  handoff_state: \"\"", &[]),
        "config: tracker.handoff_state: must not be empty"
    );
    assert_eq!(
        e("  handoff_state: $NOPE", &[]),
        "config: tracker.handoff_state: resolved to empty (check environment variable)"
    );
    assert_eq!(
        e("  handoff_state: 3", &[]),
        "config: tracker.handoff_state: expected string, got int"
    );
    assert_eq!(
        e("  handoff_state: to do", &[]),
        "config: tracker.handoff_state: \"to do\" collides with active state \"To Do\""
    );
    assert_eq!(
        e("  handoff_state: $H", &[("H", "DONE")]),
        "config: tracker.handoff_state: \"DONE\" collides with terminal state \"Done\""
    );
    assert_eq!(
        e("  in_progress_state: Review", &[]),
        "config: tracker.in_progress_state: \"Review\" is not in active_states; reconciliation would immediately cancel the worker"
    );
    assert_eq!(
        e("  in_progress_state: done", &[]),
        "config: tracker.in_progress_state: \"done\" collides with terminal state \"Done\""
    );
    assert_eq!(
        e("  no_change_state: Doing", &[]),
        "config: tracker.no_change_state: \"Doing\" collides with active state \"Doing\""
    );
    assert_eq!(
        e("  no_change_state: ''", &[]),
        "config: tracker.no_change_state: must not be empty"
    );
    assert_eq!(
        e("  in_progress_state: [x]", &[]),
        "config: tracker.in_progress_state: expected string, got []interface {}"
    );
    // in_progress_state equal to handoff_state is impossible when handoff is not active, so
    // the "not in active_states" rule fires first; no_change may equal handoff.
    let w = ok(
        &format!(
            "{base}  handoff_state: Review\n  no_change_state: review\n  in_progress_state: $IP\n---\n"
        ),
        &opts(&[("IP", "Doing")]),
    );
    assert_eq!(w.config.tracker.in_progress_state.as_deref(), Some("Doing"));
    assert_eq!(w.config.tracker.no_change_state.as_deref(), Some("review"));
}

#[test]
fn comments_must_be_a_map_of_real_bools() {
    assert_eq!(
        err(&doc("  comments: yes please"), &opts(&[])),
        "config: tracker.comments: expected map, got string"
    );
    assert_eq!(
        err(&doc("  comments: {on_dispatch: \"true\"}"), &opts(&[])),
        "config: tracker.comments.on_dispatch: expected bool, got string"
    );
    assert_eq!(
        err(&doc("  comments: {on_failure: 1}"), &opts(&[])),
        "config: tracker.comments.on_failure: expected bool, got int"
    );
}

#[test]
fn whole_value_mode_only_expands_leading_dollar() {
    let w = ok(
        &doc("  endpoint: ' $EP '\n  query_filter: project = $P\n  project: ${P}"),
        &opts(&[("EP", "https://e"), ("P", "X")]),
    );
    assert_eq!(w.config.tracker.endpoint.as_deref(), Some("https://e"));
    assert_eq!(
        w.config.tracker.query_filter.as_deref(),
        Some("project = $P")
    );
    assert_eq!(w.config.tracker.project.as_deref(), Some("X"));
}

#[test]
fn overrides_replace_yaml_and_skip_var_expansion() {
    let o = opts(&[
        ("SORTIE_TRACKER_API_KEY", "$LITERAL"),
        ("SORTIE_WORKSPACE_ROOT", "~/w/$X"),
        ("SORTIE_DB_PATH", "db/$X.db"),
        ("SORTIE_AGENT_MAX_TURNS", "9"),
        ("SORTIE_TRACKER_TERMINAL_STATES", "Closed, Won't Fix"),
        ("X", "expanded"),
    ]);
    let w = ok(&doc("  api_key: yaml-key\nagent: {max_turns: 2}"), &o);
    let c = &w.config;
    assert_eq!(c.tracker.api_key.as_deref(), Some("$LITERAL"));
    assert_eq!(c.workspace.root, PathBuf::from("/home/op/w/$X"));
    assert_eq!(c.db_path, PathBuf::from("/srv/flows/db/$X.db"));
    assert_eq!(c.agent.max_turns, 9);
    assert_eq!(c.tracker.terminal_states, vec!["Closed", "Won't Fix"]);
}

#[test]
fn override_errors_carry_the_variable_name() {
    assert_eq!(
        err(&doc(""), &opts(&[("SORTIE_AGENT_MAX_SESSIONS", "-2")])),
        "config: agent.max_sessions: must be non-negative (from SORTIE_AGENT_MAX_SESSIONS)"
    );
    assert_eq!(
        err(&doc(""), &opts(&[("SORTIE_TRACKER_HANDOFF_STATE", "done")])),
        "config: tracker.handoff_state: \"done\" collides with terminal state \"Done\" (from SORTIE_TRACKER_HANDOFF_STATE)"
    );
    assert_eq!(
        err(&doc(""), &opts(&[("SORTIE_AGENT_STALL_TIMEOUT_MS", "1.5")])),
        "config: agent.stall_timeout_ms: invalid integer value: 1.5 (from SORTIE_AGENT_STALL_TIMEOUT_MS)"
    );
}

#[test]
fn secret_looking_dotenv_entries_are_secrets_even_unused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.env"),
        "SORTIE_WEBHOOK_SECRET_GITHUB=dotenv-hook-secret-1\nSORTIE_AGENT_KIND=mock\nSORTIE_X_TOKEN=true\n",
    )
    .unwrap();
    let mut o = opts(&[]);
    o.cwd = dir.path().to_path_buf();
    o.env_file = Some(PathBuf::from("prod.env"));
    let s = ok(&doc(""), &o).config.secrets();
    assert!(s.contains(&"dotenv-hook-secret-1".to_string()), "{s:?}");
    assert!(
        !s.contains(&"mock".to_string()),
        "not a secret-looking name"
    );
    assert!(
        !s.contains(&"true".to_string()),
        "a switch word is no secret"
    );
}

#[test]
fn dotenv_precedence_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prod.env"),
        "# settings\nSORTIE_AGENT_KIND=mock\nSORTIE_AGENT_COMMAND=\"from-dotenv\"\nPATH=/ignored\n",
    )
    .unwrap();
    let mut o = opts(&[("SORTIE_AGENT_COMMAND", "from-env")]);
    o.cwd = dir.path().to_path_buf();
    o.env_file = Some(PathBuf::from("prod.env"));
    let w = ok(&doc("agent: {kind: codex, command: from-yaml}"), &o);
    assert_eq!(w.config.agent.kind, "mock");
    assert_eq!(w.config.agent.command.as_deref(), Some("from-env"));

    // SORTIE_ENV_FILE is used when --env-file is absent; --env-file wins when both are set.
    let mut o2 = opts(&[("SORTIE_ENV_FILE", "prod.env")]);
    o2.cwd = dir.path().to_path_buf();
    assert_eq!(ok(&doc(""), &o2).config.agent.kind, "mock");
    o2.env_file = Some(PathBuf::from("other.env"));
    let w = ok(&doc(""), &o2);
    assert_eq!(w.config.agent.kind, "claude-code");
    let missing = dir.path().join("other.env");
    assert_eq!(
        w.warnings,
        vec![ConfigWarning::new(
            "dotenv_missing",
            missing.display().to_string(),
            "env file not found; continuing without it"
        )]
    );

    std::fs::write(
        dir.path().join("bad.env"),
        "SORTIE_A=1\nexport SORTIE_B=2\n",
    )
    .unwrap();
    o.env_file = Some(PathBuf::from("bad.env"));
    assert_eq!(
        err(&doc(""), &o),
        format!(
            "config: dotenv {}:2: invalid key \"export SORTIE_B\"",
            dir.path().join("bad.env").display()
        )
    );
}

#[test]
fn yaml_errors_report_file_lines() {
    // `bad: [` sits on file line 4.
    let text = "---\ntracker:\n  kind: file\nbad: [\n---\nBody\n";
    let e = load(text, &opts(&[])).unwrap_err();
    let ConfigError::Parse { line, .. } = &e else {
        panic!("expected parse error, got {e}");
    };
    assert!(line.is_some_and(|l| l >= 4), "{line:?}");
    assert!(
        e.to_string()
            .contains("(did you forget the closing '---' delimiter?)")
    );
    assert_eq!(e.check(), "workflow_front_matter");

    // A tab-indented key is an error at its own line.
    let text = "---\na: 1\nb: 2\nc:\n\t- x\n---\n";
    let e = load(text, &opts(&[])).unwrap_err();
    assert!(matches!(e, ConfigError::Parse { line: Some(5), .. }), "{e}");
    assert!(e.to_string().contains("line 5"), "{e}");
}

#[test]
fn non_map_front_matter_error() {
    assert_eq!(
        err("---\n- a\n---\nbody", &opts(&[])),
        format!("workflow front matter in {WF} must be a YAML map: got []interface {{}} (line 2)")
    );
}

#[test]
fn unknown_keys_and_non_map_sections_are_warnings() {
    let text = "---
tracker: {kind: file, active_states: [A], colour: red, comments: {on_spam: true}}
file: {path: i.json}
claude-code: {model: x}
mock: {}
agent: {kind: mock, bogus: 1}
polling: 5
shiny: true
worker: {ssh_hosts: []}
---
";
    let w = ok(text, &opts(&[]));
    let got: Vec<(String, String)> = w
        .warnings
        .iter()
        .map(|x| (x.check.clone(), x.field.clone()))
        .collect();
    let want = |c: &str, f: &str| (c.to_string(), f.to_string());
    assert!(got.contains(&want("unknown_key", "claude-code")), "{got:?}");
    assert!(got.contains(&want("unknown_key", "shiny")), "{got:?}");
    assert!(
        got.contains(&want("unknown_key", "tracker.colour")),
        "{got:?}"
    );
    assert!(
        got.contains(&want("unknown_key", "tracker.comments.on_spam")),
        "{got:?}"
    );
    assert!(got.contains(&want("unknown_key", "agent.bogus")), "{got:?}");
    assert!(got.contains(&want("type_mismatch", "polling")), "{got:?}");
    assert!(
        !got.iter()
            .any(|(_, f)| f == "file" || f == "mock" || f == "worker"),
        "{got:?}"
    );
    assert_eq!(w.config.polling.interval_ms, 30_000);
    // Unknown keys are kept for the CLI and adapters.
    assert!(w.config.raw.contains_key("shiny"));
    assert_eq!(
        w.warnings[0].to_string(),
        format!(
            "warning: {}: {}: {}",
            w.warnings[0].check, w.warnings[0].field, w.warnings[0].message
        )
    );
}

#[test]
fn server_and_logging_validation() {
    for (yaml, want) in [
        (
            "server: {port: '8080'}",
            "config: server.port: invalid port value: 8080 (must be an integer from 0 to 65535)",
        ),
        (
            "server: {port: 70000}",
            "config: server.port: invalid port value: 70000 (must be an integer from 0 to 65535)",
        ),
        (
            "server: {port: 80.5}",
            "config: server.port: invalid port value: 80.5 (must be an integer from 0 to 65535)",
        ),
        (
            "server: {host: localhost}",
            "config: server.host: invalid IP address: localhost",
        ),
        (
            "logging: {level: loud}",
            "config: logging.level: invalid value \"loud\" (expected debug, info, warn or error)",
        ),
        (
            "logging: {format: xml}",
            "config: logging.format: invalid value \"xml\" (expected text or json)",
        ),
    ] {
        assert_eq!(err(&doc(yaml), &opts(&[])), want, "{yaml}");
    }
    let w = ok(&doc("server: {port: 0.0, host: '::1'}"), &opts(&[]));
    assert_eq!(w.config.server.port, Some(0));
    assert_eq!(w.config.server.host, Some("::1".parse().unwrap()));
}

#[test]
fn preflight_checks() {
    let w = ok(
        "---\ntracker: {kind: redmine, active_states: [open], api_key: $GH}\nagent: {kind: aider}\n---\n",
        &opts(&[]),
    );
    assert_eq!(
        w.config.config_preflight(),
        vec![
            "tracker kind \"redmine\" is not supported by this build (supported: file, gitea, github, gitlab, jira, linear)"
                .to_string(),
            "agent kind \"aider\" is not supported by this build (supported: agent-client-protocol, claude-code, codex, copilot-cli, kiro, mock, opencode)"
                .to_string(),
        ]
    );
    let checks: Vec<String> = w.config.preflight().into_iter().map(|p| p.check).collect();
    assert_eq!(checks, ["tracker_adapter", "agent_adapter"]);
    let w = ok(
        "---\ntracker: {active_states: [open]}\nagent: {kind: mock}\n---\n",
        &opts(&[]),
    );
    assert_eq!(
        w.config.config_preflight(),
        vec!["tracker.kind is required".to_string()]
    );
    let w = ok(
        &doc("file: {path: i.json}\nagent: {kind: mock}"),
        &opts(&[]),
    );
    assert!(w.config.config_preflight().is_empty());
}

#[test]
fn terminal_states_alone_satisfy_promotion() {
    let w = ok(
        "---\ntracker: {kind: file, terminal_states: [Done]}\n---\n",
        &opts(&[]),
    );
    assert!(w.config.tracker.active_states.is_empty());
    assert_eq!(
        err(
            "---\ntracker: {kind: file, active_states: 5}\n---\n",
            &opts(&[])
        ),
        "tracker.active_states and tracker.terminal_states are both empty; at least one must be configured"
    );
}

#[test]
fn relative_path_given_to_parse_workflow_is_made_absolute() {
    let w = parse_workflow(&doc(""), Path::new("flows/WORKFLOW.md"), &opts(&[])).unwrap();
    assert_eq!(w.path, PathBuf::from("/run/cwd/flows/WORKFLOW.md"));
    assert_eq!(w.config.db_path, PathBuf::from("/run/cwd/flows/.sortie.db"));
}

#[test]
fn from_process_uses_the_current_directory() {
    let o = LoadOptions::from_process(Some(PathBuf::from("x.env")));
    assert_eq!(Some(o.cwd.clone()), std::env::current_dir().ok());
    assert_eq!(o.effective_env_file(), Some(o.cwd.join("x.env")));
}

#[test]
fn adapter_settings_carry_core_fields_and_the_pass_through_block() {
    let text = "---
tracker: {kind: file, active_states: [To Do], handoff_state: Review}
file: {path: i.json, kind: other, extra: 1}
agent: {kind: claude-code, command: claude, max_turns: 3, stall_timeout_ms: 0}
claude-code: {max_turns: 50, model: opus, command: ignored}
---
";
    let w = ok(text, &opts(&[]));
    let t = w.config.tracker_settings();
    assert_eq!(t.kind, "file");
    assert_eq!(t.path, Some(PathBuf::from("/srv/flows/i.json")));
    assert_eq!(t.block["extra"], 1);
    assert_eq!(t.active_states, vec!["To Do".to_string()]);
    let a = w.config.agent_settings(Path::new("/srv/flows"));
    assert_eq!(a.command.as_deref(), Some("claude"));
    assert_eq!(a.block["max_turns"], 50);
    assert_eq!(a.block["model"], "opus");
    assert_eq!(a.turn_timeout_ms, 3_600_000);
}

#[test]
fn the_poll_byte_cap_is_an_integer_of_at_least_one_mebibyte() {
    let o = opts(&[]);
    assert_eq!(ok(&doc(""), &o).config.tracker.max_poll_bytes, None);
    let w = ok(&doc("  max_poll_bytes: 2097152"), &o);
    assert_eq!(w.config.tracker.max_poll_bytes, Some(2_097_152));
    assert_eq!(w.config.tracker_settings().max_poll_bytes, Some(2_097_152));
    assert_eq!(
        err(&doc("  max_poll_bytes: 1000"), &o),
        "config: tracker.max_poll_bytes: must be at least 1048576 (1 MiB), got 1000"
    );
    assert!(err(&doc("  max_poll_bytes: lots"), &o).contains("tracker.max_poll_bytes"));
    assert!(err(&doc("  max_poll_bytes: -5"), &o).contains("must be at least"));
    assert!(
        !ok(&doc("  max_poll_bytes: 2097152"), &o)
            .warnings
            .iter()
            .any(|w| w.to_string().contains("max_poll_bytes")),
        "a known key"
    );
}
