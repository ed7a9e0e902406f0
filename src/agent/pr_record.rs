//! The pull-request record `<workspace>/.sortie/scm.json`, written by the agent or the
//! `after_run` hook after it pushed and opened a pull request, and read at the worker's exit:
//! `{"branch", "sha", "pushed_at", "pr_number", "owner", "repo"}`. A record over 4 KiB, a
//! symlinked `.sortie` or `scm.json`, unparseable JSON or an empty `branch` is ignored with a
//! warning, so reactions never act on a record they cannot trust.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Largest record accepted.
pub const MAX_RECORD_BYTES: u64 = 4096;

/// What the record names. Pull-request reactions need `pr_number > 0`, `owner` and `repo`
/// ([`PrRecord::pull_request`]); the repository never comes from tracker config.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PrRecord {
    pub branch: String,
    #[serde(default)]
    pub sha: String,
    #[serde(default)]
    pub pushed_at: String,
    #[serde(default)]
    pub pr_number: u64,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub repo: String,
}

impl PrRecord {
    /// `(owner, repo, number)` when the record identifies a pull request.
    pub fn pull_request(&self) -> Option<(&str, &str, u64)> {
        let owner = self.owner.trim();
        let repo = self.repo.trim();
        (self.pr_number > 0 && !owner.is_empty() && !repo.is_empty()).then_some((
            owner,
            repo,
            self.pr_number,
        ))
    }

    /// The ref CI is read at: the sha, else the branch.
    pub fn ci_ref(&self) -> &str {
        if self.sha.trim().is_empty() {
            self.branch.trim()
        } else {
            self.sha.trim()
        }
    }
}

/// The outcome of reading the record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordRead {
    pub record: Option<PrRecord>,
    /// Why a present record was ignored (log it at warn).
    pub warning: Option<String>,
}

/// Reads `<workspace>/.sortie/scm.json`.
pub fn read(workspace: &Path) -> RecordRead {
    read_on(workspace, None)
}

/// [`read`] of a workspace on `host` (`None` reads here); parsed exactly alike.
pub fn read_on(workspace: &Path, host: Option<&crate::ssh::SshHost>) -> RecordRead {
    match super::sortie_file::read_on(workspace, "scm.json", MAX_RECORD_BYTES, host) {
        Ok(None) => RecordRead::default(),
        Ok(Some(bytes)) => parse(&bytes),
        Err(reason) => RecordRead {
            record: None,
            warning: Some(reason.to_string()),
        },
    }
}

/// Parses record content (pure).
pub fn parse(bytes: &[u8]) -> RecordRead {
    let ignored = |why: String| RecordRead {
        record: None,
        warning: Some(why),
    };
    match serde_json::from_slice::<PrRecord>(bytes) {
        Err(e) => ignored(format!("scm.json is not a valid record: {e}")),
        Ok(r) if r.branch.trim().is_empty() => ignored("scm.json has an empty branch".into()),
        Ok(r) => RecordRead {
            record: Some(r),
            warning: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_record_names_its_pull_request_and_ci_ref() {
        let r = parse(br#"{"branch":"sortie/A-1","sha":"abc","pushed_at":"2026-01-01T00:00:00Z","pr_number":42,"owner":"o","repo":"r"}"#);
        let rec = r.record.clone().unwrap_or_default();
        assert_eq!(r.warning, None);
        assert_eq!(rec.pull_request(), Some(("o", "r", 42)));
        assert_eq!(rec.ci_ref(), "abc");
    }

    #[test]
    fn a_branch_only_record_has_no_pull_request() {
        let r = parse(br#"{"branch":"b"}"#).record.unwrap_or_default();
        assert_eq!(r.pull_request(), None);
        assert_eq!(r.ci_ref(), "b");
    }

    #[test]
    fn bad_records_are_ignored_with_a_reason() {
        for bad in [
            &b"{"[..],
            br#"{"branch":""}"#,
            br#"{"sha":"x"}"#,
            br#"{"branch":"b","pr_number":"x"}"#,
        ] {
            let r = parse(bad);
            assert!(r.record.is_none() && r.warning.is_some(), "{r:?}");
        }
    }

    #[test]
    fn symlinks_and_oversized_files_are_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        std::fs::create_dir(ws.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
        let target = ws.join("elsewhere.json");
        std::fs::write(&target, br#"{"branch":"b"}"#).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&target, ws.join(".sortie/scm.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(read(ws).warning.unwrap_or_default().contains("symlink"));
        std::fs::remove_file(ws.join(".sortie/scm.json")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join(".sortie/scm.json"), vec![b' '; 5000])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(read(ws).warning.unwrap_or_default().contains("limit"));
        std::fs::remove_file(ws.join(".sortie/scm.json")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(ws), RecordRead::default());
    }
}
