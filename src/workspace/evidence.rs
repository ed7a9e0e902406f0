//! Evidence of work in a workspace, read with `git` for `tracker.handoff_evidence`: the
//! commit `HEAD` names and a fingerprint of the work tree's changes, taken once when the run's
//! session starts ([`Baseline`]) and again after `after_run` ([`Observed`]), here or on the
//! run's SSH host. The git commands only read (no index refresh, `GIT_OPTIONAL_LOCKS=0`) and
//! leave `.sortie/` out; each read has a deadline and a small output cap.

use std::path::Path;
use std::time::Duration;

use super::{HookEnv, Keep, OperatorCommand, WorkspaceManager};
use crate::ssh::SshHost;
use crate::ssh::quote;

/// How long one read may take, git commands together.
pub const EVIDENCE_TIMEOUT_MS: u64 = 30_000;
/// Bytes of the script's output kept: a few short lines.
const OUTPUT_CAP: usize = 4096;

/// Prints `norepo` unless the workspace is the top of a git work tree; else `head <sha>`
/// (empty on an unborn branch), `commits <n>` (commits reachable from `HEAD` and not from
/// `$start`, all of them when `$start` is empty) and `tree <hash>` (a hash of every changed,
/// deleted or untracked, not ignored, path with its content's hash).
const SCRIPT: &str = r#"export GIT_OPTIONAL_LOCKS=0
prefix=$(git rev-parse --show-prefix 2>/dev/null) || { echo norepo; exit 0; }
[ -z "$prefix" ] || { echo norepo; exit 0; }
head=$(git rev-parse -q --verify HEAD 2>/dev/null)
echo "head $head"
if [ -z "$head" ]; then n=0
elif [ -n "$start" ]; then n=$(git rev-list --count "$start..HEAD" 2>/dev/null) || n=unknown
else n=$(git rev-list --count HEAD 2>/dev/null) || n=unknown
fi
echo "commits $n"
tree=$(git ls-files -m -o -d --exclude-standard -- . ':(exclude).sortie' 2>/dev/null | LC_ALL=C sort -u |
while IFS= read -r f; do
  if [ -f "$f" ]; then printf '%s %s\n' "$(git hash-object -- "$f")" "$f"; else printf 'gone %s\n' "$f"; fi
done | git hash-object --stdin) || exit 5
echo "tree $tree"
"#;

/// The workspace as the run's session started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// Not the top of a git work tree: only a pull-request record can be evidence.
    NotRepository,
    Repository {
        /// `None` on a branch with no commit yet.
        head: Option<String>,
        tree: String,
    },
}

/// What the workspace shows after the run, against its [`Baseline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observed {
    /// Commits on the branch `HEAD` names that the starting commit does not reach.
    pub new_commits: u64,
    /// The work tree's changes differ from what they were when the session started.
    pub files_changed: bool,
}

/// Why the workspace could not be read; masked where it quotes git's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvidenceError {
    /// The script exited non-zero (`None`: by a signal), with its output's tail.
    GitFailed(Option<i32>, String),
    /// The shell could not be started.
    CouldNotRun(String),
    TimedOut,
    Cancelled,
    /// The host could not be asked.
    Remote(String),
    /// The output is not the script's lines.
    Unreadable(String),
}

impl std::fmt::Display for EvidenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvidenceError::GitFailed(code, tail) => write!(
                f,
                "git exited with {}: {tail}",
                code.map_or_else(|| "a signal".to_string(), |c| c.to_string())
            ),
            EvidenceError::CouldNotRun(e) => write!(f, "git could not run: {e}"),
            EvidenceError::TimedOut => write!(
                f,
                "git did not finish within {} s",
                EVIDENCE_TIMEOUT_MS / 1000
            ),
            EvidenceError::Cancelled => f.write_str("git was cancelled"),
            EvidenceError::Remote(e) => f.write_str(e),
            EvidenceError::Unreadable(text) => write!(f, "git gave no readable answer: {text}"),
        }
    }
}

impl std::error::Error for EvidenceError {}

/// One read's parsed output.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Read {
    NotRepository,
    Repository {
        head: Option<String>,
        commits: Option<u64>,
        tree: String,
    },
}

/// Reads the baseline; `Err` says why it could not be read.
pub fn baseline(
    workspaces: &WorkspaceManager,
    workspace: &Path,
    env: &HookEnv,
    host: Option<&SshHost>,
) -> Result<Baseline, EvidenceError> {
    Ok(match read(workspaces, workspace, env, host, None)? {
        Read::NotRepository => Baseline::NotRepository,
        Read::Repository { head, tree, .. } => Baseline::Repository { head, tree },
    })
}

