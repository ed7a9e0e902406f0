//! How many bytes one read may take: a cap on the answers of one whole read (every page of a
//! list, every request of one adapter call) and a cap on any one answer, so a hostile or broken
//! server cannot make a read hold more memory than the operator allowed.
//!
//! A caller opens a budget around the work of one read with [`with_read_budget`]; every answer
//! the client reads on this thread until the closure returns is charged to it, and each answer
//! may take at most what the budget has left (and at most [`ReadBudget::per_answer`]). The
//! budget is per thread because a read runs on one thread from its first request to its last;
//! a budget opened inside another (a call made from inside a call) counts against the outer
//! one. Without a budget the client's own per-answer cap applies.

use std::cell::RefCell;

/// The caps of one read, and the name they go by in errors (the setting an operator raises).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBudget {
    /// Bytes all answers of the read may total.
    pub total: u64,
    /// Bytes one answer may take (at most `total`).
    pub per_answer: u64,
    /// The setting that holds `total`, named in the error when a cap is reached.
    pub name: String,
}

impl ReadBudget {
    /// A budget of `total` bytes whose answers may each take an eighth of it: a page of a list
    /// is parsed whole, so one answer must stay a fraction of what the read may hold.
    pub fn new(total: u64, name: &str) -> ReadBudget {
        let total = total.max(1);
        ReadBudget {
            total,
            per_answer: (total / 8).max(1),
            name: name.to_string(),
        }
    }
}

/// What an answer may take now under the open budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Room {
    /// Bytes this answer may take.
    pub limit: u64,
    /// Bytes the read has taken so far.
    pub used: u64,
    pub budget: ReadBudget,
}

struct Open {
    budget: ReadBudget,
    used: u64,
}

thread_local! {
    static OPEN: RefCell<Option<Open>> = const { RefCell::new(None) };
}

/// Closes the budget this call opened, also when the closure panics.
struct Close(bool);

impl Drop for Close {
    fn drop(&mut self) {
        if self.0 {
            OPEN.with(|o| *o.borrow_mut() = None);
        }
    }
}

/// Runs `f` with `budget` charged for every answer this thread reads; inside an open budget it
/// runs under the outer one.
pub fn with_read_budget<T>(budget: &ReadBudget, f: impl FnOnce() -> T) -> T {
    let opened = OPEN.with(|o| {
        let mut o = o.borrow_mut();
        if o.is_some() {
            return false;
        }
        *o = Some(Open {
            budget: budget.clone(),
            used: 0,
        });
        true
    });
    let _close = Close(opened);
    f()
}

/// The room the open budget leaves for the next answer; `None` without a budget.
pub(crate) fn room() -> Option<Room> {
    OPEN.with(|o| {
        o.borrow().as_ref().map(|open| Room {
            limit: open
                .budget
                .per_answer
                .min(open.budget.total.saturating_sub(open.used)),
            used: open.used,
            budget: open.budget.clone(),
        })
    })
}

/// Charges an answer's bytes to the open budget, if any.
pub(crate) fn charge(bytes: u64) {
    OPEN.with(|o| {
        if let Some(open) = o.borrow_mut().as_mut() {
            open.used = open.used.saturating_add(bytes);
        }
    });
}

/// `n` bytes for messages: whole MiB or KiB when exact, one decimal otherwise.
pub fn size_text(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB", n / KIB)
    } else if n >= KIB {
        format!("{:.1} KiB", n as f64 / KIB as f64)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_counts_every_answer_of_its_scope_and_nests_into_the_outer_one() {
        assert_eq!(room(), None);
        let b = ReadBudget::new(800, "t.max");
        assert_eq!(b.per_answer, 100);
        with_read_budget(&b, || {
            assert_eq!(room().map(|r| (r.limit, r.used)), Some((100, 0)));
            charge(750);
            assert_eq!(room().map(|r| (r.limit, r.used)), Some((50, 750)));
            with_read_budget(&ReadBudget::new(1 << 30, "inner"), || {
                charge(40);
                let r = room();
                assert_eq!(r.as_ref().map(|r| r.limit), Some(10));
                assert_eq!(r.map(|r| r.budget.name), Some("t.max".to_string()));
            });
            assert_eq!(room().map(|r| r.used), Some(790));
        });
        assert_eq!(room(), None);
        let panicked = std::panic::catch_unwind(|| with_read_budget(&b, || panic!("boom")));
        assert!(panicked.is_err());
        assert_eq!(room(), None, "a panic closes the budget");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(64 * 1024 * 1024), "64 MiB");
        assert_eq!(size_text(512 * 1024), "512 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(size_text(15_743_941), "15.0 MiB");
        assert_eq!(size_text(1536), "1.5 KiB");
    }
}
