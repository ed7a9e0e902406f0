//! `workspace.retention_days`: an age bound on workspaces, independent of the tracker. A
//! workspace whose latest recorded activity (the newest end of a run recorded in it) is older
//! than the window is removed by the periodic sweep, as a terminal issue's is: `before_remove`
//! first, then the directory. The rules that keep this safe:
//!
//! - 0 (the default) turns it off; otherwise at least [`MIN_DAYS`], the window a restart still
//!   honours for pending reactions, so an aged-out workspace is one nothing would come back to.
//! - A workspace without any recorded run is kept: its age is unknown.
//! - Workspaces of issues running, waiting for a retry or settling are not looked at (the
//!   caller leaves them out), and a workspace is removed only while sortie holds its lock
//!   (`.sortie/lock`), so one that another process uses is kept.
//! - At most [`MAX_REMOVALS_PER_PASS`] are removed per sweep (each may run a hook); the rest
//!   wait for the next sweep.
//!
//! The decisions here are pure (time comes from the caller's clock); the caller reads the
//! activity records and counts what happened.

use std::collections::HashMap;

use super::WorkspaceManager;
use super::error::WorkspaceError;

/// The smallest non-zero `workspace.retention_days`.
pub const MIN_DAYS: u32 = 30;
/// Age removals one sweep makes at most.
pub const MAX_REMOVALS_PER_PASS: usize = 32;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// What one sweep did with the workspaces it looked at, logged once per sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionCounts {
    /// Left out because their issue is running, retrying or settling.
    pub in_flight: usize,
    /// Removed because the tracker reports their issue terminal.
    pub removed_terminal: usize,
    /// Removed because their latest activity is older than the window.
    pub removed_by_age: usize,
    /// Kept: latest activity inside the window.
    pub retained_in_window: usize,
    /// Kept: no run recorded in them, so their age is unknown.
    pub retained_no_record: usize,
    /// Kept: another process holds their lock.
    pub retained_locked: usize,
    /// Aged out but not looked at this sweep (the per-sweep cap), or their removal failed.
    pub not_evaluated: usize,
}

/// The verdict on one workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Expired,
    InWindow,
    NoRecord,
}

/// Whether a workspace whose newest run ended at `last_activity_ms` has aged out at `now_ms`.
pub fn verdict(last_activity_ms: Option<i64>, now_ms: i64, days: u32) -> Verdict {
    match last_activity_ms {
        None => Verdict::NoRecord,
        Some(at) if now_ms.saturating_sub(at) > i64::from(days).saturating_mul(DAY_MS) => {
            Verdict::Expired
        }
        Some(_) => Verdict::InWindow,
    }
}

/// Why a configured value cannot be used; `None` when it can.
pub fn check_days(days: i64) -> Option<String> {
    if days == 0 || (days >= i64::from(MIN_DAYS) && days <= i64::from(u32::MAX)) {
        return None;
    }
    Some(format!(
        "workspace.retention_days must be 0 (off) or at least {MIN_DAYS} days, got {days}"
    ))
}

impl WorkspaceManager {
    /// Removes, among `dirs` (workspace directory names the caller has not excluded), those
    /// whose latest activity in `activity` is older than `days` at `now_ms`, each while holding
    /// its lock, on the SSH host `host_of` names as well as here. Counts into `counts`.
    pub fn remove_aged(
        &self,
        dirs: &[String],
        activity: &HashMap<String, i64>,
        now_ms: i64,
        days: u32,
        host_of: impl Fn(&str) -> Option<crate::ssh::SshHost>,
        counts: &mut RetentionCounts,
    ) {
        for dir in dirs {
            match verdict(activity.get(dir).copied(), now_ms, days) {
                Verdict::NoRecord => counts.retained_no_record += 1,
                Verdict::InWindow => counts.retained_in_window += 1,
                Verdict::Expired if counts.removed_by_age >= MAX_REMOVALS_PER_PASS => {
                    counts.not_evaluated += 1;
                }
                Verdict::Expired => match self.remove_locked(dir, host_of(dir).as_ref()) {
                    Ok(true) => {
                        counts.removed_by_age += 1;
                        log::info!(
                            issue_identifier:% = dir,
                            retention_days:% = days,
                            last_activity:% = crate::clock::rfc3339_ms(activity.get(dir).copied().unwrap_or_default());
                            "workspace removed by retention"
                        );
                    }
                    Ok(false) => {}
                    Err(WorkspaceError::Locked { holder_pid, .. }) => {
                        counts.retained_locked += 1;
                        log::info!(
                            issue_identifier:% = dir,
                            holder_pid:% = crate::log_field::opt(&holder_pid);
                            "aged-out workspace kept: another process holds its lock"
                        );
                    }
                    Err(e) => {
                        counts.not_evaluated += 1;
                        log::warn!(
                            issue_identifier:% = dir,
                            error:% = crate::mask::mask(&e.to_string());
                            "workspace retention removal failed"
                        );
                    }
                },
            }
        }
    }

    /// Removes the workspace `dir` while holding its lock (`Locked` when another holds it).
    fn remove_locked(
        &self,
        dir: &str,
        host: Option<&crate::ssh::SshHost>,
    ) -> Result<bool, WorkspaceError> {
        let path = self.path_for(dir)?;
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(WorkspaceError::Stat { path, source }),
            Ok(m) if !m.is_dir() => return Ok(false),
            Ok(_) => {}
        }
        let _lock = super::lock::acquire(&path)?;
        self.remove_on("", dir, host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_strict_and_an_unknown_age_is_kept() {
        let now = 100 * DAY_MS;
        assert_eq!(verdict(None, now, 30), Verdict::NoRecord);
        assert_eq!(verdict(Some(now - 30 * DAY_MS), now, 30), Verdict::InWindow);
        assert_eq!(
            verdict(Some(now - 30 * DAY_MS - 1), now, 30),
            Verdict::Expired
        );
        assert_eq!(verdict(Some(now + DAY_MS), now, 30), Verdict::InWindow);
    }

    #[test]
    fn values_below_the_floor_are_refused() {
        assert_eq!(check_days(0), None);
        assert_eq!(check_days(30), None);
        assert_eq!(check_days(365), None);
        assert!(check_days(7).is_some_and(|m| m.contains("at least 30")));
        assert!(check_days(-1).is_some());
    }
}
