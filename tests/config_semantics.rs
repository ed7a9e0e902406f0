//! Configuration semantics through the real binary: keys this build does not act on, typos,
//! numeric values the README rejects, state names with stray spaces, the tracker file's base
//! directory and the check ids of `validate --format json`.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Project, set_server_port, spawn};
use serde_json::{Value, json};

/// `sortie validate [args] <workflow>` run in `cwd`: exit code, stdout, stderr.
fn validate_in(cwd: &Path, workflow: &Path, args: &[&str]) -> (i32, String, String) {
    let out = common::sortie_command()
        .current_dir(cwd)
        .arg("validate")
        .args(args)
        .arg(workflow)
        .env_remove("RUST_LOG")
        .output()
        .expect("run sortie validate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn validate(p: &Project, args: &[&str]) -> (i32, String, String) {
    validate_in(p.dir.path(), &p.workflow(), args)
}

/// `validate --format json`: exit code and the parsed document.
fn validate_json(p: &Project) -> (i32, Value) {
    let (code, stdout, stderr) = validate(p, &["--format", "json"]);
    let v = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (code, v)
}

/// A fake-agent project with two `To Do` issues; `agent_yaml` under `agent:`, `extra_yaml`
/// at the top level.
fn project(agent_yaml: &str, extra_yaml: &str) -> Project {
    let p = Project::new();
    p.issues(json!([
        {"id": "1", "identifier": "A-1", "title": "one", "state": "To Do"},
        {"id": "2", "identifier": "A-2", "title": "two", "state": "To Do"},
    ]));
    p.fake_agent_workflow(agent_yaml, extra_yaml);
    p
}

/// Runs the daemon on `p`'s workflow and returns its exit code and stderr, or panics when it
/// is still running after `limit` (it is killed first).
fn run_to_exit(p: &Project, limit: Duration) -> (i32, String) {
    let mut child = common::sortie_command()
        .current_dir(p.dir.path())
        .arg(p.workflow())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sortie");
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut s) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut err);
                }
                return (status.code().unwrap_or(-1), err);
            }
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("sortie did not exit within {limit:?}");
            }
        }
    }
}

#[test]
fn a_bad_ssh_host_is_an_error_for_validate_and_startup() {
    let p = project(
        "",
        "worker:\n  ssh_hosts: [build1.example, 'ci@build2 example']",
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("worker.ssh_hosts[1]: \"ci@build2 example\" contains ' '"),
        "{stderr}"
    );
    let (code, stderr) = run_to_exit(&p, Duration::from_secs(20));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("worker.ssh_hosts[1]"), "{stderr}");
    // Nothing ran: no database, no workspace.
    assert!(!p.workspace("A-1").exists());

    // With SSH workers the agent command is looked up on the hosts, not here.
    let p = project("", "worker:\n  ssh_hosts: [build1.example]");
    let text = std::fs::read_to_string(p.workflow()).expect("workflow");
    let text = text.replace(common::FAKE_AGENT, "no-such-agent-cli-here");
    p.write("WORKFLOW.md", &text);
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 0, "{stderr}");

    // Good hosts and an empty list are fine and silent.
    for worker in [
        "worker:\n  ssh_hosts: []",
        "worker:\n  ssh_hosts: [build1.example, 'ci@build2.example:2222']\n  max_concurrent_agents_per_host: 2",
    ] {
        let p = project("", worker);
        let (code, _, stderr) = validate(&p, &[]);
        assert_eq!(code, 0, "{stderr}");
        assert!(!stderr.contains("worker"), "{stderr}");
    }
}

#[test]
fn keys_this_build_does_not_act_on_are_named_as_unsupported() {
    let p = project(
        "  max_cost_usd: 5\n  max_daily_cost_usd: 20\n",
        "reactions:\n  ci_failure: {triage: true}\n\
         token_rates:\n  claude: {input: 3}\ndispatch:\n  rules: []\nworker:\n  ssh_hosts: []\n  max_concurrent_agents_per_host: 2",
    );
    let (code, v) = validate_json(&p);
    assert_eq!(code, 0, "{v}");
    let unsupported: Vec<String> = v["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["check"] == "unsupported_key")
        .filter_map(|w| w["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        !unsupported.iter().any(|m| m.starts_with("dispatch")),
        "dispatch is built: {unsupported:?}"
    );
    assert!(
        !unsupported.iter().any(|m| m.starts_with("worker")),
        "SSH workers are built: {unsupported:?}"
    );
    assert!(
        !unsupported.iter().any(|m| m.contains("triage")),
        "triage runs are built: {unsupported:?}"
    );

    // The daemon's startup names none of them either.
    let d = p.start();
    let log = d.log_text();
    assert!(
        !log.contains("field=reactions.ci_failure.triage"),
        "triage runs are built: {log}"
    );
    assert!(
        !log.contains("field=agent.max_cost_usd"),
        "agent.max_cost_usd is enforced: {log}"
    );
    d.stop();
}

#[test]
fn a_misspelled_top_level_key_gets_the_closest_known_key() {
    let p = project(
        "",
        "agnet:\n  max_turns: 3\npolling_:\n  interval_ms: 5\nzzzz: 1",
    );
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: unknown_key: agnet: not a recognised top-level key; ignored (did you mean `agent`?)"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `polling`?"), "{stderr}");
    assert!(
        stderr.contains("warning: unknown_key: zzzz: not a recognised top-level key; ignored\n"),
        "{stderr}"
    );
}

