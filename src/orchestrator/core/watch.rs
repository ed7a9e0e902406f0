//! The workflow watcher (`watch` thread): notify on the workflow's *directory*, so editors'
//! rename-on-save and Kubernetes ConfigMap symlink swaps are seen; only modify/create/rename
//! events naming the workflow file count (our own reads fire access events, which are
//! ignored); bursts are debounced. The orchestrator also reloads on every tick, so a missed
//! event only delays a reload.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crossbeam_channel::Sender;
use notify::{EventKind, RecursiveMode, Watcher};

use super::msg::OrchMsg;

/// Quiet time after the last relevant event before a reload is requested.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Why the watcher did not start (the tick's reload still applies changes, later).
#[derive(Debug)]
pub enum WatchError {
    /// The workflow path has no directory or no file name to watch.
    BadPath {
        path: PathBuf,
        missing: &'static str,
    },
    /// notify could not watch the directory.
    Notify(notify::Error),
    /// The `watch` thread could not be started.
    Thread(std::io::Error),
}

impl std::fmt::Display for WatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchError::BadPath { path, missing } => {
                write!(f, "{} has no {missing}", path.display())
            }
            WatchError::Notify(e) => write!(f, "{e}"),
            WatchError::Thread(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WatchError {}

/// Starts the watcher thread.
pub fn spawn(workflow: &Path, tx: Sender<OrchMsg>) -> Result<(), WatchError> {
    let bad_path = |missing| WatchError::BadPath {
        path: workflow.to_path_buf(),
        missing,
    };
    let dir = workflow
        .parent()
        .ok_or_else(|| bad_path("parent directory"))?
        .to_path_buf();
    let name = workflow
        .file_name()
        .ok_or_else(|| bad_path("file name"))?
        .to_os_string();
    let (ev_tx, ev_rx) = crossbeam_channel::unbounded();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let _ = ev_tx.send(ev);
        }
    })
    .map_err(WatchError::Notify)?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(WatchError::Notify)?;
    std::thread::Builder::new()
        .name("watch".into())
        .spawn(move || {
            // The watcher lives as long as this thread.
            let _watcher = watcher;
            let relevant = |ev: &notify::Event| {
                matches!(
                    ev.kind,
                    EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
                ) && ev
                    .paths
                    .iter()
                    .any(|p| p.file_name() == Some(name.as_os_str()))
            };
            while let Ok(ev) = ev_rx.recv() {
                if !relevant(&ev) {
                    continue;
                }
                // Debounce: wait until the burst is over.
                while let Ok(_more) = ev_rx.recv_timeout(DEBOUNCE) {}
                if tx.send(OrchMsg::WorkflowChanged).is_err() {
                    break;
                }
            }
        })
        .map_err(WatchError::Thread)?;
    Ok(())
}
