//! `sortie validate` through the real binary.

mod common;

use common::Project;

fn validate(p: &Project, args: &[&str]) -> (i32, String, String) {
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .arg("validate")
        .args(args)
        .arg(p.workflow())
        .output()
        .expect("run sortie validate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn valid_project() -> Project {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "");
    p
}

#[test]
fn a_valid_workflow_passes_with_exit_0() {
    let p = valid_project();
    let (code, stdout, stderr) = validate(&p, &[]);
    assert_eq!(code, 0, "stderr: {stderr}");
    assert!(stdout.is_empty());
    assert!(!stderr.contains("error:"), "{stderr}");
}

#[test]
fn invalid_yaml_fails_with_exit_1_and_a_line_number() {
    let p = Project::new();
    p.write(
        "WORKFLOW.md",
        "---\ntracker:\n  kind: file\n  active_states: [To Do\npolling:\n  interval_ms: 5\n---\nbody\n",
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("error: workflow_front_matter:"), "{stderr}");
    assert!(stderr.contains("line "), "no line number in: {stderr}");
}

#[test]
fn json_format_is_one_valid_json_line() {
    let p = Project::new();
    p.write(
        "WORKFLOW.md",
        "---\ntracker: {kind: file}\n---\n{{ .issue.identifer }\n",
    );
    let (code, stdout, _) = validate(&p, &["--format", "json"]);
    assert_eq!(code, 1);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("valid JSON");
    assert_eq!(v["valid"], false);
    assert!(v["errors"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(v["warnings"].is_array());
    for e in v["errors"].as_array().into_iter().flatten() {
        assert_eq!(e["severity"], "error");
        assert!(e["check"].is_string() && e["message"].is_string());
    }

    let ok = valid_project();
    let (code, stdout, _) = validate(&ok, &["--format", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("valid JSON");
    assert_eq!(v["valid"], true);
    assert_eq!(v["errors"], serde_json::json!([]));
}

#[test]
fn template_parse_errors_and_unknown_keys_are_reported() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "mystery_section:\n  a: 1");
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace("{{ .issue.title }}", "{{ if .issue.title }}"),
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("error: template_parse:"), "{stderr}");
    assert!(stderr.contains("warning: unknown_key:"), "{stderr}");
    assert!(stderr.contains("mystery_section"), "{stderr}");
}

#[test]
fn bad_format_value_is_refused() {
    let p = valid_project();
    let (code, _, stderr) = validate(&p, &["--format", "xml"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("invalid --format value"), "{stderr}");
}

#[test]
fn missing_file_is_a_workflow_load_error() {
    let p = Project::new();
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("error: workflow_load: workflow file not found"),
        "{stderr}"
    );
}

/// The connection caps are checked with errors naming the key.
#[test]
fn connection_caps_are_checked() {
    for (server, want) in [
        (
            "  max_connections_per_client: 0\n",
            "server.max_connections_per_client: invalid value: 0 (must be an integer from 1 to 100000)",
        ),
        (
            "  max_connections: 64\n  max_connections_per_client: 65\n",
            "server.max_connections_per_client: 65 is more than server.max_connections (64)",
        ),
    ] {
        let p = Project::new();
        p.issues(serde_json::json!([]));
        p.fake_agent_workflow("", server);
        let (code, _, stderr) = validate(&p, &[]);
        assert_eq!(code, 1, "{server}: {stderr}");
        assert!(stderr.contains(want), "{server}: {stderr}");
    }
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "  max_connections_per_client: 32\n");
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("unknown_key"), "{stderr}");
}

#[test]
fn success_says_what_the_workflow_runs() {
    let p = valid_project();
    let (code, stdout, stderr) = validate(&p, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty());
    let last = stderr.lines().last().unwrap_or_default();
    let want = format!(
        "ok: {} — tracker file ({}), agent claude-code ({}), ",
        p.workflow().display(),
        p.path("issues.json").display(),
        common::FAKE_AGENT
    );
    assert!(last.starts_with(&want), "{last}\nwanted: {want}");
    let n = stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .count();
    let plural = if n == 1 { "" } else { "s" };
    assert!(
        last.ends_with(&format!(", {n} warning{plural}")),
        "{stderr}"
    );
}

