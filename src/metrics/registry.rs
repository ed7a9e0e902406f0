//! Thin helpers over the `prometheus` crate: create a family, register it, and pre-create the
//! series of its known label values; plus the scrape-time gauges.

use prometheus::{
    Counter, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, Opts, Registry, TextEncoder,
};

/// Family names and label names are compile-time constants validated by the unit tests, so a
/// construction error is a programming error, never an input error.
fn built<T>(r: prometheus::Result<T>) -> T {
    r.expect("metric names and labels are constants covered by tests")
}

#[derive(Default)]
pub struct Reg(Registry);

impl Reg {
    fn add<M: prometheus::core::Collector + Clone + 'static>(&self, m: M) -> M {
        if let Err(e) = self.0.register(Box::new(m.clone())) {
            log::error!(error:% = e; "metric registration failed");
        }
        m
    }

    /// Registers a collector built elsewhere (one that must exist before this registry).
    pub fn take<M: prometheus::core::Collector + Clone + 'static>(&self, m: M) {
        self.add(m);
    }

    pub fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(built(IntCounter::new(name, help)))
    }

    pub fn float_counter(&self, name: &str, help: &str) -> Counter {
        self.add(built(Counter::new(name, help)))
    }

    pub fn counter_vec(
        &self,
        name: &str,
        help: &str,
        label: &str,
        known: &[&str],
    ) -> IntCounterVec {
        let v = self.add(built(IntCounterVec::new(Opts::new(name, help), &[label])));
        for k in known {
            v.with_label_values(&[k]);
        }
        v
    }

    pub fn counter_vec2(
        &self,
        name: &str,
        help: &str,
        a: (&str, &[&str]),
        b: (&str, &[&str]),
    ) -> IntCounterVec {
        let v = self.add(built(IntCounterVec::new(
            Opts::new(name, help),
            &[a.0, b.0],
        )));
        for x in a.1 {
            for y in b.1 {
                v.with_label_values(&[x, y]);
            }
        }
        v
    }

    pub fn int_gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(built(IntGauge::new(name, help)))
    }

    /// A gauge family with one label whose series the caller sets and removes.
    pub fn gauge_vec(&self, name: &str, help: &str, label: &str) -> GaugeVec {
        self.add(built(GaugeVec::new(Opts::new(name, help), &[label])))
    }

    pub fn histogram(&self, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
        self.add(built(Histogram::with_opts(
            HistogramOpts::new(name, help).buckets(buckets),
        )))
    }

    pub fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        label: &str,
        buckets: Vec<f64>,
    ) -> HistogramVec {
        self.add(built(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets),
            &[label],
        )))
    }

    /// Text format 0.0.4.
    pub fn encode(&self) -> String {
        match TextEncoder::new().encode_to_string(&self.0.gather()) {
            Ok(s) => s,
            Err(e) => {
                log::error!(error:% = e; "metrics encoding failed");
                String::new()
            }
        }
    }
}

/// Gauges set from the published snapshot on every scrape, so they reflect the latest change
/// without the orchestrator touching them.
pub struct Gauges {
    running: IntGauge,
    retrying: IntGauge,
    slots: IntGauge,
    elapsed: Gauge,
    ssh_hosts: GaugeVec,
    /// Hosts given a series so far: one that left the configuration reads 0 once its last
    /// session ended, rather than keeping its last count.
    ssh_seen: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Gauges {
    pub fn register(reg: &Reg) -> Gauges {
        let info = reg.add(built(GaugeVec::new(
            Opts::new(
                "sortie_build_info",
                "Build information; the go_version label carries the Rust toolchain.",
            ),
            &["version", "go_version"],
        )));
        info.with_label_values(&[crate::build_info::VERSION, crate::build_info::RUST_VERSION])
            .set(1.0);
        Gauges {
            running: reg.add(built(IntGauge::new(
                "sortie_sessions_running",
                "Agent sessions running now.",
            ))),
            retrying: reg.add(built(IntGauge::new(
                "sortie_sessions_retrying",
                "Issues waiting in the retry queue.",
            ))),
            slots: reg.add(built(IntGauge::new(
                "sortie_slots_available",
                "Free agent slots: max_concurrent_agents minus running sessions (never below 0).",
            ))),
            elapsed: reg.add(built(Gauge::new(
                "sortie_active_sessions_elapsed_seconds",
                "Sum over running sessions of seconds since each started.",
            ))),
            ssh_hosts: reg.add(built(GaugeVec::new(
                Opts::new("sortie_ssh_host_usage", "Agent workers per SSH host."),
                &["host"],
            ))),
            ssh_seen: Default::default(),
        }
    }

    pub fn set(&self, g: &GaugeValues) {
        let running = g.running as i64;
        self.running.set(running);
        self.retrying.set(g.retrying as i64);
        self.slots
            .set((i64::from(g.max_concurrent_agents) - running).max(0));
        self.elapsed.set(g.elapsed_seconds);
        let mut seen = self.ssh_seen.lock().unwrap_or_else(|p| p.into_inner());
        for host in seen.iter() {
            if !g.ssh_host_usage.iter().any(|(h, _)| h == host) {
                self.ssh_hosts.with_label_values(&[host.as_str()]).set(0.0);
            }
        }
        for (host, n) in &g.ssh_host_usage {
            self.ssh_hosts
                .with_label_values(&[host.as_str()])
                .set(f64::from(*n));
            seen.insert(host.clone());
        }
    }
}

/// What the scrape-time gauges are computed from: a few numbers the orchestrator's snapshot
/// provides (`Snapshot::gauge_values`), so this layer never reads orchestrator types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GaugeValues {
    pub running: usize,
    pub retrying: usize,
    pub max_concurrent_agents: u32,
    /// Σ (now − started_at) over running sessions.
    pub elapsed_seconds: f64,
    /// Sessions per SSH host: every configured host, and any other host a session still runs
    /// on.
    pub ssh_host_usage: Vec<(String, u32)>,
}

/// Σ (now − start) in seconds; a start in the future (clock step) counts as zero.
pub fn elapsed_seconds(starts_ms: impl Iterator<Item = i64>, now_ms: i64) -> f64 {
    let total_ms: i64 = starts_ms.map(|s| (now_ms - s).max(0)).sum();
    total_ms as f64 / 1000.0
}
