//! Startup check that the workspace root can be created and written, so a misconfigured root
//! fails at boot instead of on the first dispatch.

use std::os::unix::fs::DirBuilderExt;

use super::{DIR_MODE, WorkspaceError, WorkspaceManager};

impl WorkspaceManager {
    /// Creates the root if needed, then creates and deletes a `.sortie-preflight-*` file in it.
    pub fn preflight_root_writable(&self) -> Result<(), WorkspaceError> {
        let root = self.root();
        let fail = |source| WorkspaceError::Preflight {
            path: root.to_path_buf(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(root)
            .map_err(fail)?;
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix)
            .map_err(|e| fail(std::io::Error::other(format!("random suffix: {e}"))))?;
        let probe = root.join(format!(
            ".sortie-preflight-{}",
            data_encoding::HEXLOWER.encode(&suffix)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
            .map_err(fail)?;
        std::fs::remove_file(&probe).map_err(fail)
    }
}