#[test]
fn a_missing_issues_file_is_an_error() {
    let p = Project::new();
    p.fake_agent_workflow("", "");
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1, "{stderr}");
    let want = format!(
        "error: tracker_data_file: file.path: {} does not exist",
        p.path("issues.json").display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("ok: "), "{stderr}");
}

/// `agnet` leaves `agent` unset, so the default kind needs a command: the typo is listed
/// before the error it causes, also when the load itself fails; each error has one prefix.
#[test]
fn typos_come_first_and_each_message_has_one_prefix() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    let front = format!(
        "tracker: {{kind: file, active_states: [To Do]}}\nfile: {{path: issues.json}}\nworkspace: {{root: {}}}\nagnet: {{kind: mock}}\nclaude-code: {{permission_mode: acceptEdits}}\n",
        p.path("ws").display()
    );
    p.write(
        "WORKFLOW.md",
        &format!("---\n{front}---\nDo {{{{ .issue.title }}}}\n"),
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let typo = lines
        .iter()
        .position(|l| {
            l.starts_with("warning: unknown_key: agnet:") && l.contains("did you mean `agent`")
        })
        .unwrap_or_else(|| panic!("{stderr}"));
    let error = lines
        .iter()
        .position(|l| l.starts_with("error: config.agent.command:"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(typo < error, "{stderr}");

    // A load error: still one prefix, and the typo above it.
    p.write(
        "WORKFLOW.md",
        &format!("---\n{front}ci_feedback: {{kind: bogus}}\n---\nDo {{{{ .issue.title }}}}\n"),
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[0].starts_with("warning: unknown_key: agnet:"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with(
            "error: config.ci_feedback.kind: source control provider \"bogus\" is not supported"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("config: ci_feedback.kind"), "{stderr}");
}

/// The Claude Code example (the file tracker, every key of the kind's block) validates where it
/// lies with a `claude` on PATH: no error, no unknown key, and the ok line.
#[test]
fn the_claude_code_example_validates_in_place() {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(common::FAKE_AGENT, bin.path().join("claude")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/claude-code/WORKFLOW.md");
    let out = common::sortie_command()
        .args(["validate"])
        .arg(&example)
        .env("PATH", path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning:"), "{stderr}");
    assert!(
        stderr.contains("— tracker file (")
            && stderr.contains("agent claude-code (claude), 0 warnings"),
        "{stderr}"
    );
}

/// Runs `sortie <args> WORKFLOW.md` under an open-file limit of `nofile` (soft and hard).
fn run_with_nofile(p: &Project, nofile: u32, args: &[&str]) -> (i32, String) {
    let probe = common::sortie_command();
    let bin = probe.get_program().to_owned();
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(p.dir.path())
        .env("IS_SANDBOX", "1")
        .env("SORTIE_PRICE_TABLE_FETCH", "off")
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .arg(p.workflow());
    let out = cmd.output().unwrap_or_else(|e| panic!("run sortie: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_concurrency_cap_beyond_the_hosts_limits_is_refused_with_the_number_it_can_hold() {
    // (1000 open files - 256 kept for the daemon) / 6 per session = 124 sessions.
    let fits = Project::new();
    fits.issues(serde_json::json!([]));
    fits.fake_agent_workflow("  max_concurrent_agents: 124\n", "");
    let (code, stderr) = run_with_nofile(&fits, 1000, &["validate"]);
    assert_eq!(code, 0, "{stderr}");

    let over = Project::new();
    over.issues(serde_json::json!([]));
    over.fake_agent_workflow("  max_concurrent_agents: 125\n", "");
    let want = "agent.max_concurrent_agents is 125, but this host can hold 124 sessions at once, bound by the open-file limit (1000";
    let (code, stderr) = run_with_nofile(&over, 1000, &["validate"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(want), "{stderr}");
    assert!(stderr.contains("host_capacity"), "{stderr}");
    // The daemon refuses to start with the same words, before it dispatches anything.
    let (code, stderr) = run_with_nofile(&over, 1000, &[]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains(want), "{stderr}");
    // With the host's own limits the same cap is accepted.
    let (code, _, stderr) = validate(&over, &[]);
    assert_eq!(code, 0, "{stderr}");
}
