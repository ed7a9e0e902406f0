//! Thin helpers over the `prometheus` crate: create a family, register it, and pre-create the
//! series of its known label values; plus the scrape-time gauges.

use prometheus::{
    Counter, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    IntGauge, Opts, Registry, TextEncoder,
};

use crate::orchestrator::snapshot::Snapshot;

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
            log::error!("metric registration failed error=\"{e}\"");
        }
        m
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
                log::error!("metrics encoding failed error=\"{e}\"");
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
    // Registered so the family is known; this build has no SSH workers, so it has no series.
    _ssh_hosts: GaugeVec,
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
        info.with_label_values(&[env!("CARGO_PKG_VERSION"), RUST_VERSION])
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
            _ssh_hosts: reg.add(built(GaugeVec::new(
                Opts::new("sortie_ssh_host_usage", "Agent workers per SSH host."),
                &["host"],
            ))),
        }
    }

    pub fn set(&self, g: &GaugeValues) {
        let running = g.running as i64;
        self.running.set(running);
        self.retrying.set(g.retrying as i64);
        self.slots
            .set((i64::from(g.max_concurrent_agents) - running).max(0));
        self.elapsed.set(g.elapsed_seconds);
    }
}

/// What the scrape-time gauges are computed from: a few numbers taken from the snapshot, so
/// the gauges can be tested without building snapshot rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GaugeValues {
    pub running: usize,
    pub retrying: usize,
    pub max_concurrent_agents: u32,
    /// Σ (now − started_at) over running sessions.
    pub elapsed_seconds: f64,
}

impl GaugeValues {
    pub fn from_snapshot(snap: &Snapshot, now_ms: i64) -> GaugeValues {
        GaugeValues {
            running: snap.running.len(),
            retrying: snap.retrying.len(),
            max_concurrent_agents: snap.max_concurrent_agents,
            elapsed_seconds: elapsed_seconds(snap.running.iter().map(|r| r.started_at_ms), now_ms),
        }
    }
}

/// Σ (now − start) in seconds; a start in the future (clock step) counts as zero.
pub fn elapsed_seconds(starts_ms: impl Iterator<Item = i64>, now_ms: i64) -> f64 {
    let total_ms: i64 = starts_ms.map(|s| (now_ms - s).max(0)).sum();
    total_ms as f64 / 1000.0
}

/// The toolchain the crate declares (`rust-version`); a build script could report the exact
/// `rustc` instead.
const RUST_VERSION: &str = concat!("rust", env!("CARGO_PKG_RUST_VERSION"));
