//! sortie patch: who may hold a connection. The accept loop takes a slot for each accepted
//! connection before giving it a thread: an ordinary slot while fewer than
//! `max_connections - probe_reserve` are taken and the client holds fewer than
//! `max_connections_per_client`; else a probe slot (one probe request, then closed) while
//! fewer than `probe_reserve` are taken and the client holds fewer than
//! `PROBE_SLOTS_PER_CLIENT`; else the connection is refused. A slot is held from accept until
//! the connection's thread has ended and every response writer it handed out is dropped, so
//! an event stream counts for its whole life.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::limits::{client_key, ConnRefusal, Limits, PROBE_SLOTS_PER_CLIENT};

#[derive(Default)]
struct Counts {
    ordinary: usize,
    probes: usize,
    /// Per client: (ordinary, probe) slots held. Entries go when both are 0.
    clients: HashMap<Option<IpAddr>, (usize, usize)>,
}

/// The slots of one server.
#[derive(Default)]
pub(crate) struct Slots(Mutex<Counts>);

/// A slot taken; released when dropped.
pub(crate) struct SlotGuard {
    slots: Arc<Slots>,
    client: Option<IpAddr>,
    probe: bool,
}

/// What the accept loop does with a connection.
pub(crate) enum Slot {
    Ordinary(Arc<SlotGuard>),
    Probe(Arc<SlotGuard>),
    Refused(ConnRefusal),
}

impl Slots {
    /// Takes a slot for a connection from `peer` (`None`: a Unix socket, one client).
    pub(crate) fn take(self: &Arc<Self>, limits: &Limits, peer: Option<IpAddr>) -> Slot {
        let client = peer.map(client_key);
        let Ok(mut c) = self.0.lock() else {
            return Slot::Refused(ConnRefusal::TooManyConnections);
        };
        let (ordinary, probes) = c.clients.get(&client).copied().unwrap_or((0, 0));
        let ordinary_cap = limits.max_connections.saturating_sub(limits.probe_reserve);
        let guard = |probe| {
            Arc::new(SlotGuard {
                slots: self.clone(),
                client,
                probe,
            })
        };
        if c.ordinary < ordinary_cap && ordinary < limits.max_connections_per_client {
            c.ordinary += 1;
            c.clients.insert(client, (ordinary + 1, probes));
            return Slot::Ordinary(guard(false));
        }
        if c.probes < limits.probe_reserve && probes < PROBE_SLOTS_PER_CLIENT {
            c.probes += 1;
            c.clients.insert(client, (ordinary, probes + 1));
            return Slot::Probe(guard(true));
        }
        Slot::Refused(if ordinary >= limits.max_connections_per_client {
            ConnRefusal::TooManyClientConnections
        } else {
            ConnRefusal::TooManyConnections
        })
    }

    fn release(&self, client: Option<IpAddr>, probe: bool) {
        let Ok(mut c) = self.0.lock() else {
            return;
        };
        if probe {
            c.probes = c.probes.saturating_sub(1);
        } else {
            c.ordinary = c.ordinary.saturating_sub(1);
        }
        if let Some(e) = c.clients.get_mut(&client) {
            if probe {
                e.1 = e.1.saturating_sub(1);
            } else {
                e.0 = e.0.saturating_sub(1);
            }
            if *e == (0, 0) {
                c.clients.remove(&client);
            }
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.slots.release(self.client, self.probe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(max: usize, per_client: usize, reserve: usize) -> Limits {
        Limits {
            head_timeout: Duration::from_secs(1),
            body_timeout: Duration::from_secs(1),
            admit: Arc::new(|_| crate::limits::Admission::Read {
                max_body: 0,
                hold: None,
            }),
            max_request_line: 100,
            max_head_line: 100,
            max_head: 100,
            max_connections: max,
            max_connections_per_client: per_client,
            probe_reserve: reserve,
            probe_head_timeout: Duration::from_secs(1),
            is_probe: |_, _| true,
            on_refused: Arc::new(|_, _| {}),
            error_body: |_, _, _| String::new(),
            error_content_type: "text/plain",
            inline: None,
        }
    }

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn a_client_beyond_its_share_gets_probe_slots_then_refusals() {
        let slots = Arc::new(Slots::default());
        let l = limits(10, 3, 2);
        let a: Vec<Slot> = (0..3).map(|_| slots.take(&l, ip("10.0.0.1"))).collect();
        assert!(a.iter().all(|s| matches!(s, Slot::Ordinary(_))));
        let p: Vec<Slot> = (0..2).map(|_| slots.take(&l, ip("10.0.0.1"))).collect();
        assert!(p.iter().all(|s| matches!(s, Slot::Probe(_))));
        assert!(matches!(
            slots.take(&l, ip("10.0.0.1")),
            Slot::Refused(ConnRefusal::TooManyClientConnections)
        ));
        // Another client still has its share.
        assert!(matches!(slots.take(&l, ip("10.0.0.2")), Slot::Ordinary(_)));
        drop(a);
        assert!(matches!(slots.take(&l, ip("10.0.0.1")), Slot::Ordinary(_)));
    }

    #[test]
    fn the_reserve_stays_for_probes_when_every_other_slot_is_taken() {
        let slots = Arc::new(Slots::default());
        let l = limits(6, 6, 2);
        let held: Vec<Slot> = (1..=4)
            .map(|n| slots.take(&l, ip(&format!("10.0.0.{n}"))))
            .collect();
        assert!(held.iter().all(|s| matches!(s, Slot::Ordinary(_))));
        let probe = slots.take(&l, ip("10.0.0.9"));
        assert!(matches!(probe, Slot::Probe(_)));
        let second = slots.take(&l, ip("10.0.0.8"));
        assert!(matches!(second, Slot::Probe(_)));
        assert!(matches!(
            slots.take(&l, ip("10.0.0.7")),
            Slot::Refused(ConnRefusal::TooManyConnections)
        ));
        drop(probe);
        let third = slots.take(&l, ip("10.0.0.7"));
        assert!(matches!(third, Slot::Probe(_)));
        let counts = slots.0.lock().unwrap();
        assert_eq!((counts.ordinary, counts.probes), (4, 2));
    }

    #[test]
    fn released_clients_leave_no_entry() {
        let slots = Arc::new(Slots::default());
        let l = limits(4, 4, 1);
        let s = slots.take(&l, ip("10.0.0.1"));
        drop(s);
        assert!(slots.0.lock().unwrap().clients.is_empty());
    }
}
