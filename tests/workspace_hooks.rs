//! Hook runner against real `sh` processes in real directories.

mod common;

use std::error::Error;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::holds_within;
use sortie::domain::Issue;
use sortie::workspace::{
    HookEnv, HookKind, HookScripts, MAX_HOOK_OUTPUT_BYTES, WorkspaceError, WorkspaceManager,
};

type TestResult = Result<(), Box<dyn Error>>;

fn issue(identifier: &str) -> Issue {
    Issue {
        id: format!("id-{identifier}"),
        identifier: identifier.to_string(),
        title: "t".into(),
        state: "To Do".into(),
        ..Issue::default()
    }
}

fn hook_env(identifier: &str, attempt: u32) -> HookEnv {
    HookEnv {
        issue_id: format!("id-{identifier}"),
        issue_identifier: identifier.to_string(),
        attempt,
        extra: Vec::new(),
    }
}

fn with_before_run(script: &str, timeout_ms: u64) -> HookScripts {
    HookScripts {
        before_run: Some(script.to_string()),
        timeout_ms,
        ..HookScripts::default()
    }
}

/// A workspace directory plus a manager whose `before_run` is `script`.
fn setup(
    tmp: &Path,
    script: &str,
    timeout_ms: u64,
) -> Result<(WorkspaceManager, PathBuf), Box<dyn Error>> {
    let mgr = WorkspaceManager::new(tmp.join("root"), with_before_run(script, timeout_ms));
    let ws = mgr.ensure(&issue("PROJ-1"), 0)?;
    Ok((mgr, ws.path))
}

/// True once `pid` no longer runs (gone, or a zombie nobody has reaped yet).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // Format: "pid (comm) S ..."; comm may contain spaces, so split after the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start())
            .is_some_and(|rest| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

fn read_pid(path: &Path) -> Result<u32, Box<dyn Error>> {
    Ok(std::fs::read_to_string(path)?.trim().parse()?)
}

#[test]
fn timeout_kills_the_hook_and_its_children() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(
        tmp.path(),
        "sleep 30 & echo $! > child.pid; echo $$ > sh.pid; echo started; sleep 30",
        1_500,
    )?;
    let err = mgr
        .run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0))
        .err();
    match &err {
        Some(WorkspaceError::HookTimeout {
            hook,
            timeout_ms,
            output,
        }) => {
            assert_eq!(*hook, HookKind::BeforeRun);
            assert_eq!(*timeout_ms, 1_500);
            assert!(output.contains("started"), "{output:?}");
        }
        other => panic!("expected hook timeout, got {other:?}"),
    }
    assert!(
        err.map(|e| e.to_string())
            .is_some_and(|e| e.starts_with("hook timeout"))
    );
    let sh_pid = read_pid(&ws.join("sh.pid"))?;
    let child_pid = read_pid(&ws.join("child.pid"))?;
    assert!(
        holds_within(Duration::from_secs(10), || process_gone(sh_pid)
            && process_gone(child_pid)),
        "hook processes still alive: sh={sh_pid} child={child_pid}"
    );
    Ok(())
}

#[test]
fn after_create_failure_rolls_back_the_directory() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    let failing = HookScripts {
        after_create: Some("echo cloning; touch half-made; echo 'clone failed' >&2; exit 3".into()),
        ..HookScripts::default()
    };
    let mgr = WorkspaceManager::new(root.clone(), failing);
    let err = mgr.ensure(&issue("PROJ-9"), 0).err();
    match &err {
        Some(WorkspaceError::HookFailed {
            hook,
            exit_code,
            output,
            ..
        }) => {
            assert_eq!(*hook, HookKind::AfterCreate);
            assert_eq!(*exit_code, Some(3));
            assert!(
                output.contains("cloning") && output.contains("clone failed"),
                "{output:?}"
            );
        }
        other => panic!("expected hook failure, got {other:?}"),
    }
    let text = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.starts_with("hook failed: hook=after_create exit_code=3"),
        "{text}"
    );
    assert!(!root.join("PROJ-9").exists());

    // A later attempt with a working hook creates it afresh and runs after_create again.
    let working = HookScripts {
        after_create: Some("echo ok > created-by-hook".into()),
        ..HookScripts::default()
    };
    let ws = WorkspaceManager::new(root.clone(), working).ensure(&issue("PROJ-9"), 1)?;
    assert!(ws.created_now);
    assert!(ws.path.join("created-by-hook").exists());
    assert!(!ws.path.join("half-made").exists());
    Ok(())
}

