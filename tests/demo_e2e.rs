//! The credential-free demo (`sortie demo`) end to end: dispatches the backlog with the mock
//! agent, runs turns, hands issues off in the file, retries the scripted failure, respects the
//! blocked issue.

mod harness;

use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{SORTIE, free_port, wait_for};

fn state(port: u16) -> Option<serde_json::Value> {
    let body = ureq::get(&format!("http://127.0.0.1:{port}/api/v1/state"))
        .call()
        .ok()?
        .into_body()
        .read_to_string()
        .ok()?;
    serde_json::from_str(&body).ok()
}

fn file_state(dir: &std::path::Path, ident: &str) -> String {
    let text = std::fs::read_to_string(dir.join("issues.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    v.as_array()
        .and_then(|a| a.iter().find(|i| i["identifier"] == ident))
        .and_then(|i| i["state"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn the_demo_hands_off_retries_and_respects_the_blocked_issue() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let port = free_port();
    let log = std::fs::File::create(tmp.path().join("sortie.log")).unwrap();
    let mut child = Command::new(SORTIE)
        .args(["demo", "--dir"])
        .arg(&dir)
        .args(["--port", &port.to_string()])
        .stdin(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let guard = scopeguard(&mut child);

    // The scripted failure of DEMO-5's first session is retried with backoff.
    let s = wait_for("DEMO-5 in the retry queue", Duration::from_secs(60), || {
        state(port).filter(|s| {
            s["retrying"]
                .as_array()
                .is_some_and(|r| r.iter().any(|e| e["issue_identifier"] == "DEMO-5"))
        })
    });
    let retry = s["retrying"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["issue_identifier"] == "DEMO-5")
        .unwrap()
        .clone();
    assert_eq!(retry["attempt"], 1, "{retry}");

    // Issues are handed off in the file (Review), turns ran in the workspaces.
    for ident in ["DEMO-3", "DEMO-2", "DEMO-1"] {
        wait_for(
            &format!("{ident} handed off"),
            Duration::from_secs(60),
            || (file_state(&dir, ident) == "Review").then_some(()),
        );
        assert!(dir.join("workspaces").join(ident).join("NOTES.md").exists());
    }
    // DEMO-4 stays blocked by DEMO-7 and is never dispatched.
    assert_eq!(file_state(&dir, "DEMO-4"), "To Do");
    assert!(!dir.join("workspaces/DEMO-4").exists());
    drop(guard);
}

/// Kills the child when the test ends, pass or fail.
fn scopeguard(child: &mut std::process::Child) -> impl Drop + '_ {
    struct G<'a>(&'a mut std::process::Child);
    impl Drop for G<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    G(child)
}
