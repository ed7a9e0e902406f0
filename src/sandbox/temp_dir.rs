//! Owner-only scratch directories under the system temp dir, named so two daemons (or two
//! sessions of one) never meet: `<prefix>-<pid>-<16 random hex digits>`.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use super::error::SandboxError;

/// Creates a fresh `0700` directory; fails rather than reuse one that exists.
pub(super) fn private_temp_dir(prefix: &str) -> Result<PathBuf, SandboxError> {
    let mut r = [0u8; 8];
    getrandom::fill(&mut r).map_err(|e| SandboxError::setup("random name", e))?;
    let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("{prefix}-{}-{hex}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| SandboxError::io(&dir, e))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_call_makes_a_new_owner_only_directory() {
        let a = super::private_temp_dir("sortie-test-scratch").unwrap();
        let b = super::private_temp_dir("sortie-test-scratch").unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::remove_dir(a).unwrap();
        std::fs::remove_dir(b).unwrap();
    }
}
