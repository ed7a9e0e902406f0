//! Startup cleanup: remove workspaces whose issues the tracker reports terminal. Listing is here;
//! asking the tracker is the caller's job (this module does not know trackers).

use super::WorkspaceManager;
use super::path::resolve_root;

impl WorkspaceManager {
    /// Names of real directories directly under the root (symlinks and files skipped), sorted.
    /// A missing or unreadable root yields an empty list (unreadable is logged).
    pub fn list_workspace_dirs(&self) -> Vec<String> {
        let root = match resolve_root(self.root()) {
            Ok(r) => r,
            Err(e) => {
                log::warn!(error:% = e.to_string(); "workspace listing failed");
                return Vec::new();
            }
        };
        let entries = match std::fs::read_dir(&root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                log::warn!(
                    path:% = root.display().to_string(),
                    error:% = e.to_string();
                    "workspace listing failed"
                );
                return Vec::new();
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            // DirEntry::file_type does not follow symlinks.
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    /// Removes the workspace of each identifier (running `before_remove`); returns how many
    /// directories were deleted. Failures are logged and skipped so one bad entry cannot block
    /// startup. The tracker id is not known here, so `SORTIE_ISSUE_ID` is empty for these hooks
    /// and their log lines carry `issue_identifier` only.
    pub fn cleanup_terminal(&self, terminal_identifiers: &[String]) -> usize {
        self.cleanup_terminal_on(terminal_identifiers, |_| None)
    }

    /// [`cleanup_terminal`](Self::cleanup_terminal), each workspace removed on the SSH host
    /// `host_of(identifier)` names as well as here.
    pub fn cleanup_terminal_on(
        &self,
        terminal_identifiers: &[String],
        host_of: impl Fn(&str) -> Option<crate::ssh::SshHost>,
    ) -> usize {
        let mut removed = 0;
        for identifier in terminal_identifiers {
            match self.remove_on("", identifier, host_of(identifier).as_ref()) {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(e) => log::warn!(
                    issue_identifier:% = identifier,
                    error:% = e.to_string();
                    "terminal workspace cleanup failed"
                ),
            }
        }
        if removed > 0 {
            log::info!(count:% = removed; "terminal workspaces removed");
        }
        removed
    }
}
