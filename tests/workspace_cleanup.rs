//! Workspace removal, listing and startup cleanup of terminal issues.

use std::error::Error;
use std::path::Path;

use sortie::domain::Issue;
use sortie::workspace::{HookScripts, WorkspaceError, WorkspaceManager};

type TestResult = Result<(), Box<dyn Error>>;

fn issue(identifier: &str) -> Issue {
    Issue {
        id: format!("id-{identifier}"),
        identifier: identifier.to_string(),
        title: "t".into(),
        state: "Done".into(),
        ..Issue::default()
    }
}

/// `before_remove` appends "<identifier> <cwd>" to `log`, which lives outside the root.
fn logging_hooks(log: &Path) -> HookScripts {
    HookScripts {
        before_remove: Some(format!(
            "echo \"$SORTIE_ISSUE_IDENTIFIER $(pwd -P)\" >> '{}'",
            log.display()
        )),
        ..HookScripts::default()
    }
}

#[test]
fn remove_runs_before_remove_then_deletes() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let log = tmp.path().join("removed.log");
    let mgr = WorkspaceManager::new(tmp.path().join("root"), logging_hooks(&log));
    let ws = mgr.ensure(&issue("PROJ-1"), 0)?;
    std::fs::write(ws.path.join("file"), "x")?;
    assert!(mgr.remove("id-PROJ-1", "PROJ-1")?);
    assert!(!ws.path.exists());
    assert_eq!(
        std::fs::read_to_string(&log)?.trim_end(),
        format!("PROJ-1 {}", ws.path.display())
    );
    // Nothing left: a second remove is a no-op and runs no hook.
    assert!(!mgr.remove("id-PROJ-1", "PROJ-1")?);
    assert_eq!(std::fs::read_to_string(&log)?.lines().count(), 1);
    Ok(())
}

#[test]
fn failing_before_remove_still_deletes() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let hooks = HookScripts {
        before_remove: Some("echo nope; exit 1".into()),
        ..HookScripts::default()
    };
    let mgr = WorkspaceManager::new(tmp.path().join("root"), hooks);
    let ws = mgr.ensure(&issue("PROJ-2"), 0)?;
    assert!(mgr.remove("id", "PROJ-2")?);
    assert!(!ws.path.exists());
    Ok(())
}

#[test]
fn remove_refuses_files_and_hostile_identifiers() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("PROJ-3"), "a file")?;
    let sibling = tmp.path().join("sibling");
    std::fs::create_dir_all(&sibling)?;
    let mgr = WorkspaceManager::new(root.clone(), HookScripts::default());
    assert!(matches!(
        mgr.remove("id", "PROJ-3"),
        Err(WorkspaceError::Conflict { .. })
    ));
    assert!(root.join("PROJ-3").is_file());
    assert!(matches!(
        mgr.remove("id", ".."),
        Err(WorkspaceError::Sanitize { .. })
    ));
    // "../sibling" sanitizes to a name inside the root, never the real sibling.
    assert!(!mgr.remove("id", "../sibling")?);
    assert!(sibling.is_dir());
    assert!(root.is_dir());
    Ok(())
}

#[test]
fn remove_path_accepts_only_contained_directories() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    let mgr = WorkspaceManager::new(root.clone(), HookScripts::default());
    let ws = mgr.ensure(&issue("PROJ-4"), 0)?;
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside)?;
    assert!(matches!(
        mgr.remove_path("id", "X", &outside),
        Err(WorkspaceError::Containment { .. })
    ));
    assert!(matches!(
        mgr.remove_path("id", "X", &root),
        Err(WorkspaceError::Containment { .. })
    ));
    assert!(outside.is_dir());
    assert!(mgr.remove_path("id", "PROJ-4", &ws.path)?);
    assert!(!ws.path.exists());
    assert!(!mgr.remove_path("id", "PROJ-4", &ws.path)?);
    Ok(())
}

#[test]
fn listing_skips_symlinks_and_files() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    let mgr = WorkspaceManager::new(root.clone(), HookScripts::default());
    assert!(
        mgr.list_workspace_dirs().is_empty(),
        "missing root lists nothing"
    );
    mgr.ensure(&issue("PROJ-B"), 0)?;
    mgr.ensure(&issue("PROJ-A"), 0)?;
    std::fs::write(root.join("notes.txt"), "x")?;
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside)?;
    std::os::unix::fs::symlink(&outside, root.join("PROJ-LINK"))?;
    assert_eq!(mgr.list_workspace_dirs(), ["PROJ-A", "PROJ-B"]);
    Ok(())
}

#[test]
fn cleanup_terminal_removes_only_the_given_workspaces() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let log = tmp.path().join("removed.log");
    let mgr = WorkspaceManager::new(tmp.path().join("root"), logging_hooks(&log));
    for id in ["PROJ-1", "PROJ-2", "PROJ-3"] {
        mgr.ensure(&issue(id), 0)?;
    }
    let terminal = vec![
        "PROJ-1".to_string(),
        "PROJ-3".to_string(),
        "PROJ-404".to_string(),
        "..".to_string(),
    ];
    assert_eq!(mgr.cleanup_terminal(&terminal), 2);
    assert_eq!(mgr.list_workspace_dirs(), ["PROJ-2"]);
    let logged = std::fs::read_to_string(&log)?;
    let names: Vec<&str> = logged
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["PROJ-1", "PROJ-3"]);
    Ok(())
}
