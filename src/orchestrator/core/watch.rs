//! The workflow watcher (`watch` thread): notify on the workflow's *directory*, so editors'
//! rename-on-save and Kubernetes ConfigMap symlink swaps are seen; only modify/create/rename
//! events naming the workflow file count (our own reads fire access events, which are
//! ignored); bursts are debounced. The orchestrator also reloads on every tick, so a missed
//! event only delays a reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
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

/// How many file events wait for a watcher thread. Past it events are dropped and the burst
/// they belonged to counts as touching every file: a flood of writes in the folder never
/// grows memory, and a dropped event still leads to a re-read.
const EVENT_QUEUE: usize = 256;

/// The longest a burst is collected before it is acted on, so a folder that never goes quiet
/// still has its changes applied.
const MAX_BURST: Duration = Duration::from_secs(2);

/// The receiving side of notify's events, bounded (`EVENT_QUEUE`).
pub struct EventQueue {
    rx: Receiver<notify::Event>,
    overflowed: Arc<AtomicBool>,
}

/// notify's callback (it runs on notify's own thread and never blocks) and the queue it
/// feeds.
pub fn event_queue() -> (
    impl FnMut(notify::Result<notify::Event>) + Send + 'static,
    EventQueue,
) {
    let (tx, rx) = crossbeam_channel::bounded(EVENT_QUEUE);
    let overflowed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&overflowed);
    let on_event = move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && let Err(TrySendError::Full(_)) = tx.try_send(ev)
        {
            flag.store(true, Ordering::Relaxed);
        }
    };
    (on_event, EventQueue { rx, overflowed })
}

impl EventQueue {
    /// Waits for an event, then hands `each` every event until `quiet` passes without one
    /// (or `MAX_BURST` is over). `Some(true)` when events were dropped since the last burst;
    /// `None` once notify is gone.
    pub fn recv_burst(&self, quiet: Duration, mut each: impl FnMut(notify::Event)) -> Option<bool> {
        each(self.rx.recv().ok()?);
        let until = Instant::now() + MAX_BURST;
        while let Ok(ev) = self.rx.recv_timeout(quiet) {
            each(ev);
            if Instant::now() >= until {
                break;
            }
        }
        Some(self.overflowed.swap(false, Ordering::Relaxed))
    }
}

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
    let (on_event, events) = event_queue();
    let mut watcher = notify::recommended_watcher(on_event).map_err(WatchError::Notify)?;
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
            loop {
                let mut hit = false;
                let Some(overflowed) = events.recv_burst(DEBOUNCE, |ev| hit |= relevant(&ev))
                else {
                    break;
                };
                if (hit || overflowed) && tx.send(OrchMsg::WorkflowChanged).is_err() {
                    break;
                }
            }
        })
        .map_err(WatchError::Thread)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_event(i: usize) -> notify::Result<notify::Event> {
        Ok(
            notify::Event::new(EventKind::Modify(notify::event::ModifyKind::Any))
                .add_path(PathBuf::from(format!("/w/{i}.md"))),
        )
    }

    #[test]
    fn a_flood_is_capped_and_the_next_burst_says_events_were_dropped() {
        let (mut on_event, queue) = event_queue();
        for i in 0..EVENT_QUEUE + 50 {
            on_event(write_event(i));
        }
        let mut seen = 0;
        let dropped = queue.recv_burst(Duration::from_millis(1), |_| seen += 1);
        assert_eq!((seen, dropped), (EVENT_QUEUE, Some(true)));
        on_event(write_event(0));
        let dropped = queue.recv_burst(Duration::from_millis(1), |_| seen += 1);
        assert_eq!((seen, dropped), (EVENT_QUEUE + 1, Some(false)));
        drop(on_event);
        assert_eq!(queue.recv_burst(Duration::from_millis(1), |_| ()), None);
    }
}