/// The workflow of `project` with one `key: value` line under `section:` replaced or added.
fn with_line(p: &Project, section: &str, line: &str) {
    let text = std::fs::read_to_string(p.workflow()).expect("read workflow");
    let header = format!("\n{section}:\n");
    let at = text.find(&header).expect("section present") + header.len();
    let key = line.split(':').next().unwrap_or_default().trim();
    let mut lines: Vec<&str> = text[at..].lines().collect();
    lines.retain(|l| !l.trim_start().starts_with(&format!("{key}:")));
    let new = format!("{}{line}\n{}\n", &text[..at], lines.join("\n"));
    p.write("WORKFLOW.md", &new);
}

#[test]
fn numeric_values_the_readme_rejects_are_errors_naming_the_key() {
    for (section, line, check) in [
        ("polling", "  interval_ms: 0", "config.polling.interval_ms"),
        ("polling", "  interval_ms: -1", "config.polling.interval_ms"),
        (
            "agent",
            "  stall_timeout_ms: -1",
            "config.agent.stall_timeout_ms",
        ),
        (
            "agent",
            "  max_retry_backoff_ms: -1000",
            "config.agent.max_retry_backoff_ms",
        ),
    ] {
        let p = project("", "");
        with_line(&p, section, line);
        let (code, _, stderr) = validate(&p, &[]);
        assert_eq!(code, 1, "{line}: {stderr}");
        assert!(
            stderr.contains(&format!("error: {check}:")),
            "{line}: {stderr}"
        );
    }
    // 0 turns stall detection off; a backoff cap of 0 means the default.
    for (section, line) in [
        ("agent", "  stall_timeout_ms: 0"),
        ("agent", "  max_retry_backoff_ms: 0"),
    ] {
        let p = project("", "");
        with_line(&p, section, line);
        let (code, _, stderr) = validate(&p, &[]);
        assert_eq!(code, 0, "{line}: {stderr}");
    }
}

#[test]
fn state_names_are_trimmed_and_compared_case_insensitively() {
    // A per-state cap written with stray spaces still caps the state.
    let p = project(
        "  max_concurrent_agents_by_state:\n    \" To Do \": 1\n",
        "",
    );
    let out = common::sortie_command()
        .current_dir(p.dir.path())
        .arg("--dry-run")
        .arg(p.workflow())
        .env_remove("RUST_LOG")
        .output()
        .expect("run sortie --dry-run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("dry run complete: would_dispatch=1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("held A-2: agent slots of state \"To Do\" taken (1/1)"),
        "{stdout}"
    );

    // A handoff state that is an active state once trimmed is refused.
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow_full("  handoff_state: ' to do '", "", "");
    let (code, _, stderr) = validate(&p, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("error: config.tracker.handoff_state:")
            && stderr.contains("collides with active state \"To Do\""),
        "{stderr}"
    );
}

/// A workflow in `flows/` naming `issues.json`, which exists only at the project root.
fn workflow_in_subfolder(p: &Project) -> std::path::PathBuf {
    p.issues(json!([]));
    let text = format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: issues.json\n\
         agent:\n  kind: mock\nworkspace:\n  root: {ws}\nserver:\n  port: {port}\n---\nDo {{{{ .issue.title }}}}\n",
        ws = p.path("ws").display(),
        port = p.port(),
    );
    p.write("flows/WORKFLOW.md", &text);
    p.path("flows/WORKFLOW.md")
}

#[test]
fn a_tracker_file_relative_to_the_working_directory_is_used_with_a_warning() {
    let p = Project::new();
    let wf = workflow_in_subfolder(&p);
    let (code, _, stderr) = validate_in(p.dir.path(), &wf, &[]);
    assert_eq!(code, 0, "{stderr}");
    let want = format!(
        "warning: data_path_from_cwd: file.path: {} does not exist; using {}",
        p.path("flows/issues.json").display(),
        p.path("issues.json").display()
    );
    assert!(stderr.contains(&want), "{stderr}");

    // Beside the workflow wins, silently.
    p.write("flows/issues.json", "[]");
    let (code, _, stderr) = validate_in(p.dir.path(), &wf, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("data_path_from_cwd"), "{stderr}");
    let _ = std::fs::remove_file(p.path("flows/issues.json"));

    // Logged at startup, once.
    let log = p.path("sortie.log");
    let d = spawn(&log, Some(p.port()), |port| {
        set_server_port(&wf, port);
        let mut cmd = common::sortie_command();
        cmd.current_dir(p.dir.path())
            .arg(&wf)
            .env_remove("RUST_LOG");
        cmd
    });
    let text = d.log_text();
    assert_eq!(
        text.matches("check=data_path_from_cwd field=file.path")
            .count(),
        1,
        "{text}"
    );
    d.stop();
}

#[test]
fn json_findings_carry_check_ids_not_messages() {
    let p = Project::new();
    p.issues(json!([]));
    p.write(
        "WORKFLOW.md",
        &format!(
            "---\ntracker: {{kind: file, active_states: [To Do]}}\nagent: {{kind: claude-code}}\n\
             workspace: {{root: {}}}\nagnet: {{}}\n---\nDo {{{{ .issue.title }}}}\n",
            p.path("ws").display()
        ),
    );
    let (code, v) = validate_json(&p);
    assert_eq!(code, 1, "{v}");
    let checks = |kind: &str| -> Vec<String> {
        v[kind]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                assert_ne!(d["check"], d["message"], "{d}");
                d["check"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    let errors = checks("errors");
    assert!(
        errors.contains(&"config.file.path".to_string())
            && errors.contains(&"config.agent.command".to_string()),
        "{v}"
    );
    for c in errors.iter().chain(checks("warnings").iter()) {
        assert!(
            !c.is_empty() && !c.contains(' '),
            "a check id, not a message: {c:?} in {v}"
        );
    }
    assert!(
        checks("warnings").contains(&"unknown_key".to_string()),
        "{v}"
    );
}
