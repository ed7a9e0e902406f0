//! The dashboard's pending-reaction rows (`assets/reactions.js`) under Node with a minimal DOM
//! stand-in (tests/browser/reactions_test.mjs): the facts each row shows (the triage verdict
//! among them), the escalation highlight and trigger, the pull request link, and the request
//! "Check now" sends. The
//! browser test cannot show these rows, because a daemon without the reaction engine holds
//! none.
//!
//! Skips with a printed reason when `node` is missing; under CI (`CI` set) that fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;

fn node() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("node"))
            .find(|p| p.is_file())
    })
}

#[test]
fn reaction_rows_render_and_check_now_posts_the_route() {
    let Some(node) = node() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the dashboard reaction test needs node under CI"
        );
        eprintln!("SKIP dashboard reaction test: node not found");
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(node)
        .arg(root.join("tests/browser/reactions_test.mjs"))
        .arg(root.join("assets"))
        .output()
        .unwrap_or_else(|e| panic!("node did not start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
