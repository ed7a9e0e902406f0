//! Issue 12, CLI: every help spelling exits 0 for `sortie` and each subcommand; switches take
//! Go's boolean values; `validate --format json` reports check ids.

mod common;

use common::Project;
use serde_json::json;

fn run_in(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = common::sortie_command()
        .current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|e| panic!("run sortie: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_help_spelling_prints_help_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    for sub in [None, Some("validate"), Some("demo"), Some("version")] {
        for flag in ["-h", "--help", "-help"] {
            let mut args: Vec<&str> = sub.into_iter().collect();
            args.push(flag);
            let (code, stdout, stderr) = run_in(tmp.path(), &args);
            assert_eq!(code, 0, "{args:?}: {stderr}");
            assert!(stdout.contains("Usage:"), "{args:?}: {stdout}");
            assert!(stderr.is_empty(), "{args:?}: {stderr}");
        }
    }
}

#[test]
fn dry_run_takes_go_boolean_spellings() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "D-1", "title": "Dry", "state": "To Do"}]));
    p.fake_agent_workflow("", "");
    let wf = p.workflow();
    let wf = wf.to_str().unwrap();
    for flag in ["--dry-run=true", "-dry-run", "-dry-run=1", "--dry-run"] {
        let (code, stdout, stderr) = run_in(p.dir.path(), &[flag, wf]);
        assert_eq!(code, 0, "{flag}: {stderr}");
        assert!(stdout.contains("dispatch D-1"), "{flag}: {stdout}");
    }
    // An unparsable value names the flag instead of taking the value as the workflow path.
    let (code, _, stderr) = run_in(p.dir.path(), &["--dry-run=maybe", wf]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--dry-run=maybe"), "{stderr}");
}

#[test]
fn validate_json_findings_carry_the_check_id() {
    let p = Project::new();
    p.write(
        "WORKFLOW.md",
        "---\ntracker: {kind: redmine, active_states: [open]}\nagent: {kind: aider}\nworkspace: {root: ws}\n---\nDo it\n",
    );
    let (code, stdout, _) = run_in(
        p.dir.path(),
        &["validate", "--format", "json", "WORKFLOW.md"],
    );
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let checks: Vec<&str> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["check"].as_str().unwrap_or_default())
        .collect();
    assert!(checks.contains(&"tracker_adapter"), "{stdout}");
    assert!(checks.contains(&"agent_adapter"), "{stdout}");
    for e in v["errors"].as_array().unwrap() {
        assert_ne!(e["check"], e["message"], "{stdout}");
        assert!(
            !e["check"].as_str().unwrap_or(" ").contains(' '),
            "{stdout}"
        );
    }
}
