//! How long the database writer thread spends on each command it takes from its queue (a
//! group of queued writes committed together counts once), for
//! `sortie_store_command_duration_seconds`. Process-wide, since a daemon has one writer and
//! the writer starts before the metrics registry exists; the registry takes this histogram in.

use prometheus::{Histogram, HistogramOpts};
use std::sync::OnceLock;
use std::time::Duration;

/// The family's name.
pub const NAME: &str = "sortie_store_command_duration_seconds";
const HELP: &str = "Time the database writer spent on one queued command (a group of writes committed together counts once), in seconds.";

/// 0.0005·2^k, k = 0..13 (0.5 ms … 4.1 s).
pub fn buckets() -> Vec<f64> {
    (0..14).map(|k| 0.0005 * f64::from(1u32 << k)).collect()
}

static HISTOGRAM: OnceLock<Option<Histogram>> = OnceLock::new();

/// The histogram (`None` only if the constant name or buckets were refused).
pub fn histogram() -> Option<&'static Histogram> {
    HISTOGRAM
        .get_or_init(|| {
            Histogram::with_opts(HistogramOpts::new(NAME, HELP).buckets(buckets()))
                .inspect_err(|e| log::error!(error:% = e; "store command histogram not built"))
                .ok()
        })
        .as_ref()
}

/// One command took `took`.
pub(crate) fn observe(took: Duration) {
    if let Some(h) = histogram() {
        h.observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn observations_reach_the_histogram() {
        let before = super::histogram()
            .map(|h| h.get_sample_count())
            .unwrap_or(0);
        super::observe(std::time::Duration::from_millis(3));
        let after = super::histogram()
            .map(|h| h.get_sample_count())
            .unwrap_or(0);
        assert!(after > before);
        let b = super::buckets();
        assert_eq!(b.len(), 14);
        assert!((b[0] - 0.0005).abs() < 1e-12 && (b[13] - 4.096).abs() < 1e-9);
    }
}
