//! WORKFLOW.md and the issues file as the real binary meets them: prompts that cannot render,
//! encodings, special files, oversized files. Every error names its real cause.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Project;

/// Runs sortie with `args` in the project; killed (and the test failed) after 20 s.
fn run(p: &Project, args: &[&str]) -> (i32, String, String) {
    let mut child = common::sortie_command()
        .current_dir(p.dir.path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sortie");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sortie {args:?} hung (killed after 20 s)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out: Output = child.wait_with_output().expect("output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn validate(p: &Project) -> (i32, String, String) {
    run(p, &["validate", "WORKFLOW.md"])
}

fn dry_run(p: &Project) -> (i32, String, String) {
    run(p, &["--dry-run", "WORKFLOW.md"])
}

/// A valid project with one candidate issue; returns it and its WORKFLOW.md text.
fn project() -> (Project, String) {
    let p = Project::new();
    p.issues(serde_json::json!([
        {"id": "1", "identifier": "T-1", "title": "one", "state": "To Do"}
    ]));
    p.fake_agent_workflow("", "");
    let text = std::fs::read_to_string(p.workflow()).expect("read workflow");
    (p, text)
}

/// The project with the prompt body replaced by `body`.
fn with_body(body: &str) -> (Project, usize) {
    let (p, text) = project();
    let end = text.rfind("---\n").expect("closing delimiter") + 4;
    let line = text[..end].lines().count() + 1;
    p.write("WORKFLOW.md", &format!("{}{body}\n", &text[..end]));
    (p, line)
}

#[test]
fn the_valid_project_passes() {
    let (p, _) = project();
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = dry_run(&p);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

#[test]
fn a_misspelled_key_fails_validate_with_key_and_line() {
    let (p, line) = with_body("Work on {{ .issue.titel }}");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("error: template_render:"), "{stderr}");
    assert!(stderr.contains("titel"), "{stderr}");
    assert!(stderr.contains(&format!("line {line}")), "{stderr}");
}

#[test]
fn a_misspelled_key_fails_the_dry_run() {
    let (p, _) = with_body("Work on {{ .issue.titel }}");
    let (code, stdout, stderr) = dry_run(&p);
    assert_ne!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("titel"), "{stderr}");
}

#[test]
fn a_candidate_whose_prompt_does_not_render_fails_the_dry_run() {
    // Renders for the representative issue (it has a parent); T-1 has none.
    let (p, line) = with_body("Part of {{ .issue.parent.identifier }}");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = dry_run(&p);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("prompt for T-1 does not render"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("line {line}")), "{stderr}");
    assert!(stdout.contains("dry run failed"), "{stdout}");
}

#[test]
fn an_undefined_template_or_variable_fails_validate() {
    for body in ["{{ template \"x\" }}", "{{ $y }}", "{{ .nope }}"] {
        let (p, _) = with_body(body);
        let (code, _, stderr) = validate(&p);
        assert_eq!(code, 1, "{body}: {stderr}");
        assert!(stderr.contains("line "), "{body}: {stderr}");
    }
}

#[test]
fn every_documented_field_renders() {
    let (p, _) = with_body(
        "{{ .issue.id }} {{ .issue.identifier }} {{ .issue.title }} {{ .issue.description }} \
         {{ .issue.priority }} {{ .issue.state }} {{ .issue.branch_name }} {{ .issue.url }} \
         {{ .issue.labels }} {{ .issue.assignee }} {{ .issue.issue_type }} \
         {{ .issue.parent.identifier }} {{ range .issue.comments }}{{ .body }}{{ end }} \
         {{ range .issue.blocked_by }}{{ .identifier }}{{ end }} {{ .attempt }} \
         {{ .run.turn_number }} {{ .run.max_turns }} {{ .run.is_continuation }}",
    );
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_leading_blank_line_says_no_front_matter_with_the_line() {
    let (p, text) = project();
    p.write("WORKFLOW.md", &format!("\n{text}"));
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("no front matter found"), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
    assert!(!stderr.contains("both empty"), "{stderr}");
}

#[test]
fn a_file_without_front_matter_says_so() {
    let (p, _) = project();
    p.write("WORKFLOW.md", "Just a prompt {{ .issue.title }}\n");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("no front matter found"), "{stderr}");
}

#[test]
fn cr_only_line_ends_are_accepted() {
    let (p, text) = project();
    p.write("WORKFLOW.md", &text.replace('\n', "\r"));
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn utf8_bom_and_utf16_with_bom_are_decoded() {
    let (p, text) = project();
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(text.as_bytes());
    std::fs::write(p.workflow(), &bom).expect("write");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "UTF-8 BOM: {stderr}");

    let mut le = vec![0xFF, 0xFE];
    le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    std::fs::write(p.workflow(), &le).expect("write");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "UTF-16 LE: {stderr}");

    let mut be = vec![0xFE, 0xFF];
    be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    std::fs::write(p.workflow(), &be).expect("write");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 0, "UTF-16 BE: {stderr}");
}

