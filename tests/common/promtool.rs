//! Runs `promtool check metrics` (Debian `prometheus`) on an exposition text.

use std::io::Write;
use std::process::{Command, Stdio};

/// `None` when promtool cannot be run; otherwise whether the check passed (exit 0 and no
/// complaints) and what promtool printed.
pub fn promtool_check(text: &str) -> Option<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success() && msg.trim().is_empty(), msg))
}