/// Reads the workspace after the run and compares it with `start`. A workspace that stopped
/// being a repository, or became one, shows what it shows now against nothing.
pub fn observe(
    workspaces: &WorkspaceManager,
    workspace: &Path,
    env: &HookEnv,
    host: Option<&SshHost>,
    start: &Baseline,
) -> Result<Observed, EvidenceError> {
    let start_head = match start {
        Baseline::Repository { head, .. } => head.as_deref(),
        Baseline::NotRepository => None,
    };
    let now = read(workspaces, workspace, env, host, start_head)?;
    Ok(compare(start, &now))
}

fn compare(start: &Baseline, now: &Read) -> Observed {
    match (start, now) {
        (_, Read::NotRepository) => Observed::default(),
        (Baseline::NotRepository, Read::Repository { commits, tree, .. }) => Observed {
            new_commits: commits.unwrap_or(0),
            files_changed: *tree != empty_tree_fingerprint(),
        },
        (
            Baseline::Repository {
                head: start_head,
                tree: start_tree,
            },
            Read::Repository {
                head,
                commits,
                tree,
            },
        ) => Observed {
            // A count git could not give (the starting commit is gone): a moved HEAD is one.
            new_commits: commits.unwrap_or(u64::from(head != start_head)),
            files_changed: tree != start_tree,
        },
    }
}

/// The fingerprint of a work tree without changes: git's hash of empty input.
fn empty_tree_fingerprint() -> String {
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391".to_string()
}

