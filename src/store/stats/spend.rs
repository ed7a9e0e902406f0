//! Recorded cost, tokens and outcomes per UTC day, or per UTC month over a long range, or per
//! UTC hour when the caller asks for hours over a bounded range.

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
const HOUR_MS: i64 = 3_600_000;
/// The longest range hours are served over (31 days: at most 744 buckets).
pub const HOUR_BUCKETS_UP_TO_DAYS: i64 = 31;

/// The bucket size a caller asks for; without one, days up to 92 days and months beyond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Hour,
    Day,
    Month,
}

impl Period {
    pub fn parse(v: &str) -> Option<Period> {
        match v {
            "hour" => Some(Period::Hour),
            "day" => Some(Period::Day),
            "month" => Some(Period::Month),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Month => "month",
        }
    }

    /// Whether `range` is narrow enough for this period: hours need a `since` at most
    /// [`HOUR_BUCKETS_UP_TO_DAYS`] before `until` (or `now_ms` when open), so a report never
    /// carries more than 744 hour buckets. Checked before anything is read.
    pub fn fits(self, range: &super::range::Range, now_ms: i64) -> bool {
        match (self, range.since_ms) {
            (Period::Hour, None) => false,
            (Period::Hour, Some(since)) => {
                range.until_ms.unwrap_or(now_ms).saturating_sub(since)
                    <= HOUR_BUCKETS_UP_TO_DAYS * DAY_MS
            }
            _ => true,
        }
    }
}

/// The runs' spend by UTC hour, day and month; which one is served is decided at the end.
#[derive(Debug, Default)]
pub struct SpendTally {
    hours: BTreeMap<i64, Tally>,
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
        let hour = run.completed_ms.div_euclid(HOUR_MS) * HOUR_MS;
        self.hours.entry(hour).or_default().add(&share);
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

    /// The `period` asked for, else days when the range (its bounds where given, else its
    /// first and last run) spans at most [`DAY_BUCKETS_UP_TO_DAYS`], months otherwise.
    pub fn finish(&self, range: &Range, period: Option<Period>) -> Spend {
        let from = range.since_ms.or(self.first_ms);
        let to = range.until_ms.or(self.last_ms);
        let span = match (from, to) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        let period = period.unwrap_or(if span <= DAY_BUCKETS_UP_TO_DAYS * DAY_MS {
            Period::Day
        } else {
            Period::Month
        });
        let buckets = match period {
            Period::Hour => self
                .hours
                .iter()
                .map(|(ms, t)| bucket(instant_text(*ms), t))
                .collect(),
            Period::Day => buckets(&self.days),
            Period::Month => buckets(&self.months),
        };
        Spend {
            period: period.as_str().into(),
            buckets,
        }
    }
}

fn instant_text(ms: i64) -> String {
    super::instant_text(ms).unwrap_or_default()
}

fn buckets(map: &BTreeMap<Date, Tally>) -> Vec<Bucket> {
    map.iter().map(|(d, t)| bucket(start_text(*d), t)).collect()
}

fn bucket(start: String, t: &Tally) -> Bucket {
    Bucket {
        start,
        runs: t.runs,
        succeeded: t.succeeded,
        failed: t.failed,
        stopped: t.stopped,
        cancelled: t.cancelled,
        tokens: t.tokens(),
        cost_usd: t.cost_usd(),
        tokens_unmeasured_runs: t.unmeasured,
        cost_unpriced_runs: t.unpriced,
        cost_partial_runs: t.partial,
        cost_lower_bound: t.cost_lower_bound(),
        agent_priced_usd: t.agent_priced_usd(),
    }
}
