//! The workspace's changes as a review turn sees them: `git diff HEAD` of the work tree (new
//! files included by marking them intent-to-add; `.sortie/` left out), cut to
//! `max_diff_bytes`. A workspace that is not the top of a git work tree, or whose git fails,
//! gets no diff and the review goes on with the reason in its prompt, as does an empty diff.

use std::path::Path;

use crate::workspace::{HookEnv, Keep, OperatorCommand, ShellEnd, WorkspaceManager};

/// How long the git commands may take together.
const DIFF_TIMEOUT_MS: u64 = 60_000;

/// Exits 3 outside a work tree and 4 below its top, so those read as "not a repository".
const DIFF_SCRIPT: &str = "prefix=$(git rev-parse --show-prefix 2>/dev/null) || exit 3\n\
[ -z \"$prefix\" ] || exit 4\n\
git add --intent-to-add -- . ':(exclude).sortie' >/dev/null 2>&1\n\
git diff --no-color --no-ext-diff HEAD -- . ':(exclude).sortie' 2>/dev/null \
|| git diff --no-color --no-ext-diff -- . ':(exclude).sortie' 2>/dev/null";

/// What the diff step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diff {
    /// The changes (possibly cut).
    Changes {
        text: String,
        /// Bytes git wrote.
        original_bytes: u64,
        truncated: bool,
    },
    /// The work tree has no changes against `HEAD`.
    Empty,
    /// No diff could be taken; the reason.
    Unavailable(String),
}

impl Diff {
    /// Bytes git wrote (0 without a diff).
    pub fn original_bytes(&self) -> u64 {
        match self {
            Diff::Changes { original_bytes, .. } => *original_bytes,
            Diff::Empty | Diff::Unavailable(_) => 0,
        }
    }

    pub fn truncated(&self) -> bool {
        matches!(
            self,
            Diff::Changes {
                truncated: true,
                ..
            }
        )
    }

    /// Why there is no diff, for the audit trail.
    pub fn note(&self) -> Option<&str> {
        match self {
            Diff::Changes { .. } => None,
            Diff::Empty => Some("no changes"),
            Diff::Unavailable(reason) => Some(reason),
        }
    }
}

/// Collects the workspace diff, at most `max_bytes` of it.
pub fn collect(
    workspaces: &WorkspaceManager,
    workspace: &Path,
    env: &HookEnv,
    max_bytes: usize,
    cancel: &crossbeam_channel::Receiver<()>,
) -> Diff {
    let command = OperatorCommand {
        script: DIFF_SCRIPT,
        timeout_ms: DIFF_TIMEOUT_MS,
        output_cap: max_bytes.max(1),
        keep: Keep::Head,
    };
    match workspaces.run_command(workspace, &command, env, cancel) {
        Err(e) => Diff::Unavailable(format!("git could not run: {e}")),
        Ok(out) => match out.end {
            ShellEnd::TimedOut => Diff::Unavailable("git diff timed out".into()),
            ShellEnd::Cancelled => Diff::Unavailable("cancelled".into()),
            ShellEnd::Exited(_) => match out.exit_code() {
                Some(0) if out.total_bytes == 0 => Diff::Empty,
                Some(0) => Diff::Changes {
                    text: String::from_utf8_lossy(&out.output).into_owned(),
                    original_bytes: out.total_bytes,
                    truncated: out.truncated,
                },
                Some(3 | 4) => Diff::Unavailable("the workspace is not a git repository".into()),
                code => Diff::Unavailable(format!(
                    "git diff failed (exit {})",
                    code.map_or_else(|| "by a signal".to_string(), |c| c.to_string())
                )),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::HookScripts;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?}");
    }

    fn collect_in(dir: &Path, max: usize) -> Diff {
        let wm = WorkspaceManager::new(dir.to_path_buf(), HookScripts::default());
        collect(
            &wm,
            dir,
            &HookEnv::default(),
            max,
            &crossbeam_channel::never(),
        )
    }

    #[test]
    fn a_plain_directory_has_no_diff() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            collect_in(d.path(), 1024),
            Diff::Unavailable("the workspace is not a git repository".into())
        );
    }

    #[test]
    fn changes_and_new_files_are_diffed_and_capped_sortie_left_out() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = d.path();
        git(ws, &["init", "-q"]);
        std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
        git(ws, &["add", "a.txt"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        assert_eq!(collect_in(ws, 1024), Diff::Empty);

        std::fs::write(ws.join("a.txt"), "two\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("new.txt"), "fresh\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join(".sortie/state.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        let Diff::Changes {
            text,
            original_bytes,
            truncated,
        } = collect_in(ws, 100_000)
        else {
            panic!("expected changes");
        };
        assert!(text.contains("+two") && text.contains("+fresh"), "{text}");
        assert!(!text.contains("state.json"), "{text}");
        assert!(!truncated);
        assert_eq!(original_bytes, text.len() as u64);

        let cut = collect_in(ws, 20);
        assert!(cut.truncated());
        assert_eq!(cut.original_bytes(), original_bytes);
        assert!(matches!(&cut, Diff::Changes { text, .. } if text.len() == 20));
    }
}
