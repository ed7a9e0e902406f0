//! Checks before a Copilot session: the CLI answers `--version` (the canary) and some GitHub
//! credential is there for it, an environment token or a logged-in `gh`. Without one every
//! turn would end in the CLI's "no authentication" refusal, so the session is refused with
//! [`AgentErrorKind::AgentAuthFailed`] and a message saying how to log in.

use crate::agent::{AgentError, AgentErrorKind};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `copilot --version` may take.
pub const CANARY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `gh auth status` may take.
pub const GH_TIMEOUT: Duration = Duration::from_secs(2);
/// The environment variables the CLI takes a token from, in its order of preference.
pub const TOKEN_VARS: &[&str] = &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"];

/// What a person does to give the CLI a credential.
pub const LOGIN_HINT: &str = "log the CLI in: run `copilot` and use its /login command (or \
     `gh auth login`), or set COPILOT_GITHUB_TOKEN (or GH_TOKEN / GITHUB_TOKEN) in sortie's \
     environment to a token with the Copilot Requests permission";

/// Whether a line of the CLI's plain-text output is its refusal for missing credentials:
/// "No authentication information found" (current CLIs) or a line opening with
/// "Error: Not authenticated" (older ones). Other "not authenticated" text, e.g. from an MCP
/// server, is not the CLI's own refusal.
pub fn is_auth_failure_text(text: &str) -> bool {
    let t = text.trim_start().to_ascii_lowercase();
    t.contains("no authentication information found") || t.starts_with("error: not authenticated")
}

/// The refusal message for a turn or session that has no credential.
pub fn auth_failed_message(detail: &str) -> String {
    format!("copilot is not authenticated ({detail}): {LOGIN_HINT}")
}

/// The environment the session's processes get (`agent::env`).
type Env = [(std::ffi::OsString, std::ffi::OsString)];

/// Runs the canary, then the credential check, both in the session's environment `env`.
pub fn check(
    program: &str,
    command_args: &[String],
    cwd: &Path,
    env: &Env,
) -> Result<(), AgentError> {
    canary(program, command_args, cwd, env)?;
    credentials(cwd, env)
}

fn canary(program: &str, command_args: &[String], cwd: &Path, env: &Env) -> Result<(), AgentError> {
    let mut args = command_args.to_vec();
    args.push("--version".into());
    let not_found = |why: String| {
        AgentError::new(
            AgentErrorKind::AgentNotFound,
            format!("`{program} --version` {why}"),
        )
    };
    match run_bounded(program, &args, cwd, CANARY_TIMEOUT, env) {
        Ok((Some(0), _)) => Ok(()),
        Ok((Some(code), out)) => Err(not_found(format!("exited {code}: {}", excerpt(&out)))),
        Ok((None, _)) => Err(not_found(format!(
            "did not answer within {} s",
            CANARY_TIMEOUT.as_secs()
        ))),
        Err(e) => Err(not_found(format!("could not run: {e}"))),
    }
}

fn credentials(cwd: &Path, env: &Env) -> Result<(), AgentError> {
    // What the agent will see, not what sortie has: a token withheld from it does not count.
    let has_token = env
        .iter()
        .any(|(k, v)| TOKEN_VARS.iter().any(|t| k == *t) && !v.is_empty());
    if has_token {
        return Ok(());
    }
    let detail = match run_bounded(
        "gh",
        &["auth".into(), "status".into()],
        cwd,
        GH_TIMEOUT,
        env,
    ) {
        Ok((Some(0), _)) => return Ok(()),
        Ok((Some(_), _)) => {
            "no token in COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, and `gh auth status` reports no login"
        }
        Ok((None, _)) => {
            "no token in COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, and `gh auth status` did not answer in time"
        }
        Err(_) => "no token in COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN, and no `gh` to ask",
    };
    Err(AgentError::new(
        AgentErrorKind::AgentAuthFailed,
        auth_failed_message(detail),
    ))
}

/// Runs a short command in its own process group with null stdin, giving up (and killing the
/// group) after `timeout`. Returns the exit code (`None` on timeout or death by signal) and
/// the start of its combined output.
fn run_bounded(
    program: &str,
    args: &[String],
    cwd: &Path,
    timeout: Duration,
    env: &Env,
) -> std::io::Result<(Option<i32>, String)> {
    let mut cmd = Command::new(program);
    crate::agent::process::set_base_env(&mut cmd, Some(env));
    crate::process_signal::orphans::tag_helper(&mut cmd);
    let mut child = cmd
        .args(args)
        .current_dir(cwd)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut pipe| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.by_ref().take(64 << 10).read_to_end(&mut buf);
            buf
        })
    })
    .collect();
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Whatever the command left behind (or the command itself, on timeout) goes with it.
    let _ = crate::process_signal::signal_group(pid, crate::process_signal::Signal::KILL);
    if status.is_none() {
        let _ = child.wait();
    }
    let mut out = String::new();
    for r in readers {
        if let Ok(bytes) = r.join() {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    Ok((status.and_then(|s| s.code()), out))
}

fn excerpt(out: &str) -> String {
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::agent::text::cut_chars(&text, 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_both_refusal_wordings() {
        assert!(is_auth_failure_text(
            "Error: No authentication information found."
        ));
        assert!(is_auth_failure_text(
            "Error: Not authenticated. Please run `copilot login`"
        ));
        assert!(!is_auth_failure_text("hello world"));
        assert!(!is_auth_failure_text(
            "MCP server github-mcp-server: not authenticated"
        ));
    }

    #[test]
    fn a_missing_or_failing_canary_is_agent_not_found() {
        let env = crate::child_env::basics(std::env::vars_os());
        let canary = |program: &str, args: &[String], cwd: &Path| canary(program, args, cwd, &env);
        let e = canary("/definitely/not/copilot", &[], Path::new("/")).err();
        assert_eq!(e.map(|e| e.kind), Some(AgentErrorKind::AgentNotFound));
        let e = canary("false", &[], Path::new("/")).err();
        assert!(e.is_some_and(
            |e| e.kind == AgentErrorKind::AgentNotFound && e.message.contains("exited 1")
        ));
        assert!(canary("true", &[], Path::new("/")).is_ok());
    }
}
