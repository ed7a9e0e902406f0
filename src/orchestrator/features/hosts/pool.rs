//! Which SSH host a dispatch runs on. Owned by the orchestrator thread; the session counts per
//! host come from the running entries, so nothing here can drift from what runs.
//!
//! - **Room**: a host has room while it runs fewer sessions than
//!   `worker.max_concurrent_agents_per_host` (no cap: always) and is in service.
//! - **Sticky**: an issue goes back to the host its workspace lives on (its last run's host)
//!   while that host has room; otherwise it takes the least loaded host with room (ties: the
//!   order written) and its workspace is prepared there.
//! - **Health**: [`FAILURES_BEFORE_OUT`] connection failures in a row take a host out of
//!   service for a backoff that doubles per outage ([`OUT_OF_SERVICE_MS`] up to
//!   [`OUT_OF_SERVICE_MAX_MS`]); a host out of service has no room. A run that reaches the
//!   host clears its count.

use std::collections::HashMap;

use crate::config::worker::WorkerConfig;
use crate::ssh::SshHost;

pub const FAILURES_BEFORE_OUT: u32 = 3;
pub const OUT_OF_SERVICE_MS: i64 = 60_000;
pub const OUT_OF_SERVICE_MAX_MS: i64 = 15 * 60_000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Health {
    failures_in_a_row: u32,
    outages: u32,
    out_until_ms: Option<i64>,
}

#[derive(Debug, Default)]
pub struct HostPool {
    health: HashMap<String, Health>,
    /// Issue id → the host its workspace was last prepared on.
    sticky: HashMap<String, String>,
}

/// Sessions running per host name.
pub type HostUsage = HashMap<String, u32>;

impl HostPool {
    fn in_service(&self, host: &str, now_ms: i64) -> bool {
        self.health
            .get(host)
            .and_then(|h| h.out_until_ms)
            .is_none_or(|until| now_ms >= until)
    }

    fn has_room(&self, w: &WorkerConfig, usage: &HostUsage, host: &str, now_ms: i64) -> bool {
        let used = usage.get(host).copied().unwrap_or(0);
        self.in_service(host, now_ms) && w.max_per_host.is_none_or(|cap| used < cap)
    }

    /// How many more sessions the hosts take now; `None` when no host is configured (every
    /// session runs here) and `usize::MAX` when an in-service host has no cap.
    pub fn room(&self, w: &WorkerConfig, usage: &HostUsage, now_ms: i64) -> Option<usize> {
        if !w.remote() {
            return None;
        }
        let mut room = 0usize;
        for h in w.hosts.iter().filter(|h| self.in_service(h.name(), now_ms)) {
            let used = usage.get(h.name()).copied().unwrap_or(0);
            match w.max_per_host {
                None => return Some(usize::MAX),
                Some(cap) => room += cap.saturating_sub(used) as usize,
            }
        }
        Some(room)
    }

