//! The harness's sandbox mode: with `SORTIE_TEST_SANDBOX=bubblewrap` in the test process's
//! environment, or in the `sandbox_suite` test binary, every daemon [`super::daemon::spawn`] starts
//! runs its agents under `worker.sandbox: bubblewrap`. The workflow file the daemon is given is
//! rewritten just before the start: a `sandbox:` entry goes under `worker:` (created when
//! missing), with `read_write` listing the paths the test hands the fake agent outside its
//! workspace (the private `/tmp` of the sandbox hides them otherwise):
//!
//! - the absolute values of the daemon's `FAKE_AGENT_*` and `SORTIE_TEST_*` variables;
//! - the absolute values of `FAKE_AGENT_*=` words and `FAKE_AGENT_*:` entries in the workflow
//!   text (a command such as `env FAKE_AGENT_STATE_DIR=/x fake-agent`).
//!
//! The recorded streams under `tests/fixtures` are mounted read-only. A `…_DIR`/`SORTIE_TEST_*` path is created as a directory and a `…_LOG` path as an empty
//! file when missing, since `bwrap` binds only what exists. A workflow that already sets a
//! sandbox, or that runs sessions on SSH hosts, is left as it is.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable that turns the mode on for a whole test run.
pub const SWITCH: &str = "SORTIE_TEST_SANDBOX";

/// The test binary whose daemons always start sandboxed (`tests/sandbox_suite.rs`).
const SUITE: &str = "sandbox_suite";

/// Whether daemons start sandboxed.
pub fn enabled() -> bool {
    std::env::var(SWITCH).is_ok_and(|v| v.trim().eq_ignore_ascii_case("bubblewrap"))
        || std::env::current_exe().is_ok_and(|exe| {
            exe.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(SUITE))
        })
}

/// Rewrites the workflow `cmd` is about to start with, when the mode is on.
pub fn apply(cmd: &Command) {
    if !enabled() {
        return;
    }
    let Some(workflow) = workflow_of(cmd) else {
        return;
    };
    let Ok(text) = std::fs::read_to_string(&workflow) else {
        return;
    };
    let Some(front_end) = text.get(4..).and_then(|t| t.find("\n---")).map(|i| i + 4) else {
        return;
    };
    let front = &text[..front_end];
    if front.contains("\n  sandbox:") || front.contains("ssh_hosts") {
        return;
    }
    let mut paths = Vec::new();
    for (k, v) in cmd.get_envs() {
        let (Some(k), Some(v)) = (k.to_str(), v.and_then(|v| v.to_str())) else {
            continue;
        };
        if k.starts_with("FAKE_AGENT_") || k.starts_with("SORTIE_TEST_") {
            paths.push((k.to_string(), v.to_string()));
        }
    }
    paths.extend(workflow_paths(front));
    let dir = workflow.parent().unwrap_or(Path::new("/"));
    let mut bound: Vec<String> = Vec::new();
    for (k, v) in paths {
        let p = PathBuf::from(v.trim_matches(|c| c == '"' || c == '\''));
        if !p.is_absolute() || dir.starts_with(&p) || !prepare(&k, &p) {
            continue;
        }
        let s = serde_json::to_string(&p.display().to_string()).unwrap_or_default();
        if !bound.contains(&s) {
            bound.push(s);
        }
    }
    // Scenarios name recorded streams under tests/fixtures by absolute path (`cat_file`).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let entry = format!(
        "  sandbox:\n    kind: bubblewrap\n    read_only: [{}]\n    read_write: [{}]\n",
        serde_json::to_string(&fixtures.display().to_string()).unwrap_or_default(),
        bound.join(", ")
    );
    let new = match front.find("\nworker:\n") {
        Some(i) => {
            let at = i + "\nworker:\n".len();
            format!("{}{entry}{}", &text[..at], &text[at..])
        }
        None if front.contains("\nworker:") => {
            eprintln!(
                "sandbox mode: {}: an inline worker block is left as it is",
                workflow.display()
            );
            return;
        }
        None => format!("{}\nworker:\n{entry}{}", front, &text[front_end + 1..]),
    };
    if let Err(e) = std::fs::write(&workflow, new) {
        panic!("sandbox mode: write {}: {e}", workflow.display());
    }
    eprintln!(
        "sandbox mode: {} runs its agents under bubblewrap (read_write: {})",
        workflow.display(),
        bound.join(", ")
    );
}

/// The workflow file among `cmd`'s arguments: the last one naming an existing file that
/// starts with a front matter.
fn workflow_of(cmd: &Command) -> Option<PathBuf> {
    let base = cmd
        .get_current_dir()
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())?;
    cmd.get_args()
        .map(|a| base.join(a))
        .filter(|p| p.is_file())
        .filter(|p| {
            std::fs::read_to_string(p)
                .is_ok_and(|t| t.starts_with("---\n") || t.starts_with("---\r\n"))
        })
        .last()
}

/// `FAKE_AGENT_X=/path` words and `FAKE_AGENT_X: /path` entries of the front matter.
fn workflow_paths(front: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for word in front.split_whitespace() {
        let word = word.trim_matches(|c| c == '"' || c == '\'' || c == ',');
        if let Some((k, v)) = word.split_once('=')
            && k.starts_with("FAKE_AGENT_")
            && v.starts_with('/')
        {
            out.push((k.to_string(), v.to_string()));
        }
    }
    for line in front.lines() {
        let line = line.trim().trim_start_matches("- ");
        if let Some((k, v)) = line.split_once(": ")
            && k.trim_matches('"').starts_with("FAKE_AGENT_")
        {
            out.push((k.trim_matches('"').to_string(), v.trim().to_string()));
        }
    }
    out
}

/// Creates what `bwrap` must find for `key`'s path; whether the path exists now.
fn prepare(key: &str, p: &Path) -> bool {
    if p.exists() {
        return true;
    }
    if key.ends_with("_DIR") || key.starts_with("SORTIE_TEST_") {
        let _ = std::fs::create_dir_all(p);
    } else if key.ends_with("_LOG") {
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p);
    }
    p.exists()
}
