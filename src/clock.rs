//! Time source. Every timing rule reads the clock through this trait so tests can use a
//! manual clock instead of sleeping.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of wall-clock and monotonic time.
pub trait Clock: Send + Sync {
    /// Wall-clock time as milliseconds since the Unix epoch (persisted deadlines use this).
    fn now_ms(&self) -> i64;
    /// Monotonic instant (in-process deadlines use this).
    fn instant(&self) -> Instant;
}

/// The real system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
    fn instant(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug)]
pub struct ManualClock {
    state: Mutex<(i64, Instant)>,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock {
            state: Mutex::new((start_ms, Instant::now())),
        }
    }
    pub fn advance(&self, by: Duration) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += by.as_millis() as i64;
        s.1 += by;
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0
    }
    fn instant(&self) -> Instant {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_ms(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{:.3}", ts),
        Err(_) => String::new(),
    }
}

/// Epoch milliseconds of an RFC 3339 time, as forges write them; 0 when absent or
/// unreadable (a missing time sorts first rather than failing the read).
pub fn epoch_ms_of(v: &serde_json::Value) -> i64 {
    v.as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map_or(0, |t| t.as_millisecond())
}

/// The current wall-clock time as RFC 3339 UTC with milliseconds (for log lines).
pub fn now_rfc3339() -> String {
    rfc3339_ms(SystemClock.now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_advances_both_axes() {
        let c = ManualClock::new(1_000);
        let i0 = c.instant();
        c.advance(Duration::from_millis(250));
        assert_eq!(c.now_ms(), 1_250);
        assert_eq!(c.instant() - i0, Duration::from_millis(250));
    }

    #[test]
    fn rfc3339_formats_utc_millis() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    }
}
