//! The `--workflows` folder watcher (`workflows-watch` thread): a workflow file added to the
//! folder is loaded and started, one removed is drained; a changed one that runs is left to
//! its own orchestrator's watcher (`orchestrator::core::watch`), which reloads it, and one that
//! did not load is tried again. Bursts are
//! debounced, and every event is checked against the folder's listing, so an editor's
//! rename-on-save (a remove and a create of one name) is no change at all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use notify::{RecursiveMode, Watcher};

use crate::orchestrator::watch::EventQueue;

/// Quiet time after the last event before the folder is listed again.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Folder changes not yet taken by the daemon; the watcher waits when it is full.
const CHANGE_QUEUE: usize = 64;

/// What changed in the folder's set of workflow files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderChange {
    Added(PathBuf),
    Removed(PathBuf),
    /// Written, and a workflow file before and after.
    Changed(PathBuf),
}

/// The folder's workflow files now (`config::daemon::discover`'s rule; an unreadable folder
/// or an empty one lists nothing).
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    crate::config::daemon::discover(dir)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The changes from `before` to `after`.
pub fn changes(before: &BTreeSet<PathBuf>, after: &BTreeSet<PathBuf>) -> Vec<FolderChange> {
    let added = after.difference(before).cloned().map(FolderChange::Added);
    let removed = before.difference(after).cloned().map(FolderChange::Removed);
    removed.chain(added).collect()
}

/// Starts the watcher; changes arrive on the returned channel. `known` is the set of files
/// the daemon started with.
pub fn spawn(
    dir: &Path,
    known: BTreeSet<PathBuf>,
) -> Result<Receiver<FolderChange>, crate::orchestrator::watch::WatchError> {
    use crate::orchestrator::watch::WatchError;
    let (on_event, events) = crate::orchestrator::watch::event_queue();
    let mut watcher = notify::recommended_watcher(on_event).map_err(WatchError::Notify)?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(WatchError::Notify)?;
    let (tx, rx) = crossbeam_channel::bounded(CHANGE_QUEUE);
    let dir = dir.to_path_buf();
    std::thread::Builder::new()
        .name("workflows-watch".into())
        .spawn(move || run(&dir, watcher, &events, &tx, known))
        .map_err(WatchError::Thread)?;
    Ok(rx)
}

fn run(
    dir: &Path,
    _watcher: notify::RecommendedWatcher,
    events: &EventQueue,
    tx: &Sender<FolderChange>,
    mut known: BTreeSet<PathBuf>,
) {
    loop {
        let mut touched = BTreeSet::new();
        let writes = |ev: notify::Event| {
            if matches!(
                ev.kind,
                notify::EventKind::Create(_)
                    | notify::EventKind::Modify(_)
                    | notify::EventKind::Remove(_)
            ) {
                touched.extend(ev.paths.into_iter().filter(|p| known.contains(p)));
            }
        };
        let Some(overflowed) = events.recv_burst(DEBOUNCE, writes) else {
            return;
        };
        if overflowed {
            // Events were dropped: any known file may have been written.
            touched.extend(known.iter().cloned());
        }
        let now = listing(dir);
        let written = touched
            .into_iter()
            .filter(|p| known.contains(p) && now.contains(p))
            .map(FolderChange::Changed);
        for change in changes(&known, &now).into_iter().chain(written) {
            if tx.send(change).is_err() {
                return;
            }
        }
        known = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_what_was_added_and_removed() {
        let set = |v: &[&str]| v.iter().map(PathBuf::from).collect::<BTreeSet<_>>();
        assert_eq!(
            changes(&set(&["/w/a.md", "/w/b.md"]), &set(&["/w/b.md", "/w/c.md"])),
            [
                FolderChange::Removed("/w/a.md".into()),
                FolderChange::Added("/w/c.md".into())
            ]
        );
        assert!(changes(&set(&["/w/a.md"]), &set(&["/w/a.md"])).is_empty());
    }
}
