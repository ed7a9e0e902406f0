//! The token figures of running sessions as their session rows hold them once committed.
//!
//! A running session's figures grow with every usage event, but reach its session row only in
//! batches (at most once a second and at each turn end, see `orchestrator::persist`). A daemon
//! killed between two batches restarts with the row's figures, so figures served before they
//! were stored would go down across the restart. The writer records here what each row holds
//! once its transaction has committed, and published snapshots serve at most that
//! (`orchestrator::snapshot`); [`generation`] moves on every commit, so a new snapshot can be
//! published soon after. Entries are keyed by dispatch id and dropped when the run's record
//! commits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::agent::TokenUsage;

static COMMITTED: OnceLock<Mutex<HashMap<String, TokenUsage>>> = OnceLock::new();
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn committed_map() -> &'static Mutex<HashMap<String, TokenUsage>> {
    COMMITTED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The figures the dispatch's session row holds, committed; `None` before its first batch.
pub fn committed(dispatch_id: &str) -> Option<TokenUsage> {
    committed_map()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(dispatch_id)
        .copied()
}

/// Moves on every change of [`committed`] figures.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// A session row with these figures has committed.
pub(crate) fn note_committed(dispatch_id: &str, figures: TokenUsage) {
    let mut m = committed_map().lock().unwrap_or_else(|p| p.into_inner());
    if m.get(dispatch_id) != Some(&figures) {
        m.insert(dispatch_id.to_string(), figures);
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// The run's record has committed: its figures count in the stored totals from now on.
pub(crate) fn forget(dispatch_id: &str) {
    let mut m = committed_map().lock().unwrap_or_else(|p| p.into_inner());
    if m.remove(dispatch_id).is_some() {
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// The figures a live session row holds (tokens are stored as 0 while unmeasured).
pub(crate) fn of_row(s: &super::SessionMeta) -> TokenUsage {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    TokenUsage {
        input_tokens: n(s.input_tokens),
        output_tokens: n(s.output_tokens),
        total_tokens: n(s.total_tokens),
        cache_read_tokens: n(s.cache_read_tokens),
        cache_write_tokens: n(s.cache_write_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_kept_per_dispatch_until_forgotten_and_each_change_moves_the_generation() {
        let id = format!("test-{}", line!());
        assert_eq!(committed(&id), None);
        let g0 = generation();
        let t = TokenUsage::new(10, 2, 0, 0);
        note_committed(&id, t);
        assert_eq!(committed(&id), Some(t));
        let g1 = generation();
        assert!(g1 > g0);
        note_committed(&id, t);
        forget(&id);
        assert_eq!(committed(&id), None);
        assert!(generation() > g1);
    }
}
