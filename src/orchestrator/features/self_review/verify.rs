//! The verification commands: each `self_review.verification_commands` entry runs with `sh -c`
//! in the workspace under the hooks' environment rules, in its own process group, killed with
//! that group at `verification_timeout_ms`; its merged output is capped (the tail) and masked.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::agent::text::cut_chars;
use crate::mask::mask;
use crate::workspace::{HookEnv, Keep, OperatorCommand, ShellEnd, WorkspaceManager};

/// Output kept per command for the review and fix prompts (the tail).
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// Output kept per command in the stored audit trail (the tail).
const RECORDED_OUTPUT_BYTES: usize = 2 * 1024;
/// Longest command text kept in the audit trail, in chars.
const MAX_COMMAND_CHARS: usize = 500;

/// One command's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandResult {
    /// The command as configured, masked.
    pub command: String,
    /// `None` when it did not exit by itself (a signal, a timeout, a start failure).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Why it could not run, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The masked output tail (at most [`MAX_OUTPUT_BYTES`]; the record keeps less).
    #[serde(serialize_with = "recorded_tail")]
    pub output: String,
    pub output_truncated: bool,
}

impl CommandResult {
    /// Exited 0 in time.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && self.error.is_none()
    }

    /// `passed`, `failed (exit N)`, `timed out`, … for prompts and the summary.
    pub fn outcome_words(&self) -> String {
        match (self.passed(), self.timed_out, &self.error, self.exit_code) {
            (true, ..) => "passed".into(),
            (_, true, ..) => "timed out".into(),
            (_, _, Some(e), _) => format!("could not run: {e}"),
            (_, _, None, Some(code)) => format!("failed (exit {code})"),
            (_, _, None, None) => "failed (ended by a signal)".into(),
        }
    }
}

fn recorded_tail<S: serde::Serializer>(output: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tail(output, RECORDED_OUTPUT_BYTES))
}

/// The last `max` bytes of `s`, cut on a char boundary.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// What running the commands needs.
pub struct Verifier<'a> {
    pub workspaces: &'a WorkspaceManager,
    pub workspace: &'a Path,
    pub env: &'a HookEnv,
    pub timeout_ms: u64,
    pub cancel: &'a crossbeam_channel::Receiver<()>,
    pub metrics: &'a crate::metrics::Metrics,
}

impl Verifier<'_> {
    /// Runs one command.
    pub fn run(&self, command: &str) -> CommandResult {
        let spec = OperatorCommand {
            script: command,
            timeout_ms: self.timeout_ms.max(1),
            output_cap: MAX_OUTPUT_BYTES,
            keep: Keep::Tail,
        };
        let shown = mask(&cut_chars(command, MAX_COMMAND_CHARS));
        let ran = match self
            .workspaces
            .run_command(self.workspace, &spec, self.env, self.cancel)
        {
            Ok(ran) => ran,
            Err(e) => {
                log::warn!(
                    issue_identifier:% = self.env.issue_identifier,
                    command:% = shown,
                    error:% = e.to_string();
                    "verification command could not start"
                );
                return CommandResult {
                    command: shown,
                    exit_code: None,
                    timed_out: false,
                    error: Some(mask(&e.to_string())),
                    duration_ms: 0,
                    output: String::new(),
                    output_truncated: false,
                };
            }
        };
        self.metrics.self_review_verification(
            command,
            Duration::from_millis(ran.duration_ms).as_secs_f64(),
        );
        let result = CommandResult {
            command: shown,
            exit_code: ran.exit_code(),
            timed_out: ran.end == ShellEnd::TimedOut,
            error: (ran.end == ShellEnd::Cancelled).then(|| "cancelled".to_string()),
            duration_ms: ran.duration_ms,
            output: mask(&String::from_utf8_lossy(&ran.output)),
            output_truncated: ran.truncated,
        };
        log::info!(
            issue_identifier:% = self.env.issue_identifier,
            command:% = result.command,
            outcome:% = result.outcome_words(),
            duration_ms:% = result.duration_ms;
            "verification command finished"
        );
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::HookScripts;

    fn verify(command: &str, timeout_ms: u64) -> CommandResult {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let wm = WorkspaceManager::new(d.path().to_path_buf(), HookScripts::default());
        let metrics = crate::metrics::Metrics::new(&Default::default());
        let env = HookEnv::default();
        let never = crossbeam_channel::never();
        Verifier {
            workspaces: &wm,
            workspace: d.path(),
            env: &env,
            timeout_ms,
            cancel: &never,
            metrics: &metrics,
        }
        .run(command)
    }

    #[test]
    fn outcomes_read_as_words() {
        let ok = verify("echo fine", 30_000);
        assert!(ok.passed());
        assert_eq!(
            (ok.outcome_words(), ok.output.as_str()),
            ("passed".into(), "fine\n")
        );
        let failed = verify("echo broken >&2; exit 2", 30_000);
        assert!(!failed.passed());
        assert_eq!(failed.outcome_words(), "failed (exit 2)");
        assert_eq!(failed.output, "broken\n");
        let slow = verify("sleep 30", 100);
        assert!(slow.timed_out && !slow.passed());
        assert_eq!(slow.outcome_words(), "timed out");
    }

    #[test]
    fn the_record_keeps_a_shorter_tail() {
        let r = verify("head -c 5000 /dev/zero | tr '\\0' a; echo END", 30_000);
        assert_eq!(r.output.len(), 5004);
        let json = serde_json::to_value(&r).unwrap_or_default();
        let kept = json["output"].as_str().unwrap_or_default();
        assert_eq!(kept.len(), RECORDED_OUTPUT_BYTES);
        assert!(kept.ends_with("END\n"));
        assert_eq!(tail("é", 1), "");
    }
}
