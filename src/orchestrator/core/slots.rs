//! The daemon-wide agent cap shared by several workflows (`sortie.yaml`'s
//! `max_concurrent_agents`). Each workflow's orchestrator asks it, without blocking, for a
//! slot before each dispatch and gives the slot back when the session's exit has been
//! applied (the [`Slot`] guard's drop). Each workflow's own caps still apply inside it.
//!
//! **Fair share**: each dispatch pass declares how many more sessions its workflow would
//! start now ([`SlotBroker::declare_demand`]). Free slots are dealt one at a time to the
//! wanting workflow holding the fewest slots; among equals, to the one that got its last slot
//! longest ago (then by name), and a workflow is dealt no more than it wants. A workflow may
//! take as many as it would be dealt. So a workflow below its share of the cap gets the next
//! free slot before one above it, equals take turns, and slots another workflow does not want
//! are not held back. No running session is stopped to make room: a busy workflow that took
//! every slot while the others were idle gives them back as its sessions end, and the freed
//! ones go to the others first. A declared demand lapses after [`DEMAND_TTL_MS`] (a workflow
//! whose tracker stopped answering does not keep slots reserved). With a single workflow
//! everything free is its own, exactly like the workflow's own cap.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// How long a workflow's declared demand counts without being declared again: a workflow
/// whose tracker stopped answering does not keep slots reserved for itself.
pub const DEMAND_TTL_MS: i64 = 120_000;

#[derive(Debug, Default)]
struct Inner {
    cap: usize,
    /// Workflow → slots held.
    held: BTreeMap<String, usize>,
    /// Workflow → (more sessions it would start, when it said so).
    wants: BTreeMap<String, (usize, i64)>,
    /// Workflow → when it last got a slot.
    served_at: BTreeMap<String, i64>,
}

impl Inner {
    fn total(&self) -> usize {
        self.held.values().sum()
    }

    fn held_by(&self, w: &str) -> usize {
        self.held.get(w).copied().unwrap_or(0)
    }

    /// How many slots `w` may take now: the free slots dealt to `w` (wanting without limit)
    /// and to the other wanting workflows in the order the module docs give.
    fn room(&self, w: &str, now_ms: i64) -> usize {
        let free = self.cap.saturating_sub(self.total());
        if free == 0 {
            return 0;
        }
        // (held, last served, name, still wanted)
        let mut seats: Vec<(usize, i64, &str, usize)> = self
            .wants
            .iter()
            .filter(|(v, (n, at))| {
                v.as_str() != w && *n > 0 && now_ms.saturating_sub(*at) < DEMAND_TTL_MS
            })
            .map(|(v, (n, _))| (self.held_by(v), self.served(v), v.as_str(), *n))
            .collect();
        seats.push((self.held_by(w), self.served(w), w, usize::MAX));
        let mut dealt = 0;
        for _ in 0..free {
            let Some(next) = seats
                .iter_mut()
                .filter(|s| s.3 > 0)
                .min_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)))
            else {
                break;
            };
            next.0 += 1;
            next.1 = now_ms;
            next.3 -= 1;
            if next.2 == w {
                dealt += 1;
            }
        }
        dealt
    }

    fn served(&self, w: &str) -> i64 {
        self.served_at.get(w).copied().unwrap_or(i64::MIN)
    }
}

/// The shared cap; cloned into every workflow's orchestrator.
#[derive(Debug, Clone, Default)]
pub struct SlotBroker {
    inner: Arc<Mutex<Inner>>,
}

/// One workflow's handle on the shared cap: the broker and the name it is known by there.
#[derive(Debug, Clone)]
pub struct DaemonSlots {
    pub broker: SlotBroker,
    pub workflow: String,
}

impl DaemonSlots {
    /// This workflow's room as a dispatch pass sees it.
    pub fn pass_room(&self, now_ms: i64) -> crate::orchestrator::claim::dispatch_pass::DaemonRoom {
        crate::orchestrator::claim::dispatch_pass::DaemonRoom {
            room: self.broker.room(&self.workflow, now_ms),
            used: self.broker.in_use(),
            cap: self.broker.cap(),
        }
    }

    pub fn try_acquire(&self, now_ms: i64) -> Option<Slot> {
        self.broker.try_acquire(&self.workflow, now_ms)
    }

    pub fn declare_demand(&self, wanted: usize, now_ms: i64) {
        self.broker.declare_demand(&self.workflow, wanted, now_ms);
    }
}

/// One slot, given back on drop.
#[derive(Debug)]
pub struct Slot {
    broker: SlotBroker,
    workflow: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.broker.lock();
        if let Some(n) = inner.held.get_mut(&self.workflow) {
            *n = n.saturating_sub(1);
        }
    }
}