#[test]
fn after_create_runs_only_for_new_directories() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let hooks = HookScripts {
        after_create: Some("echo x >> ../after_create.count".into()),
        ..HookScripts::default()
    };
    let mgr = WorkspaceManager::new(tmp.path().join("root"), hooks);
    mgr.ensure(&issue("PROJ-5"), 0)?;
    mgr.ensure(&issue("PROJ-5"), 1)?;
    let count = std::fs::read_to_string(tmp.path().join("root").join("after_create.count"))?;
    assert_eq!(count.lines().count(), 1);
    Ok(())
}

#[test]
fn environment_is_allowlisted_and_injected() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    let parent = vec![
        (OsString::from("PATH"), path),
        (OsString::from("HOME"), OsString::from("/home/tester")),
        (
            OsString::from("NOT_ALLOWLISTED_SECRET"),
            OsString::from("leak"),
        ),
        (
            OsString::from("SORTIE_CUSTOM"),
            OsString::from("not-inherited"),
        ),
        (OsString::from("LC_MESSAGES"), OsString::from("C")),
        (
            OsString::from("SORTIE_ISSUE_ID"),
            OsString::from("stale-parent-value"),
        ),
    ];
    let mgr = WorkspaceManager::new(
        tmp.path().join("root"),
        with_before_run("env > env.txt", 10_000),
    )
    .with_parent_env(parent);
    let ws = mgr.ensure(&issue("PROJ-1"), 0)?.path;
    let mut env = hook_env("PROJ-1", 2);
    env.extra
        .push(("SORTIE_SELF_REVIEW_STATUS".into(), "passed".into()));
    let out = mgr.run_hook(HookKind::BeforeRun, &ws, &env)?;
    assert!(out.ran);
    let dump = std::fs::read_to_string(ws.join("env.txt"))?;
    let lines: Vec<&str> = dump.lines().collect();
    let has = |line: &str| lines.contains(&line);
    assert!(has("SORTIE_ISSUE_ID=id-PROJ-1"), "{dump}");
    assert!(has("SORTIE_ISSUE_IDENTIFIER=PROJ-1"), "{dump}");
    assert!(has(&format!("SORTIE_WORKSPACE={}", ws.display())), "{dump}");
    assert!(has("SORTIE_ATTEMPT=2"), "{dump}");
    assert!(has("SORTIE_SELF_REVIEW_STATUS=passed"), "{dump}");
    // The daemon's own SORTIE_* variables are not inherited (issue 12); locales are.
    assert!(!dump.contains("SORTIE_CUSTOM"), "{dump}");
    assert!(has("LC_MESSAGES=C"), "{dump}");
    assert!(has("HOME=/home/tester"), "{dump}");
    assert!(!dump.contains("NOT_ALLOWLISTED_SECRET"), "{dump}");
    assert!(!dump.contains("stale-parent-value"), "{dump}");
    Ok(())
}

#[test]
fn hook_runs_in_the_workspace_with_null_stdin() -> TestResult {
    let tmp = tempfile::tempdir()?;
    // `cat` would block forever on an inherited terminal/pipe; with null stdin it sees EOF.
    let (mgr, ws) = setup(tmp.path(), "cat; pwd -P", 30_000)?;
    let out = mgr.run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0))?;
    assert_eq!(out.output.trim_end(), ws.display().to_string());
    assert!(!out.truncated);
    Ok(())
}

