//! Workspace path derivation: identifier → directory key, and the containment rule that keeps
//! every workspace a real directory directly under the (symlink-resolved) root.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::error::WorkspaceError;

/// Turns an issue identifier into a directory name: every char outside `[A-Za-z0-9._-]`
/// becomes `_` (one `_` per char, so `é` → `_`). Empty identifiers and the special names
/// `.`/`..` are rejected because they cannot name a distinct child of the root.
pub fn sanitize_key(identifier: &str) -> Result<String, WorkspaceError> {
    if identifier.is_empty() {
        return Err(WorkspaceError::Sanitize {
            identifier: identifier.to_string(),
            reason: "identifier must not be empty",
        });
    }
    let key: String = identifier
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if key == "." || key == ".." {
        return Err(WorkspaceError::Sanitize {
            identifier: identifier.to_string(),
            reason: "sanitized key is a filesystem special name",
        });
    }
    Ok(key)
}

/// Makes `path` absolute (against the process CWD) and removes `.`/`..` lexically, like Go's
/// `filepath.Abs`; used for a root that does not exist yet and so cannot be canonicalized.
pub(crate) fn absolute_clean(path: &Path) -> io::Result<PathBuf> {
    let abs = std::path::absolute(path)?;
    let mut out = PathBuf::new();
    for comp in abs.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

/// The root as workspaces are measured against it: symlinks resolved when it exists, the
/// cleaned absolute path when it does not (it is created on demand).
pub(crate) fn resolve_root(root: &Path) -> Result<PathBuf, WorkspaceError> {
    let abs = absolute_clean(root).map_err(|source| WorkspaceError::Resolve {
        root: root.to_path_buf(),
        source,
    })?;
    match std::fs::canonicalize(&abs) {
        Ok(resolved) => Ok(resolved),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(abs),
        Err(source) => Err(WorkspaceError::Resolve {
            root: root.to_path_buf(),
            source,
        }),
    }
}

/// Checks that `path` is `resolved_root/<key>` for a single normal component and that nothing
/// already at `path` is a symlink (a planted link could point anywhere).
pub(crate) fn check_contained(
    resolved_root: &Path,
    path: &Path,
    identifier: &str,
) -> Result<(), WorkspaceError> {
    let containment = |reason| WorkspaceError::Containment {
        root: resolved_root.to_path_buf(),
        identifier: identifier.to_string(),
        reason,
    };
    let direct_child = path.parent() == Some(resolved_root)
        && matches!(path.components().next_back(), Some(Component::Normal(_)))
        && path.starts_with(resolved_root);
    if !direct_child {
        return Err(containment("workspace path is not a direct child of root"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            Err(containment("workspace path is a symlink"))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WorkspaceError::Stat {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `resolved_root/<sanitized identifier>`, contained (see [`check_contained`]).
pub(crate) fn contained_path(root: &Path, identifier: &str) -> Result<PathBuf, WorkspaceError> {
    let key = sanitize_key(identifier)?;
    let resolved_root = resolve_root(root)?;
    let path = resolved_root.join(&key);
    check_contained(&resolved_root, &path, identifier)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_every_unsafe_char() {
        assert_eq!(sanitize_key("PROJ-123").ok().as_deref(), Some("PROJ-123"));
        assert_eq!(sanitize_key("a/b").ok().as_deref(), Some("a_b"));
        assert_eq!(sanitize_key("../../etc").ok().as_deref(), Some(".._.._etc"));
        assert_eq!(sanitize_key("foo bar").ok().as_deref(), Some("foo_bar"));
        assert_eq!(sanitize_key("héllo✓").ok().as_deref(), Some("h_llo_"));
        assert_eq!(sanitize_key("...").ok().as_deref(), Some("..."));
    }

    #[test]
    fn sanitize_rejects_empty_and_special_names() {
        for bad in ["", ".", ".."] {
            let err = sanitize_key(bad).err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.starts_with("workspace sanitize")),
                "{bad:?} -> {err:?}"
            );
        }
    }

    #[test]
    fn absolute_clean_removes_dot_segments() {
        let p = absolute_clean(Path::new("/a/b/../c/./d")).ok();
        assert_eq!(p, Some(PathBuf::from("/a/c/d")));
    }

    #[test]
    fn containment_rejects_grandchildren_and_root_itself() {
        let root = Path::new("/nonexistent-sortie-root");
        assert!(check_contained(root, &root.join("a").join("b"), "x").is_err());
        assert!(check_contained(root, root, "x").is_err());
        assert!(check_contained(root, &root.join(".."), "x").is_err());
        assert!(check_contained(root, &root.join("ok"), "x").is_ok());
    }
}