    /// The host for the issue's next session (see the module docs); `None` when no host has
    /// room. `last_host` is the host of the issue's newest run, read when this pool has not
    /// placed the issue since it started.
    pub fn pick<'a>(
        &self,
        w: &'a WorkerConfig,
        usage: &HostUsage,
        issue_id: &str,
        last_host: impl FnOnce() -> Option<String>,
        now_ms: i64,
    ) -> Option<&'a SshHost> {
        let sticky = self.sticky.get(issue_id).cloned().or_else(last_host);
        if let Some(h) = sticky.as_deref().and_then(|n| w.host(n))
            && self.has_room(w, usage, h.name(), now_ms)
        {
            return Some(h);
        }
        w.hosts
            .iter()
            .filter(|h| self.has_room(w, usage, h.name(), now_ms))
            .min_by_key(|h| usage.get(h.name()).copied().unwrap_or(0))
    }

    pub fn stick(&mut self, issue_id: &str, host: &str) {
        self.sticky.insert(issue_id.to_string(), host.to_string());
    }

    /// The host the issue's workspace lives on, as this pool placed it.
    pub fn sticky_host(&self, issue_id: &str) -> Option<&str> {
        self.sticky.get(issue_id).map(String::as_str)
    }

    /// The issue's workspace is gone: its next session may go anywhere.
    pub fn unstick(&mut self, issue_id: &str) {
        self.sticky.remove(issue_id);
    }

    /// A session reached the host.
    pub fn record_reached(&mut self, host: &str) {
        if let Some(h) = self.health.get_mut(host) {
            h.failures_in_a_row = 0;
        }
    }

    /// The host could not be reached. Returns the end of the outage when this failure takes
    /// the host out of service.
    pub fn record_unreachable(&mut self, host: &str, now_ms: i64) -> Option<i64> {
        let h = self.health.entry(host.to_string()).or_default();
        h.failures_in_a_row += 1;
        if h.failures_in_a_row < FAILURES_BEFORE_OUT {
            return None;
        }
        h.failures_in_a_row = 0;
        h.outages += 1;
        let factor = 1i64 << (h.outages - 1).min(10);
        let until = now_ms + (OUT_OF_SERVICE_MS * factor).min(OUT_OF_SERVICE_MAX_MS);
        h.out_until_ms = Some(until);
        Some(until)
    }

    /// Hosts out of service now → until when (the API's health view).
    pub fn out_of_service(&self, now_ms: i64) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = self
            .health
            .iter()
            .filter_map(|(n, h)| {
                h.out_until_ms
                    .filter(|u| *u > now_ms)
                    .map(|u| (n.clone(), u))
            })
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh::{SshOptions, SshTarget};
    use std::sync::Arc;

    fn worker(names: &[&str], cap: Option<u32>) -> WorkerConfig {
        let options = Arc::new(SshOptions::default());
        WorkerConfig {
            hosts: names
                .iter()
                .map(|n| SshHost {
                    target: SshTarget::parse(n).unwrap(),
                    options: options.clone(),
                })
                .collect(),
            max_per_host: cap,
            options,
            ..WorkerConfig::default()
        }
    }

    fn usage(pairs: &[(&str, u32)]) -> HostUsage {
        pairs.iter().map(|(n, u)| (n.to_string(), *u)).collect()
    }

    fn name(h: Option<&SshHost>) -> Option<&str> {
        h.map(SshHost::name)
    }

    #[test]
    fn no_hosts_means_no_room_count_and_no_pick() {
        let w = worker(&[], Some(2));
        let pool = HostPool::default();
        assert_eq!(pool.room(&w, &usage(&[]), 0), None);
        assert_eq!(name(pool.pick(&w, &usage(&[]), "1", || None, 0)), None);
    }

    #[test]
    fn least_loaded_host_with_room_in_written_order() {
        let w = worker(&["a", "b", "c"], Some(2));
        let pool = HostPool::default();
        let u = usage(&[("a", 1), ("b", 0), ("c", 0)]);
        assert_eq!(name(pool.pick(&w, &u, "1", || None, 0)), Some("b"));
        assert_eq!(pool.room(&w, &u, 0), Some(5));
        let full = usage(&[("a", 2), ("b", 2), ("c", 2)]);
        assert_eq!(name(pool.pick(&w, &full, "1", || None, 0)), None);
        assert_eq!(pool.room(&w, &full, 0), Some(0));
        assert_eq!(worker(&["a"], None).max_per_host, None);
        assert_eq!(pool.room(&worker(&["a"], None), &full, 0), Some(usize::MAX));
    }

    #[test]
    fn an_issue_returns_to_its_workspace_host_while_it_has_room() {
        let w = worker(&["a", "b"], Some(2));
        let mut pool = HostPool::default();
        let u = usage(&[("a", 0), ("b", 1)]);
        assert_eq!(
            name(pool.pick(&w, &u, "1", || Some("b".into()), 0)),
            Some("b")
        );
        pool.stick("1", "b");
        assert_eq!(
            name(pool.pick(&w, &u, "1", || panic!("not read"), 0)),
            Some("b")
        );
        let b_full = usage(&[("a", 0), ("b", 2)]);
        assert_eq!(name(pool.pick(&w, &b_full, "1", || None, 0)), Some("a"));
        pool.unstick("1");
        assert_eq!(name(pool.pick(&w, &u, "1", || None, 0)), Some("a"));
        // A host no longer configured is not sticky.
        assert_eq!(
            name(pool.pick(&w, &u, "2", || Some("gone".into()), 0)),
            Some("a")
        );
    }

    #[test]
    fn repeated_connection_failures_take_a_host_out_for_a_growing_backoff() {
        let w = worker(&["a", "b"], Some(1));
        let mut pool = HostPool::default();
        let u = usage(&[]);
        assert_eq!(pool.record_unreachable("a", 0), None);
        pool.record_reached("a");
        assert_eq!(pool.record_unreachable("a", 0), None);
        assert_eq!(pool.record_unreachable("a", 0), None);
        assert_eq!(pool.record_unreachable("a", 1_000), Some(61_000));
        assert_eq!(pool.room(&w, &u, 1_000), Some(1));
        assert_eq!(
            name(pool.pick(&w, &u, "1", || Some("a".into()), 1_000)),
            Some("b")
        );
        assert_eq!(pool.out_of_service(1_000), vec![("a".to_string(), 61_000)]);
        assert_eq!(
            name(pool.pick(&w, &usage(&[("b", 1)]), "1", || None, 61_000)),
            Some("a")
        );
        for _ in 0..2 {
            pool.record_unreachable("a", 61_000);
        }
        assert_eq!(pool.record_unreachable("a", 61_000), Some(61_000 + 120_000));
    }
}