#[test]
fn utf16_without_bom_is_named() {
    let (p, text) = project();
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    std::fs::write(p.workflow(), &le).expect("write");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("NUL byte"), "{stderr}");
    assert!(stderr.contains("UTF-16"), "{stderr}");
    assert!(!stderr.contains("both empty"), "{stderr}");
}

#[test]
fn a_directory_or_unreadable_file_is_not_reported_as_missing() {
    let (p, text) = project();
    std::fs::remove_file(p.workflow()).expect("rm");
    std::fs::create_dir(p.workflow()).expect("mkdir");
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(!stderr.contains("not found"), "{stderr}");
    assert!(stderr.contains("a directory"), "{stderr}");
    std::fs::remove_dir(p.workflow()).expect("rmdir");

    p.write("WORKFLOW.md", &text);
    std::fs::set_permissions(p.workflow(), std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(p.workflow()).is_ok() {
        // Running as root: permissions do not stop reading.
        return;
    }
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(!stderr.contains("not found"), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
}

fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

#[test]
fn a_fifo_workflow_is_refused_without_hanging() {
    let (p, _) = project();
    std::fs::remove_file(p.workflow()).expect("rm");
    mkfifo(&p.workflow());
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert!(stderr.contains("FIFO"), "{stderr}");
    let (code, _, stderr) = dry_run(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("FIFO"), "{stderr}");
}

#[test]
fn a_fifo_issues_file_is_refused_without_hanging() {
    let (p, _) = project();
    std::fs::remove_file(p.path("issues.json")).expect("rm");
    mkfifo(&p.path("issues.json"));
    let (code, stdout, stderr) = dry_run(&p);
    assert_eq!(code, 1, "{stdout}");
    assert!(stderr.contains("FIFO"), "{stderr}");
}

#[test]
fn an_issues_file_with_a_utf8_bom_is_read() {
    let (p, _) = project();
    let mut bytes = vec![0xEF, 0xBB, 0xBF];
    bytes.extend_from_slice(&std::fs::read(p.path("issues.json")).expect("read"));
    std::fs::write(p.path("issues.json"), &bytes).expect("write");
    let (code, stdout, stderr) = dry_run(&p);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("dispatch T-1"), "{stdout}");
}

#[test]
fn an_oversized_workflow_is_refused_quickly() {
    let (p, text) = project();
    // 3 MiB of template text: over the file cap.
    let big = format!("{text}{}", "{{ .issue.title }} x\n".repeat(150_000));
    p.write("WORKFLOW.md", &big);
    let started = Instant::now();
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("too large"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // 1.5 MiB: under the file cap, over the template cap.
    let big = format!("{text}{}", "{{ .issue.title }} x\n".repeat(75_000));
    p.write("WORKFLOW.md", &big);
    let (code, _, stderr) = validate(&p);
    assert_eq!(code, 1);
    assert!(stderr.contains("prompt template is too large"), "{stderr}");
}

#[test]
fn a_broken_workflow_keeps_dispatching_under_the_last_good_config() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.scenario(
        "default",
        &[
            serde_json::json!({"init": {}}),
            serde_json::json!({"assistant": {"text": "done", "input_tokens": 1, "output_tokens": 1}}),
            serde_json::json!({"result": {"subtype": "success", "text": "ok"}}),
        ],
    );
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("first poll", Duration::from_secs(20), |s| {
        s["health"]["workflow"]["status"] == "pass"
    });
    p.write("WORKFLOW.md", "---\ntracker: [not, a, map\n---\n");
    d.wait_state(
        "the failed reload in health",
        Duration::from_secs(20),
        |s| s["health"]["workflow"]["status"] == "fail",
    );
    // A new issue arrives while the file is broken: it is dispatched under the last good config.
    p.issues(serde_json::json!([
        {"id": "1", "identifier": "T-1", "title": "one", "state": "To Do"}
    ]));
    common::wait_for("T-1 handed off", Duration::from_secs(30), || {
        (p.issue_state("1") == "Review").then_some(())
    });
    let s = d.state();
    assert_eq!(s["health"]["workflow"]["status"], "fail", "{s}");
    assert!(
        s["health"]["workflow"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("YAML")),
        "{s}"
    );
}

#[test]
fn a_reload_whose_prompt_does_not_render_keeps_the_last_good_prompt() {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("", "");
    let d = p.start();
    d.wait_state("first poll", Duration::from_secs(20), |s| {
        s["health"]["workflow"]["status"] == "pass"
    });
    let text = std::fs::read_to_string(p.workflow()).expect("read workflow");
    p.write(
        "WORKFLOW.md",
        &text.replace("{{ .issue.title }}", "{{ .issue.titel }}"),
    );
    let s = d.wait_state(
        "the refused reload in health",
        Duration::from_secs(20),
        |s| s["health"]["workflow"]["status"] == "fail",
    );
    let error = s["health"]["workflow"]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("titel"), "{s}");
    assert!(error.contains("line "), "{s}");
}

#[test]
fn a_fifo_env_file_is_refused_without_hanging() {
    let (p, _) = project();
    mkfifo(&p.path("fifo.env"));
    let (code, _, stderr) = run(&p, &["validate", "--env-file", "fifo.env", "WORKFLOW.md"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("FIFO"), "{stderr}");
}
