//! Recorded cost per UTC day, or per UTC month over a long range.

use std::collections::BTreeMap;

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

use super::range::Range;
use super::report::{Bucket, Spend};
use super::rows::StatRun;
use super::tally::{Share, Tally};

/// Up to this many days, the report buckets by day; beyond it, by month.
const DAY_BUCKETS_UP_TO_DAYS: i64 = 92;
const DAY_MS: i64 = 86_400_000;

/// The runs' spend by UTC day and by UTC month; which one is served is decided at the end.
#[derive(Debug, Default)]
pub struct SpendTally {
    days: BTreeMap<Date, Tally>,
    months: BTreeMap<Date, Tally>,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
}

fn utc_date(ms: i64) -> Option<Date> {
    let t = Timestamp::from_millisecond(ms).ok()?;
    Some(t.to_zoned(TimeZone::UTC).date())
}

fn start_text(d: Date) -> String {
    d.to_zoned(TimeZone::UTC)
        .map(|z| z.timestamp().to_string())
        .unwrap_or_default()
}

impl SpendTally {
    pub fn add(&mut self, run: &StatRun) {
        let Some(day) = utc_date(run.completed_ms) else {
            return;
        };
        let share = Share::whole(run);
        self.days.entry(day).or_default().add(&share);
        self.months
            .entry(day.first_of_month())
            .or_default()
            .add(&share);
        self.first_ms = Some(
            self.first_ms
                .map_or(run.completed_ms, |f| f.min(run.completed_ms)),
        );
        self.last_ms = Some(
            self.last_ms
                .map_or(run.completed_ms, |l| l.max(run.completed_ms)),
        );
    }

    /// Days when the range (its bounds where given, else its first and last run) spans at
    /// most [`DAY_BUCKETS_UP_TO_DAYS`], months otherwise.
    pub fn finish(&self, range: &Range) -> Spend {
        let from = range.since_ms.or(self.first_ms);
        let to = range.until_ms.or(self.last_ms);
        let span = match (from, to) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        let (period, map) = if span <= DAY_BUCKETS_UP_TO_DAYS * DAY_MS {
            ("day", &self.days)
        } else {
            ("month", &self.months)
        };
        Spend {
            period: period.into(),
            buckets: map
                .iter()
                .map(|(d, t)| Bucket {
                    start: start_text(*d),
                    runs: t.runs,
                    cost_usd: t.cost_usd(),
                    tokens_unmeasured_runs: t.unmeasured,
                    cost_unpriced_runs: t.unpriced,
                    cost_partial_runs: t.partial,
                    cost_lower_bound: t.cost_lower_bound(),
                    agent_priced_usd: t.agent_priced_usd(),
                })
                .collect(),
        }
    }
}
