//! A group commit: callers queue their items, and one caller at a time applies everything
//! queued so far as one batch. Items queued while a batch is being applied wait for it to end
//! and then go together into the next one.
//!
//! A caller whose item another caller's batch answered returns as soon as that batch ends. It
//! waits for a signal, not for the right to apply. So it is never held behind the next batch.
//! A caller that queues and then has to win a lock just to learn its answer would be held
//! there, and the callers in line for the lock would keep batches at one item each.

use std::sync::{Condvar, Mutex, MutexGuard};

use crossbeam_channel::{Receiver, TryRecvError};

/// Items waiting for a batch, and whether one is being applied.
struct Pending<T> {
    queue: Vec<T>,
    applying: bool,
}

/// The queue, and the signal that a batch ended.
pub struct GroupCommit<T> {
    pending: Mutex<Pending<T>>,
    ended: Condvar,
}

impl<T> GroupCommit<T> {
    pub const fn new() -> GroupCommit<T> {
        GroupCommit {
            pending: Mutex::new(Pending {
                queue: Vec::new(),
                applying: false,
            }),
            ended: Condvar::new(),
        }
    }

    /// Queues `item` and returns its answer from `answered` once a batch has taken it. This
    /// caller applies the batch with `apply` when no other batch is being applied; otherwise
    /// it waits for that batch to end. `None` when the batch that took the item ended
    /// without answering it (its answer's sender was dropped, e.g. by a panic in `apply`).
    pub fn submit<R>(
        &self,
        item: T,
        answered: &Receiver<R>,
        apply: impl FnOnce(Vec<T>),
    ) -> Option<R> {
        let mut apply = Some(apply);
        let mut pending = self.lock();
        pending.queue.push(item);
        loop {
            match answered.try_recv() {
                Ok(answer) => return Some(answer),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if pending.applying {
                pending = self.ended.wait(pending).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // No batch is under way: this caller applies one, unless it already has (its item
            // then went unanswered).
            let apply = apply.take()?;
            pending.applying = true;
            let batch = std::mem::take(&mut pending.queue);
            drop(pending);
            let ending = Ending(self);
            apply(batch);
            drop(ending);
            pending = self.lock();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending<T>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Ends the batch being applied, on return or panic alike, and wakes every waiting caller.
struct Ending<'a, T>(&'a GroupCommit<T>);

impl<T> Drop for Ending<'_, T> {
    fn drop(&mut self) {
        self.0.lock().applying = false;
        self.0.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    use crossbeam_channel::Sender;

    /// An item: its number and where its answer (the batch it went in) goes.
    type Item = (u32, Sender<Vec<u32>>);

    /// The failure bound of every wait below; reaching it fails the test.
    const BOUND: Duration = Duration::from_secs(30);

    struct Bench {
        group: Arc<GroupCommit<Item>>,
        /// Every batch applied, in order.
        batches: Arc<Mutex<Vec<Vec<u32>>>>,
    }

    impl Bench {
        fn new() -> Bench {
            Bench {
                group: Arc::new(GroupCommit::new()),
                batches: Arc::default(),
            }
        }

        /// Submits `n` on a thread of its own. A batch this caller applies first waits for a
        /// message on `gate` (when given), then answers each item with the batch.
        fn submit(&self, n: u32, gate: Option<Receiver<()>>) -> JoinHandle<Option<Vec<u32>>> {
            let (group, batches) = (self.group.clone(), self.batches.clone());
            std::thread::spawn(move || {
                let (tx, rx) = crossbeam_channel::bounded(1);
                group.submit((n, tx), &rx, |batch: Vec<Item>| {
                    if let Some(gate) = gate {
                        let _ = gate.recv_timeout(BOUND);
                    }
                    let numbers: Vec<u32> = batch.iter().map(|(n, _)| *n).collect();
                    batches
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(numbers.clone());
                    for (_, answer) in batch {
                        let _ = answer.send(numbers.clone());
                    }
                })
            })
        }

        /// Submits `n` as the first caller, whose batch is held open until a message on the
        /// returned sender; returns once that batch is being applied.
        fn submit_held(&self, n: u32) -> (Sender<()>, JoinHandle<Option<Vec<u32>>>) {
            let (open, gate) = crossbeam_channel::bounded(1);
            let handle = self.submit(n, Some(gate));
            self.wait_for(0);
            (open, handle)
        }

        /// Waits until a batch is being applied and `queued` items wait for the next one.
        fn wait_for(&self, queued: usize) {
            let start = Instant::now();
            loop {
                {
                    let p = self.group.lock();
                    if p.applying && p.queue.len() == queued {
                        return;
                    }
                }
                assert!(
                    start.elapsed() < BOUND,
                    "never {queued} queued behind a batch"
                );
                std::thread::yield_now();
            }
        }
    }

    fn joined<R>(h: JoinHandle<R>) -> R {
        h.join().unwrap_or_else(|_| panic!("a caller panicked"))
    }

    #[test]
    fn items_queued_while_a_batch_is_applied_go_together_into_the_next() {
        let bench = Bench::new();
        let (open, first) = bench.submit_held(1);
        let others: Vec<_> = (2..=4).map(|n| bench.submit(n, None)).collect();
        bench.wait_for(3);
        open.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(joined(first), Some(vec![1]));
        let mut answers: Vec<_> = others.into_iter().map(joined).collect();
        answers.dedup();
        assert_eq!(answers.len(), 1, "one batch answered them all: {answers:?}");
        let batch = answers[0].clone().unwrap_or_default();
        assert_eq!(batch.len(), 3, "{batch:?}");
        assert_eq!(bench.batches.lock().map(|b| b.len()).unwrap_or(0), 2);
    }

    #[test]
    fn a_caller_answered_by_another_callers_batch_returns_while_the_next_batch_is_applied() {
        let bench = Bench::new();
        let (open_first, first) = bench.submit_held(1);
        // Items 2 and 3 wait; whichever caller applies their batch holds it at `second`.
        let (open_second, second_gate) = crossbeam_channel::unbounded();
        let pair = [
            bench.submit(2, Some(second_gate.clone())),
            bench.submit(3, Some(second_gate)),
        ];
        bench.wait_for(2);
        open_first.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(joined(first), Some(vec![1]));
        bench.wait_for(0);
        // Item 4 waits behind the pair's batch, then applies its own and holds it open.
        let (open_last, last_gate) = crossbeam_channel::bounded(1);
        let last = bench.submit(4, Some(last_gate));
        bench.wait_for(1);
        open_second.send(()).unwrap_or_else(|e| panic!("{e}"));
        // Both callers of the pair return while item 4's batch is still being applied.
        let (done_tx, done) = crossbeam_channel::unbounded();
        for h in pair {
            let done_tx = done_tx.clone();
            std::thread::spawn(move || done_tx.send(joined(h)));
        }
        for _ in 0..2 {
            let answer = done
                .recv_timeout(BOUND)
                .unwrap_or_else(|_| panic!("a caller of the pair waited for the next batch"));
            assert_eq!(answer.map(|b| b.len()), Some(2));
        }
        assert!(!last.is_finished(), "item 4's batch is still held");
        open_last.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(joined(last), Some(vec![4]));
    }

    #[test]
    fn a_batch_that_panics_leaves_its_items_unanswered_and_the_next_batch_applies() {
        let group: Arc<GroupCommit<Item>> = Arc::new(GroupCommit::new());
        let (open, gate) = crossbeam_channel::bounded::<()>(1);
        let g = group.clone();
        let panicking = std::thread::spawn(move || {
            let (tx, rx) = crossbeam_channel::bounded(1);
            g.submit((1, tx), &rx, |_batch: Vec<Item>| {
                let _ = gate.recv_timeout(BOUND);
                panic!("the batch fails");
            })
        });
        let bench = Bench {
            group: group.clone(),
            batches: Arc::default(),
        };
        bench.wait_for(0);
        let next = bench.submit(2, None);
        bench.wait_for(1);
        open.send(()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            panicking.join().is_err(),
            "the applying caller's panic is its own"
        );
        assert_eq!(joined(next), Some(vec![2]), "the next batch is not held");
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u32>>(1);
        let dropped = group.submit((3, tx), &rx, drop);
        assert_eq!(dropped, None, "an item its batch did not answer");
    }
}
