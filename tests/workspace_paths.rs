//! Workspace path derivation, containment and creation against real directories.

use std::error::Error;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sortie::domain::Issue;
use sortie::workspace::{HookScripts, WorkspaceError, WorkspaceManager};

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

fn manager(root: &Path) -> WorkspaceManager {
    WorkspaceManager::new(root.to_path_buf(), HookScripts::default())
}

#[test]
fn hostile_identifiers_become_direct_children_of_root() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    let mgr = manager(&root);
    // A changed name carries `-` and 8 hex digits of the raw identifier's SHA-256.
    let suffixed = |base: &str, identifier: &str| {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(identifier.as_bytes());
        format!("{base}-{}", data_encoding::HEXLOWER.encode(&digest[..4]))
    };
    let cases = [
        ("../../etc", suffixed(".._.._etc", "../../etc")),
        ("a/b", suffixed("a_b", "a/b")),
        ("foo bar", suffixed("foo_bar", "foo bar")),
        ("héllo/世界", suffixed("h_llo___", "héllo/世界")),
        ("...", "...".to_string()),
        ("/abs/path", suffixed("_abs_path", "/abs/path")),
    ];
    for (identifier, key) in cases {
        let key = key.as_str();
        let ws = mgr.ensure(&issue(identifier), 0)?;
        let canonical_root = std::fs::canonicalize(&root)?;
        assert_eq!(ws.path, canonical_root.join(key), "{identifier:?}");
        assert_eq!(ws.key, key);
        assert!(ws.created_now);
        assert!(ws.path.is_dir());
        assert_eq!(mgr.path_for(identifier)?, ws.path);
    }
    // Nothing escaped next to or above the root.
    assert!(!tmp.path().join("etc").exists());
    assert!(!tmp.path().join("a").exists());
    assert!(!root.join("a").exists());
    Ok(())
}

#[test]
fn empty_and_special_identifiers_are_rejected() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mgr = manager(tmp.path());
    for bad in ["", ".", ".."] {
        let err = mgr.ensure(&issue(bad), 0).err();
        assert!(
            matches!(err, Some(WorkspaceError::Sanitize { .. })),
            "{bad:?} -> {err:?}"
        );
        assert!(mgr.path_for(bad).is_err());
        assert!(WorkspaceManager::sanitize_key(bad).is_err());
    }
    assert_eq!(std::fs::read_dir(tmp.path())?.count(), 0);
    Ok(())
}

#[test]
fn symlink_at_workspace_path_is_rejected() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&outside)?;
    std::fs::write(outside.join("precious"), "keep")?;
    std::os::unix::fs::symlink(&outside, root.join("PROJ-1"))?;
    let mgr = manager(&root);

    let err = mgr.path_for("PROJ-1").err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.starts_with("workspace containment")),
        "{err:?}"
    );
    assert!(matches!(
        mgr.ensure(&issue("PROJ-1"), 0),
        Err(WorkspaceError::Containment { .. })
    ));
    assert!(matches!(
        mgr.remove("id", "PROJ-1"),
        Err(WorkspaceError::Containment { .. })
    ));
    assert!(outside.join("precious").exists());
    // The listing does not offer the link for cleanup either.
    assert!(mgr.list_workspace_dirs().is_empty());
    Ok(())
}

#[test]
fn symlinked_root_is_resolved() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let real = tmp.path().join("real-root");
    std::fs::create_dir_all(&real)?;
    let link = tmp.path().join("link-root");
    std::os::unix::fs::symlink(&real, &link)?;
    let mgr = manager(&link);
    let ws = mgr.ensure(&issue("PROJ-7"), 0)?;
    assert_eq!(ws.path, std::fs::canonicalize(&real)?.join("PROJ-7"));
    assert!(real.join("PROJ-7").is_dir());
    Ok(())
}

#[test]
fn ensure_creates_once_then_reuses() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("nested").join("root");
    let mgr = manager(&root);
    let first = mgr.ensure(&issue("PROJ-2"), 0)?;
    std::fs::write(first.path.join("work.txt"), "progress")?;
    let second = mgr.ensure(&issue("PROJ-2"), 1)?;
    assert!(first.created_now);
    assert!(!second.created_now);
    assert_eq!(first.path, second.path);
    assert_eq!(
        std::fs::read_to_string(second.path.join("work.txt"))?,
        "progress"
    );
    let root_mode = std::fs::metadata(&root)?.permissions().mode() & 0o777;
    let ws_mode = std::fs::metadata(&first.path)?.permissions().mode() & 0o777;
    // The umask can only remove bits.
    assert_eq!(root_mode & !0o750, 0);
    assert_eq!(ws_mode & !0o750, 0);
    Ok(())
}

#[test]
fn file_at_workspace_path_is_a_conflict() -> TestResult {
    let tmp = tempfile::tempdir()?;
    std::fs::write(tmp.path().join("PROJ-3"), "not a dir")?;
    let mgr = manager(tmp.path());
    let err = mgr.ensure(&issue("PROJ-3"), 0).err();
    assert!(
        matches!(err, Some(WorkspaceError::Conflict { .. })),
        "{err:?}"
    );
    assert!(
        err.map(|e| e.to_string())
            .is_some_and(|e| e.starts_with("workspace conflict"))
    );
    Ok(())
}

#[test]
fn relative_root_resolves_against_cwd() -> TestResult {
    let mgr = WorkspaceManager::new("rel-root/../rel-root".into(), HookScripts::default());
    assert!(mgr.root().is_absolute());
    assert_eq!(mgr.root(), std::env::current_dir()?.join("rel-root"));
    Ok(())
}

#[test]
fn stale_status_is_cleared_on_ensure() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mgr = manager(tmp.path());
    let ws = mgr.ensure(&issue("PROJ-4"), 0)?;
    std::fs::create_dir_all(ws.path.join(".sortie"))?; // exists: it holds the lock file
    std::fs::write(ws.path.join(".sortie").join("status"), "blocked")?;
    mgr.ensure(&issue("PROJ-4"), 1)?;
    assert!(!ws.path.join(".sortie").join("status").exists());
    Ok(())
}

#[test]
fn preflight_creates_root_and_leaves_no_probe() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().join("a").join("b");
    let mgr = manager(&root);
    mgr.preflight_root_writable()?;
    assert!(root.is_dir());
    assert_eq!(std::fs::read_dir(&root)?.count(), 0);

    let file_root = tmp.path().join("plain-file");
    std::fs::write(&file_root, "x")?;
    let err = manager(&file_root).preflight_root_writable().err();
    assert!(
        matches!(err, Some(WorkspaceError::Preflight { .. })),
        "{err:?}"
    );
    Ok(())
}
