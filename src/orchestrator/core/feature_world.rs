//! A feature's surroundings for unit tests: a loaded workflow (file tracker, mock agent), an
//! empty state, a store in a temporary directory and default prices, lent out as a [`Cx`].

use std::sync::Arc;

use super::feature::Cx;
use super::state::State;

/// What a [`Cx`] borrows.
pub(crate) struct World {
    pub now_ms: i64,
    pub workflow: crate::config::Workflow,
    pub state: State,
    pub store: crate::store::Store,
    pub prices: crate::pricing::PriceBoard,
    _dir: tempfile::TempDir,
}

impl World {
    /// A world whose clock reads `now_ms`.
    pub(crate) fn at(now_ms: i64) -> World {
        let workflow = workflow();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::ManualClock::new(now_ms));
        let store = crate::store::Store::open(&dir.path().join("sortie.db"), clock)
            .unwrap_or_else(|e| panic!("{e}"));
        World {
            now_ms,
            workflow,
            state: State::default(),
            store,
            prices: crate::pricing::PriceBoard::default(),
            _dir: dir,
        }
    }

    pub(crate) fn cx(&self) -> Cx<'_> {
        Cx {
            now_ms: self.now_ms,
            workflow: &self.workflow,
            state: &self.state,
            store: &self.store,
            prices: &self.prices,
        }
    }
}

/// The test workflow: a file tracker (`To Do` active, `Done` terminal) and the mock agent,
/// loaded as from `/srv/WORKFLOW.md`.
pub(crate) fn workflow() -> crate::config::Workflow {
    let text = "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nagent:\n  kind: mock\n---\nHello\n";
    let opts = crate::config::LoadOptions {
        env_file: None,
        env: Default::default(),
        cwd: "/run/cwd".into(),
        home: None,
    };
    crate::config::parse_workflow(text, std::path::Path::new("/srv/WORKFLOW.md"), &opts)
        .unwrap_or_else(|e| panic!("the test workflow loads: {e}"))
}
