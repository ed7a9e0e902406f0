//! Logs through the real binary: JSON lines with `--log-format json`, secrets masked.

mod common;

use std::time::Duration;

use common::{Project, wait_for};
use serde_json::json;

const SECRET: &str = "s3cr3t-token-value-42";

#[test]
fn json_logs_mask_configured_secrets_everywhere() {
    let p = Project::new();
    p.issues(json!([{"id": "1", "identifier": "L-1", "title": "Leaky hook", "state": "To Do"}]));
    p.scenario("default", &[json!({"init": {}})]);
    p.fake_agent_workflow_full(
        "  handoff_state: Review\n  api_key: $SORTIE_TEST_TOKEN",
        "",
        "",
    );
    // A before_run hook that prints the secret and fails: its output is logged.
    let wf = std::fs::read_to_string(p.workflow()).unwrap();
    p.write(
        "WORKFLOW.md",
        &wf.replace(
            "  before_remove:",
            "  before_run: echo \"token is $SORTIE_TEST_TOKEN\"; exit 3\n  before_remove:",
        ),
    );
    std::fs::create_dir_all(p.path("markers")).unwrap();
    let log = std::fs::File::create(p.path("sortie.log")).unwrap();
    let mut child = common::sortie_command()
        .current_dir(p.dir.path())
        .args(["--log-format", "json", "--port", "0"])
        .arg(p.workflow())
        .env("SORTIE_TEST_TOKEN", SECRET)
        .env("SORTIE_TEST_SCENARIOS", p.path("scenarios"))
        .env("SORTIE_TEST_MARKERS", p.path("markers"))
        .stderr(log)
        .spawn()
        .unwrap();
    let text = wait_for("the hook failure logged", Duration::from_secs(30), || {
        let t = p.log();
        t.contains("scheduling retry").then_some(t)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(!text.contains(SECRET), "secret leaked:\n{text}");
    assert!(text.contains("[redacted]"), "{text}");
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["time"].is_string() && v["level"].is_string() && v["msg"].is_string());
    }
}

#[test]
fn bad_log_flags_are_refused() {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow("", "");
    for (args, want) in [
        (vec!["--log-level", "loud"], "unknown log level \"loud\""),
        (vec!["--log-format", "xml"], "unknown log format \"xml\""),
        (vec!["--host", "localhost"], "must be an IP address"),
        (vec!["--port", "70000"], "invalid port"),
    ] {
        let out = common::sortie_command()
            .current_dir(p.dir.path())
            .args(&args)
            .arg(p.workflow())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