#[test]
fn output_is_capped_to_its_tail() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(
        tmp.path(),
        "head -c 400000 /dev/zero | tr '\\0' a; echo; echo END-OF-OUTPUT",
        30_000,
    )?;
    let out = mgr.run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0))?;
    assert!(out.truncated);
    assert_eq!(out.output.len(), MAX_HOOK_OUTPUT_BYTES);
    assert!(out.output.ends_with("END-OF-OUTPUT\n"));
    Ok(())
}

#[test]
fn failing_hook_reports_exit_code_and_output() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(tmp.path(), "echo 'lint failed: 2 errors'; exit 42", 30_000)?;
    let err = mgr
        .run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0))
        .err();
    assert!(
        matches!(
            err,
            Some(WorkspaceError::HookFailed {
                exit_code: Some(42),
                ..
            })
        ),
        "{err:?}"
    );
    let text = err.map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(
        text,
        "hook failed: hook=before_run exit_code=42: output: lint failed: 2 errors"
    );
    // The directory is kept after a before_run failure.
    assert!(ws.is_dir());
    Ok(())
}

#[test]
fn registered_secrets_are_masked_in_output() -> TestResult {
    let tmp = tempfile::tempdir()?;
    sortie::mask::register_secret("hook-secret-9f8e7d");
    let (mgr, ws) = setup(tmp.path(), "echo token=hook-secret-9f8e7d", 30_000)?;
    let out = mgr.run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0))?;
    assert_eq!(out.output.trim_end(), "token=[redacted]");
    Ok(())
}

#[test]
fn unconfigured_hook_does_not_run() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(tmp.path(), "exit 1", 30_000)?;
    let out = mgr.run_hook(HookKind::AfterRun, &ws, &hook_env("PROJ-1", 0))?;
    assert!(!out.ran);
    Ok(())
}

#[test]
fn hook_in_missing_workspace_is_a_validate_error() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mgr = WorkspaceManager::new(tmp.path().to_path_buf(), with_before_run("true", 30_000));
    let err = mgr
        .run_hook(
            HookKind::BeforeRun,
            &tmp.path().join("missing"),
            &hook_env("PROJ-1", 0),
        )
        .err();
    assert!(
        matches!(err, Some(WorkspaceError::HookValidate { .. })),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn background_process_holding_the_pipe_does_not_hang_the_hook() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(tmp.path(), "sleep 30 & echo $! > bg.pid; echo hi", 30_000)?;
    let result = mgr.run_hook(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0));
    // Clean up the background sleep whatever the outcome.
    if let Ok(pid) = read_pid(&ws.join("bg.pid")) {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
    let out = result?;
    assert_eq!(out.output.trim_end(), "hi");
    Ok(())
}

#[test]
fn cancellation_kills_the_hook_group() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (mgr, ws) = setup(
        tmp.path(),
        "sleep 30 & echo $! > child.pid; echo $$ > sh.pid.tmp; mv sh.pid.tmp sh.pid; sleep 30",
        600_000,
    )?;
    let (cancel_tx, cancel_rx) = crossbeam_channel::bounded::<()>(1);
    let pid_file = ws.join("sh.pid");
    let canceller = std::thread::spawn(move || {
        // Cancel once the hook is demonstrably running.
        if holds_within(Duration::from_secs(30), || pid_file.exists()) {
            let _ = cancel_tx.send(());
        }
    });
    let err = mgr
        .run_hook_cancellable(HookKind::BeforeRun, &ws, &hook_env("PROJ-1", 0), &cancel_rx)
        .err();
    let _ = canceller.join();
    assert!(
        matches!(
            err,
            Some(WorkspaceError::HookCancelled {
                hook: HookKind::BeforeRun
            })
        ),
        "{err:?}"
    );
    let sh_pid = read_pid(&ws.join("sh.pid"))?;
    let child_pid = read_pid(&ws.join("child.pid"))?;
    assert!(
        holds_within(Duration::from_secs(10), || process_gone(sh_pid)
            && process_gone(child_pid)),
        "hook processes still alive: sh={sh_pid} child={child_pid}"
    );
    Ok(())
}