impl SlotBroker {
    pub fn new(cap: usize) -> SlotBroker {
        SlotBroker {
            inner: Arc::new(Mutex::new(Inner {
                cap,
                ..Inner::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cap across every workflow.
    pub fn cap(&self) -> usize {
        self.lock().cap
    }

    /// Slots held by every workflow together.
    pub fn in_use(&self) -> usize {
        self.lock().total()
    }

    /// Slots `workflow` holds.
    pub fn held_by(&self, workflow: &str) -> usize {
        self.lock().held_by(workflow)
    }

    /// Says how many more sessions `workflow` would start now (issues it would dispatch, within
    /// its own caps); each dispatch pass says it again, `0` when it wants none.
    pub fn declare_demand(&self, workflow: &str, wanted: usize, now_ms: i64) {
        self.lock()
            .wants
            .insert(workflow.to_string(), (wanted, now_ms));
    }

    /// How many more sessions `workflow` may start now.
    pub fn room(&self, workflow: &str, now_ms: i64) -> usize {
        self.lock().room(workflow, now_ms)
    }

    /// A slot for `workflow` when its fair share allows one now.
    pub fn try_acquire(&self, workflow: &str, now_ms: i64) -> Option<Slot> {
        let mut inner = self.lock();
        if inner.room(workflow, now_ms) == 0 {
            return None;
        }
        *inner.held.entry(workflow.to_string()).or_insert(0) += 1;
        inner.served_at.insert(workflow.to_string(), now_ms);
        if let Some((n, _)) = inner.wants.get_mut(workflow) {
            *n = n.saturating_sub(1);
        }
        drop(inner);
        Some(Slot {
            broker: self.clone(),
            workflow: workflow.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(b: &SlotBroker, w: &str, n: usize, now: i64) -> Vec<Slot> {
        (0..n).filter_map(|_| b.try_acquire(w, now)).collect()
    }

    #[test]
    fn one_workflow_gets_the_whole_cap() {
        let b = SlotBroker::new(3);
        b.declare_demand("a", 5, 0);
        let held = take(&b, "a", 5, 0);
        assert_eq!(held.len(), 3);
        assert_eq!(b.room("a", 0), 0);
        drop(held);
        assert_eq!(b.in_use(), 0);
        assert_eq!(b.room("a", 0), 3);
    }

    #[test]
    fn slots_nobody_else_wants_are_not_held_back() {
        let b = SlotBroker::new(4);
        b.declare_demand("b", 0, 0);
        assert_eq!(take(&b, "a", 9, 0).len(), 4);
        let b2 = SlotBroker::new(4);
        b2.declare_demand("b", 1, 0);
        // b wants one: a may take the other three.
        assert_eq!(b2.room("a", 0), 3);
    }

    #[test]
    fn a_workflow_below_its_share_gets_the_next_free_slot_first() {
        let b = SlotBroker::new(4);
        let mut a = take(&b, "a", 4, 0);
        assert_eq!(a.len(), 4);
        b.declare_demand("b", 9, 1);
        assert_eq!(b.room("b", 1), 0, "nothing is stopped to make room");
        a.pop();
        // a holds 3, b none: the freed slot is b's.
        assert_eq!(b.room("a", 2), 0);
        assert_eq!(b.room("b", 2), 1);
        let _b1 = b.try_acquire("b", 2);
        a.pop();
        assert_eq!(b.room("a", 3), 0);
        let _b2 = b.try_acquire("b", 3);
        a.pop();
        // a holds 1, b 2: the free slot is a's.
        b.declare_demand("a", 9, 4);
        assert_eq!(b.room("a", 4), 1);
        assert_eq!(b.room("b", 4), 0);
    }

    #[test]
    fn three_workflows_over_two_slots_take_turns() {
        let b = SlotBroker::new(2);
        for w in ["a", "b", "c"] {
            b.declare_demand(w, 9, 0);
        }
        let mut order = Vec::new();
        let mut held: Vec<(String, Slot)> = Vec::new();
        // Each round every workflow asks in the same order (a busy `a` first); the oldest
        // slot ends after each round.
        for round in 1..=9 {
            for w in ["a", "b", "c"] {
                if let Some(s) = b.try_acquire(w, round) {
                    order.push(w);
                    held.push((w.to_string(), s));
                }
            }
            assert!(b.in_use() <= 2);
            held.remove(0);
        }
        for w in ["a", "b", "c"] {
            let n = order.iter().filter(|x| **x == w).count();
            assert!(n >= 3, "{w} got {n} slots: {order:?}");
        }
    }

    #[test]
    fn demand_not_declared_again_lapses() {
        let b = SlotBroker::new(2);
        b.declare_demand("b", 9, 0);
        assert_eq!(b.room("a", 1), 1);
        assert_eq!(b.room("a", DEMAND_TTL_MS + 1), 2);
    }
}
