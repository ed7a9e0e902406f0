//! Workspace path derivation: identifier → directory key, and the containment rule that keeps
//! every workspace a real directory directly under the (symlink-resolved) root.

use std::io;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::WorkspaceError;

/// Turns an issue identifier into a directory name, injectively:
///
/// - an identifier made only of `[A-Za-z0-9._-]` is its own name (`PROJ-123` → `PROJ-123`), so
///   existing workspaces keep their paths;
/// - otherwise every other char becomes `_` (one `_` per char, so `é` → `_`) and `-` plus the
///   first 8 hex digits of the SHA-256 of the raw identifier is appended
///   (`c/x` → `c_x-<8 hex>`, `c:x` → `c_x-<other 8 hex>`), so identifiers that sanitize alike
///   still get distinct directories. A safe identifier could only collide with a sanitized one
///   by spelling out that exact hash suffix.
///
/// Empty identifiers and the special names `.`/`..` are rejected because they cannot name a
/// distinct child of the root.
///
/// The key is derived from the identifier alone; two issues (different ids) carrying the same
/// identifier would share it, so dispatch holds the second while the first runs
/// (`HoldReason::IdentifierInUse` in the dispatch pass).
pub fn sanitize_key(identifier: &str) -> Result<String, WorkspaceError> {
    if identifier.is_empty() {
        return Err(WorkspaceError::Sanitize {
            identifier: identifier.to_string(),
            reason: "identifier must not be empty",
        });
    }
    if identifier == "." || identifier == ".." {
        return Err(WorkspaceError::Sanitize {
            identifier: identifier.to_string(),
            reason: "sanitized key is a filesystem special name",
        });
    }
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if identifier.chars().all(safe) {
        return Ok(identifier.to_string());
    }
    let mut key: String = identifier
        .chars()
        .map(|c| if safe(c) { c } else { '_' })
        .collect();
    let digest = Sha256::digest(identifier.as_bytes());
    key.push('-');
    key.push_str(&data_encoding::HEXLOWER.encode(&digest[..4]));
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

    fn suffix(identifier: &str) -> String {
        data_encoding::HEXLOWER.encode(&Sha256::digest(identifier.as_bytes())[..4])
    }

    #[test]
    fn safe_identifiers_keep_their_name_and_others_get_a_hash_suffix() {
        for safe in ["PROJ-123", "...", "a.b_c-D9"] {
            assert_eq!(sanitize_key(safe).ok().as_deref(), Some(safe));
        }
        let cases = [
            ("a/b", "a_b"),
            ("../../etc", ".._.._etc"),
            ("foo bar", "foo_bar"),
            ("héllo✓", "h_llo_"),
            ("a\0b", "a_b"),
        ];
        for (identifier, base) in cases {
            let want = format!("{base}-{}", suffix(identifier));
            assert_eq!(sanitize_key(identifier).ok(), Some(want), "{identifier:?}");
        }
    }

    #[test]
    fn identifiers_that_sanitize_alike_get_distinct_keys() {
        let keys: std::collections::BTreeSet<String> = ["c/x", "c_x", "c:x", "c x", "c\0x"]
            .iter()
            .filter_map(|i| sanitize_key(i).ok())
            .collect();
        assert_eq!(keys.len(), 5, "{keys:?}");
        assert!(keys.contains("c_x"));
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
