//! The memory webhook bodies may hold at once. A delivery's body (up to 8 MiB) is read before
//! its signature can be checked, so anyone who knows a kind's signature header could make the
//! daemon hold 8 MiB per connection. Before its body is read, a delivery reserves its
//! announced length (the whole cap when chunked) from [`BODY_BUDGET`], and one client
//! (address, see `tiny_http::client_key`) at most [`CLIENT_SHARE`] of it; a delivery that
//! finds no room is refused unread (503 `webhook_busy`). The reservation is released when the
//! request is dropped, after its body's memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Bytes all webhook bodies being read or answered may hold at once.
pub const BODY_BUDGET: usize = 32 * 1024 * 1024;
/// Bytes one client's webhook bodies may hold at once.
pub const CLIENT_SHARE: usize = BODY_BUDGET / 2;

#[derive(Debug, Default)]
struct Use {
    total: usize,
    clients: HashMap<Option<IpAddr>, usize>,
}

/// The budget of one server.
#[derive(Debug)]
pub struct BodyBudget {
    total: usize,
    share: usize,
    used: Mutex<Use>,
}

impl Default for BodyBudget {
    fn default() -> BodyBudget {
        BodyBudget::new(BODY_BUDGET, CLIENT_SHARE)
    }
}

/// Bytes reserved for one body; released when dropped.
#[derive(Debug)]
pub struct BodyHold {
    budget: Arc<BodyBudget>,
    client: Option<IpAddr>,
    bytes: usize,
}

impl BodyBudget {
    pub fn new(total: usize, share: usize) -> BodyBudget {
        BodyBudget {
            total,
            share,
            used: Mutex::new(Use::default()),
        }
    }

    /// Reserves `bytes` for `client`'s body; `None` when the budget or the client's share
    /// has no room for them.
    pub fn reserve(self: &Arc<Self>, client: Option<IpAddr>, bytes: usize) -> Option<BodyHold> {
        let mut u = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let mine = u.clients.get(&client).copied().unwrap_or(0);
        if u.total.saturating_add(bytes) > self.total || mine.saturating_add(bytes) > self.share {
            return None;
        }
        u.total += bytes;
        u.clients.insert(client, mine + bytes);
        Some(BodyHold {
            budget: self.clone(),
            client,
            bytes,
        })
    }

    /// Bytes reserved now.
    pub fn in_use(&self) -> usize {
        self.used.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

impl Drop for BodyHold {
    fn drop(&mut self) {
        let mut u = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        u.total = u.total.saturating_sub(self.bytes);
        if let Some(mine) = u.clients.get_mut(&self.client) {
            *mine = mine.saturating_sub(self.bytes);
            if *mine == 0 {
                u.clients.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn a_client_takes_at_most_its_share_and_all_at_most_the_budget() {
        let b = Arc::new(BodyBudget::new(100, 50));
        let a1 = b.reserve(ip("10.0.0.1"), 30);
        assert!(a1.is_some());
        assert!(b.reserve(ip("10.0.0.1"), 30).is_none());
        let a2 = b.reserve(ip("10.0.0.1"), 20);
        assert!(a2.is_some());
        let c1 = b.reserve(ip("10.0.0.2"), 50);
        assert!(c1.is_some());
        assert!(b.reserve(ip("10.0.0.3"), 1).is_none());
        assert_eq!(b.in_use(), 100);
        drop((a1, a2, c1));
        assert_eq!(b.in_use(), 0);
        assert!(
            b.used
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clients
                .is_empty()
        );
        assert!(b.reserve(ip("10.0.0.3"), 50).is_some());
    }
}