/// A commit name safe to put in the script: hex only.
fn commit_name(text: &str) -> Option<&str> {
    (!text.is_empty() && text.len() <= 64 && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(text)
}

fn read(
    workspaces: &WorkspaceManager,
    workspace: &Path,
    env: &HookEnv,
    host: Option<&SshHost>,
    start: Option<&str>,
) -> Result<Read, EvidenceError> {
    let start = start.and_then(commit_name).unwrap_or("");
    let script = format!("start='{start}'\n{SCRIPT}");
    let (code, output) = match host {
        None => run_here(workspaces, workspace, env, &script)?,
        Some(h) => run_on(h, workspace, &script)?,
    };
    if code != Some(0) {
        let tail = String::from_utf8_lossy(&output);
        return Err(EvidenceError::GitFailed(
            code,
            crate::mask::mask(tail.trim()),
        ));
    }
    parse(&String::from_utf8_lossy(&output))
}

fn run_here(
    workspaces: &WorkspaceManager,
    workspace: &Path,
    env: &HookEnv,
    script: &str,
) -> Result<(Option<i32>, Vec<u8>), EvidenceError> {
    let command = OperatorCommand {
        script,
        timeout_ms: EVIDENCE_TIMEOUT_MS,
        output_cap: OUTPUT_CAP,
        keep: Keep::Head,
    };
    let out = workspaces
        .run_command(workspace, &command, env, &crossbeam_channel::never())
        .map_err(|e| EvidenceError::CouldNotRun(e.to_string()))?;
    match out.end {
        super::ShellEnd::TimedOut => Err(EvidenceError::TimedOut),
        super::ShellEnd::Cancelled => Err(EvidenceError::Cancelled),
        super::ShellEnd::Exited(_) => Ok((out.exit_code(), out.output)),
    }
}

fn run_on(
    host: &SshHost,
    workspace: &Path,
    script: &str,
) -> Result<(Option<i32>, Vec<u8>), EvidenceError> {
    let remote = format!(
        "cd -- {} && exec sh -c {} 2>&1",
        quote(&workspace.to_string_lossy()),
        quote(script)
    );
    let out = host
        .run(&remote, None, Duration::from_millis(EVIDENCE_TIMEOUT_MS))
        .map_err(|e| EvidenceError::Remote(e.to_string()))?;
    let mut stdout = out.stdout;
    stdout.truncate(OUTPUT_CAP);
    Ok((out.code, stdout))
}

/// Parses the script's lines (pure).
fn parse(text: &str) -> Result<Read, EvidenceError> {
    let mut head = None;
    let mut commits = None;
    let mut tree = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "norepo" {
            return Ok(Read::NotRepository);
        }
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        let value = value.trim();
        match key {
            "head" => head = Some(commit_name(value).map(str::to_string)),
            "commits" => commits = Some(value.parse::<u64>().ok()),
            "tree" => tree = commit_name(value).map(str::to_string),
            _ => {}
        }
    }
    match (head, commits, tree) {
        (Some(head), Some(commits), Some(tree)) => Ok(Read::Repository {
            head,
            commits,
            tree,
        }),
        _ => Err(EvidenceError::Unreadable(crate::mask::mask(text.trim()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const T1: &str = "3333333333333333333333333333333333333333";
    const T2: &str = "4444444444444444444444444444444444444444";

    fn repo(head: Option<&str>, commits: Option<u64>, tree: &str) -> Read {
        Read::Repository {
            head: head.map(str::to_string),
            commits,
            tree: tree.to_string(),
        }
    }

    #[test]
    fn the_script_output_parses() {
        assert_eq!(parse("norepo\n"), Ok(Read::NotRepository));
        assert_eq!(
            parse(&format!("head {A}\ncommits 2\ntree {T1}\n")),
            Ok(repo(Some(A), Some(2), T1))
        );
        assert_eq!(
            parse(&format!("head \ncommits 0\ntree {T1}\n")),
            Ok(repo(None, Some(0), T1))
        );
        assert_eq!(
            parse(&format!("head {A}\ncommits unknown\ntree {T1}\n")),
            Ok(repo(Some(A), None, T1))
        );
        assert!(parse("fatal: something\n").is_err());
        assert!(parse(&format!("head {A}\ncommits 1\ntree x;rm\n")).is_err());
    }

    #[test]
    fn commits_and_changes_count_against_the_start() {
        let start = Baseline::Repository {
            head: Some(A.into()),
            tree: T1.into(),
        };
        assert_eq!(
            compare(&start, &repo(Some(A), Some(0), T1)),
            Observed::default()
        );
        assert_eq!(
            compare(&start, &repo(Some(B), Some(1), T1)),
            Observed {
                new_commits: 1,
                files_changed: false
            }
        );
        assert_eq!(
            compare(&start, &repo(Some(A), Some(0), T2)),
            Observed {
                new_commits: 0,
                files_changed: true
            }
        );
        // The count unknown: a moved HEAD counts as one commit, an unmoved one as none.
        assert_eq!(compare(&start, &repo(Some(B), None, T1)).new_commits, 1);
        assert_eq!(compare(&start, &repo(Some(A), None, T1)).new_commits, 0);
        assert_eq!(compare(&start, &Read::NotRepository), Observed::default());
        // A workspace that became a repository during the run.
        let none = Baseline::NotRepository;
        assert_eq!(
            compare(&none, &repo(Some(A), Some(1), &empty_tree_fingerprint())),
            Observed {
                new_commits: 1,
                files_changed: false
            }
        );
    }

    #[test]
    fn only_hex_commit_names_reach_the_script() {
        assert_eq!(commit_name(A), Some(A));
        assert_eq!(commit_name(""), None);
        assert_eq!(commit_name("abc'; rm -rf /"), None);
    }

    /// The script itself over a real repository: nothing, an edit, a commit, an untracked file.
    #[test]
    fn the_script_reads_a_real_repository() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        let ws_mgr = WorkspaceManager::new(ws.to_path_buf(), Default::default());
        let env = HookEnv::default();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .current_dir(ws)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            assert!(ok, "git {args:?}");
        };
        let observe_now = |start: &Baseline| {
            observe(&ws_mgr, ws, &env, None, start).unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(
            baseline(&ws_mgr, ws, &env, None),
            Ok(Baseline::NotRepository)
        );
        git(&["init", "-q"]);
        std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
        git(&["add", "a.txt"]);
        git(&["commit", "-qm", "first"]);
        let start = baseline(&ws_mgr, ws, &env, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(observe_now(&start), Observed::default());
        // Sortie's own files do not count.
        std::fs::create_dir_all(ws.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join(".sortie/status"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(observe_now(&start), Observed::default());
        std::fs::write(ws.join("a.txt"), "two\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(observe_now(&start).files_changed);
        git(&["commit", "-qam", "second"]);
        assert_eq!(
            observe_now(&start),
            Observed {
                new_commits: 1,
                files_changed: false
            }
        );
        let start = baseline(&ws_mgr, ws, &env, None).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("new.txt"), "n\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(observe_now(&start).files_changed);
        // An untracked file edited again is a change too.
        let start = baseline(&ws_mgr, ws, &env, None).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("new.txt"), "m\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(observe_now(&start).files_changed);
    }
}
