//! Lifecycle hooks: operator shell snippets run with `sh -c` inside the issue workspace, in their
//! own process group, with a scrubbed environment, merged capped output and a hard timeout.

use std::ffi::OsString;
use std::path::Path;

use super::command::{ShellEnd, ShellRun, run_shell};
use super::error::{WorkspaceError, output_tail};
pub use super::hook_kind::HookKind;
use super::output_capture::{Captured, Keep};
use super::process_group::WaitOutcome;
use crate::mask::mask;
use crossbeam_channel::Receiver;

/// Default and fallback for `hooks.timeout_ms` (a zero value means "use the default").
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 60_000;
/// Merged stdout+stderr kept per hook run (the tail; earlier bytes are dropped).
pub const MAX_HOOK_OUTPUT_BYTES: usize = 256 * 1024;
/// How much of a script is shown in logs.
pub const MAX_SCRIPT_DISPLAY_BYTES: usize = 200;

/// A hook inherits the system basics every child of sortie gets
/// ([`crate::child_env::SYSTEM_BASICS`]: `PATH`, `HOME`, locale, proxies, certificates,
/// `SSH_AUTH_SOCK`, …) and, besides these, only the variables its own script names as `$NAME`
/// or `${NAME}` (an explicit opt-in by the operator); everything else, including the daemon's
/// own `SORTIE_*` overrides, tokens and API keys, is stripped so a hook cannot print what it
/// was never meant to see. The per-invocation `SORTIE_ISSUE_ID`, `SORTIE_ISSUE_IDENTIFIER`,
/// `SORTIE_WORKSPACE`, `SORTIE_ATTEMPT` (and, for `after_run`, `SORTIE_SELF_REVIEW_STATUS` and
/// `SORTIE_SELF_REVIEW_SUMMARY_PATH`) are injected, not inherited.
pub use crate::child_env::SYSTEM_BASICS as HOOK_ENV_ALLOWLIST;

/// The configured hook scripts (`hooks.*` in WORKFLOW.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookScripts {
    pub after_create: Option<String>,
    pub before_run: Option<String>,
    pub after_run: Option<String>,
    pub before_remove: Option<String>,
    /// Per invocation; `0` means [`DEFAULT_HOOK_TIMEOUT_MS`].
    pub timeout_ms: u64,
}

impl HookScripts {
    /// The script for `kind`, if one is configured and not blank.
    pub fn script(&self, kind: HookKind) -> Option<&str> {
        let s = match kind {
            HookKind::AfterCreate => &self.after_create,
            HookKind::BeforeRun => &self.before_run,
            HookKind::AfterRun => &self.after_run,
            HookKind::BeforeRemove => &self.before_remove,
        };
        s.as_deref().filter(|s| !s.trim().is_empty())
    }

    /// The effective timeout (zero falls back to the default).
    pub fn effective_timeout_ms(&self) -> u64 {
        if self.timeout_ms == 0 {
            DEFAULT_HOOK_TIMEOUT_MS
        } else {
            self.timeout_ms
        }
    }
}

/// Per-invocation values injected into the hook environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookEnv {
    pub issue_id: String,
    pub issue_identifier: String,
    /// Retry counter, `0` on first dispatch (`SORTIE_ATTEMPT`).
    pub attempt: u32,
    /// Additional variables (e.g. `SORTIE_SELF_REVIEW_STATUS` for `after_run`); they win over
    /// inherited ones but not over the four standard injected variables.
    pub extra: Vec<(String, String)>,
}

/// The result of a hook that exited 0 (or did not run because none is configured).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutput {
    /// False when no script is configured for this hook.
    pub ran: bool,
    /// Merged stdout+stderr (tail, at most [`MAX_HOOK_OUTPUT_BYTES`]), secrets masked.
    pub output: String,
    /// True when earlier output was dropped by the cap.
    pub truncated: bool,
    pub duration_ms: u64,
}

/// Whether a parent variable is passed to a hook running `script`: a system basic
/// ([`HOOK_ENV_ALLOWLIST`]) or a variable the script names (see [`script_names_var`]).
pub fn hook_inherits(name: &str, script: &str) -> bool {
    crate::child_env::is_basic(name) || script_names_var(script, name)
}

/// Whether `script` contains `$name` (not followed by another name character) or `${name`.
pub fn script_names_var(script: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let is_name_char = |c: char| c == '_' || c.is_ascii_alphanumeric();
    script.match_indices('$').any(|(i, _)| {
        let after = &script[i + 1..];
        let after = after.strip_prefix('{').unwrap_or(after);
        after
            .strip_prefix(name)
            .is_some_and(|rest| !rest.starts_with(is_name_char))
    })
}

