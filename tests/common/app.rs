//! An HTTP `AppState` over a real store and a hand-built snapshot, for handler tests that need
//! no server or orchestrator thread. The test publishes a new snapshot by replacing
//! `state.orch.snapshot`'s content.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, RwLock};

use sortie::clock::SystemClock;
use sortie::http::AppState;
use sortie::orchestrator::OrchestratorHandle;
use sortie::orchestrator::snapshot::Snapshot;
use sortie::store::Store;

/// The state and the directory holding its database (dropped with the test).
pub fn app_state(snap: Snapshot) -> (tempfile::TempDir, AppState) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Store::open(&dir.path().join("s.db"), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = crossbeam_channel::unbounded();
    let state = AppState {
        orch: OrchestratorHandle {
            tx,
            snapshot: Arc::new(RwLock::new(Arc::new(snap))),
            metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
            prices: Default::default(),
        },
        store: Arc::new(store),
        clock: Arc::new(SystemClock),
        version: "test",
        stopping: Arc::new(AtomicBool::new(false)),
        sse_open: Arc::new(AtomicUsize::new(0)),
        sse_serial: Arc::new(AtomicUsize::new(0)),
        max_streams: 4,
        state_cache: Default::default(),
        webhooks: Default::default(),
        refusals: Default::default(),
    };
    (dir, state)
}

/// Publishes `snap` as the orchestrator would: a new `Arc` in the handle.
pub fn publish(state: &AppState, snap: Snapshot) {
    let mut w = state
        .orch
        .snapshot
        .write()
        .unwrap_or_else(|p| p.into_inner());
    *w = Arc::new(snap);
}