/// Builds the hook environment for `script`: inherited variables from `parent` (see
/// [`hook_inherits`]), then `injected` (later entries win over earlier ones and over the
/// parent).
pub fn hook_environment<I>(
    parent: I,
    script: &str,
    injected: &[(String, String)],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, _)| k.to_str().is_some_and(|k| hook_inherits(k, script)))
        .collect();
    for (k, v) in injected {
        env.retain(|(ek, _)| ek.as_os_str() != k.as_str());
        env.push((OsString::from(k), OsString::from(v)));
    }
    env
}

/// The standard injected variables for one invocation (extra first, so the standard four win).
/// An environment value cannot hold a NUL byte (the hook would not start), so tracker text has
/// each NUL replaced by `_`.
pub(crate) fn injected_vars(env: &HookEnv, workspace: &Path) -> Vec<(String, String)> {
    let mut vars = env.extra.clone();
    vars.push(("SORTIE_ISSUE_ID".into(), env.issue_id.replace('\0', "_")));
    vars.push((
        "SORTIE_ISSUE_IDENTIFIER".into(),
        env.issue_identifier.replace('\0', "_"),
    ));
    vars.push((
        "SORTIE_WORKSPACE".into(),
        workspace.to_string_lossy().into_owned(),
    ));
    vars.push(("SORTIE_ATTEMPT".into(), env.attempt.to_string()));
    vars
}

/// `s` cut to at most `max` bytes on a char boundary, with `…` when cut.
pub(crate) fn truncate_for_display(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// One hook invocation, fully specified.
pub(crate) struct HookInvocation<'a> {
    pub kind: HookKind,
    pub script: &'a str,
    pub workspace: &'a Path,
    pub env: Vec<(OsString, OsString)>,
    pub timeout_ms: u64,
    /// For log lines only (empty when unknown: the startup sweep knows only the directory name).
    pub issue_id: &'a str,
    pub issue_identifier: &'a str,
    /// A message (or a dropped sender) kills the hook early.
    pub cancel: &'a Receiver<()>,
    /// `worker.sandbox` with `hooks: true`: the hook runs under `bwrap` like an agent.
    pub sandbox: Option<&'a crate::sandbox::Sandbox>,
}

/// A hook runs with the workspace as its working directory, so a missing one is a validation
/// error rather than a confusing spawn failure.
fn check_workspace_dir(inv: &HookInvocation<'_>) -> Result<(), WorkspaceError> {
    let reason = match std::fs::metadata(inv.workspace) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => format!("workspace {:?} is not a directory", inv.workspace.display()),
        Err(e) => format!("workspace {:?}: {e}", inv.workspace.display()),
    };
    Err(WorkspaceError::HookValidate {
        hook: inv.kind,
        reason,
    })
}

/// Runs the hook and waits for it (bounded by its timeout plus the pipe grace).
pub(crate) fn run_invocation(inv: HookInvocation<'_>) -> Result<HookOutput, WorkspaceError> {
    let kind = inv.kind;
    check_workspace_dir(&inv)?;
    let script_shown = mask(&truncate_for_display(inv.script, MAX_SCRIPT_DISPLAY_BYTES));
    log::debug!(
           hook:% = kind,
    issue_id:% = inv.issue_id,
    issue_identifier:% = inv.issue_identifier,
           workspace:% = inv.workspace.display(),
           script:% = script_shown;
           "hook starting"
       );

    let ran = run_shell(ShellRun {
        script: inv.script,
        workspace: inv.workspace,
        env: inv.env,
        timeout_ms: inv.timeout_ms,
        cancel: inv.cancel,
        output_cap: MAX_HOOK_OUTPUT_BYTES,
        keep: Keep::Tail,
        sandbox: inv.sandbox,
    })
    .map_err(|source| WorkspaceError::HookStart { hook: kind, source })?;
    let (status, stopped) = match ran.end {
        ShellEnd::Exited(status) => (Some(status), None),
        ShellEnd::TimedOut => (None, Some(WaitOutcome::TimedOut)),
        ShellEnd::Cancelled => (None, Some(WaitOutcome::Cancelled)),
    };
    let captured = Captured {
        bytes: ran.output,
        total_bytes: ran.total_bytes,
        truncated: ran.truncated,
        complete: true,
    };
    let duration_ms = ran.duration_ms;
    let output = mask(&String::from_utf8_lossy(&captured.bytes));
    // Log lines carry only the tail; the full (capped) output stays in the result/error.
    let log_output = output_tail(output.trim_end()).0;

    if stopped == Some(WaitOutcome::Cancelled) {
        log::warn!(
                   hook:% = kind,
        issue_id:% = inv.issue_id,
        issue_identifier:% = inv.issue_identifier,
                   duration_ms:% = duration_ms,
                   script:% = script_shown;
                   "hook cancelled"
               );
        return Err(WorkspaceError::HookCancelled { hook: kind });
    }
    if stopped == Some(WaitOutcome::TimedOut) {
        log::warn!(
                   hook:% = kind,
        issue_id:% = inv.issue_id,
        issue_identifier:% = inv.issue_identifier,
                   duration_ms:% = duration_ms,
                   timeout_ms:% = inv.timeout_ms,
                   script:% = script_shown,
                   output:% = log_output;
                   "hook timed out"
               );
        return Err(WorkspaceError::HookTimeout {
            hook: kind,
            timeout_ms: inv.timeout_ms,
            output,
        });
    }
    if !status.is_some_and(|s| s.success()) {
        let who = Who {
            kind,
            issue_id: inv.issue_id,
            issue_identifier: inv.issue_identifier,
        };
        let shown = Shown {
            script: &script_shown,
            duration_ms,
        };
        return Err(failed(&who, status, shown, output, captured.truncated));
    }
    log::info!(
           hook:% = kind,
    issue_id:% = inv.issue_id,
    issue_identifier:% = inv.issue_identifier,
           duration_ms:% = duration_ms,
           output_bytes:% = captured.total_bytes;
           "hook completed"
       );
    Ok(HookOutput {
        ran: true,
        output,
        truncated: captured.truncated,
        duration_ms,
    })
}

/// Which hook a log line is about.
struct Who<'a> {
    kind: HookKind,
    issue_id: &'a str,
    issue_identifier: &'a str,
}

/// What the log line of a finished hook shows besides its output.
struct Shown<'a> {
    script: &'a str,
    duration_ms: u64,
}

/// Logs a hook that exited non-zero (or by a signal) and builds its error.
fn failed(
    who: &Who<'_>,
    status: Option<std::process::ExitStatus>,
    shown: Shown<'_>,
    output: String,
    output_truncated: bool,
) -> WorkspaceError {
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status.and_then(|s| s.code());
    log::warn!(
        hook:% = who.kind,
        issue_id:% = who.issue_id,
        issue_identifier:% = who.issue_identifier,
        duration_ms:% = shown.duration_ms,
        exit_code:% = exit_code.map_or_else(|| "none".to_string(), |c| c.to_string()),
        script:% = shown.script,
        output:% = output_tail(output.trim_end()).0;
        "hook failed"
    );
    WorkspaceError::HookFailed {
        hook: who.kind,
        exit_code,
        signal: status.and_then(|s| s.signal()),
        output,
        output_truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(k: &str, v: &str) -> (OsString, OsString) {
        (OsString::from(k), OsString::from(v))
    }

    #[test]
    fn environment_keeps_allowlist_and_injected_vars_only() {
        let parent = vec![
            os("PATH", "/bin"),
            os("GITHUB_TOKEN", "secret"),
            os("SORTIE_LOG_LEVEL", "debug"),
            os("SORTIE_TRACKER_API_KEY", "secret"),
            os("LC_CTYPE", "C.UTF-8"),
            os("SORTIE_TEST_DIR", "/named/by/the/script"),
            os("SORTIE_TEST", "a prefix of a named variable"),
            os("SORTIE_ISSUE_ID", "stale"),
            os("path", "lowercase is not PATH"),
        ];
        let env = hook_environment(
            parent,
            "cp x \"${SORTIE_TEST_DIR}/y\"; echo $SORTIE_ISSUE_ID",
            &[("SORTIE_ISSUE_ID".into(), "42".into())],
        );
        let keys: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            keys,
            ["PATH", "LC_CTYPE", "SORTIE_TEST_DIR", "SORTIE_ISSUE_ID"]
        );
        assert_eq!(env[3].1, OsString::from("42"));
    }

    #[test]
    fn standard_vars_win_over_extra() {
        let env = HookEnv {
            issue_id: "1".into(),
            issue_identifier: "P-1".into(),
            attempt: 0,
            extra: vec![
                ("SORTIE_ATTEMPT".into(), "99".into()),
                ("SORTIE_SELF_REVIEW_STATUS".into(), "passed".into()),
            ],
        };
        let built = hook_environment(Vec::new(), "", &injected_vars(&env, Path::new("/w/P-1")));
        let get = |k: &str| {
            built
                .iter()
                .find(|(ek, _)| ek == k)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("SORTIE_ATTEMPT").as_deref(), Some("0"));
        assert_eq!(get("SORTIE_SELF_REVIEW_STATUS").as_deref(), Some("passed"));
        assert_eq!(get("SORTIE_WORKSPACE").as_deref(), Some("/w/P-1"));
    }

    #[test]
    fn script_display_truncates_on_char_boundary() {
        let s = "é".repeat(150);
        let shown = truncate_for_display(&s, MAX_SCRIPT_DISPLAY_BYTES);
        assert!(shown.ends_with('…'));
        assert!(shown.len() <= MAX_SCRIPT_DISPLAY_BYTES + '…'.len_utf8());
        assert_eq!(truncate_for_display("short", 200), "short");
    }

    #[test]
    fn zero_timeout_falls_back_to_default() {
        let h = HookScripts::default();
        assert_eq!(h.effective_timeout_ms(), DEFAULT_HOOK_TIMEOUT_MS);
        assert!(h.script(HookKind::AfterRun).is_none());
    }
}
