//! The completion-time range of a stats report: each bound an RFC 3339 timestamp with an
//! offset, a calendar date (midnight UTC) or a positive Go duration counted back from the
//! instant of the request. The route and `sortie stats` parse bounds here and word the
//! errors their own way, so both accept exactly the same values.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Why a bound or a pair of bounds was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeError {
    /// The named bound (`"since"` or `"until"`) is not a range bound.
    Malformed(&'static str),
    /// Both bounds given and `since` is not before `until`.
    Misordered,
}

/// Resolved bounds in epoch milliseconds; `None` is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Range {
    /// Runs completed at or after it.
    pub since_ms: Option<i64>,
    /// Runs completed before it.
    pub until_ms: Option<i64>,
}

impl Range {
    /// Resolves both bounds against `now_ms` (an empty or absent value is an open bound),
    /// checking each before the pair.
    pub fn resolve(
        since: Option<&str>,
        until: Option<&str>,
        now_ms: i64,
    ) -> Result<Range, RangeError> {
        let since_ms = bound(since, now_ms).map_err(|()| RangeError::Malformed("since"))?;
        let until_ms = bound(until, now_ms).map_err(|()| RangeError::Malformed("until"))?;
        if let (Some(a), Some(b)) = (since_ms, until_ms)
            && a >= b
        {
            return Err(RangeError::Misordered);
        }
        Ok(Range { since_ms, until_ms })
    }
}

fn bound(value: Option<&str>, now_ms: i64) -> Result<Option<i64>, ()> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse_bound(v, now_ms).map(Some).ok_or(()),
    }
}

/// One bound as epoch milliseconds, `None` when it is not a range bound.
pub fn parse_bound(value: &str, now_ms: i64) -> Option<i64> {
    if let Some(ms) = calendar_date(value) {
        return Some(ms);
    }
    if let Ok(t) = value.parse::<Timestamp>() {
        return Some(t.as_millisecond());
    }
    let back = go_duration(value)?;
    let now = Timestamp::from_millisecond(now_ms).ok()?;
    now.checked_sub(back).ok().map(|t| t.as_millisecond())
}

/// `YYYY-MM-DD` exactly, as midnight UTC.
fn calendar_date(value: &str) -> Option<i64> {
    let b = value.as_bytes();
    let shape = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shape {
        return None;
    }
    let date: Date = value.parse().ok()?;
    let zoned = date.to_zoned(TimeZone::UTC).ok()?;
    Some(zoned.timestamp().as_millisecond())
}

/// A positive duration in Go's `time.ParseDuration` syntax: one or more decimal numbers,
/// each with a unit of `ns`, `us` (`µs`), `ms`, `s`, `m` or `h`, with an optional leading
/// `+`. Days are not a unit, and zero or negative durations are refused.
pub fn go_duration(value: &str) -> Option<SignedDuration> {
    let mut rest = value.strip_prefix('+').unwrap_or(value);
    if rest.is_empty() {
        return None;
    }
    let mut nanos: i128 = 0;
    while !rest.is_empty() {
        let (amount, after) = decimal(rest)?;
        let (unit_nanos, after) = unit(after)?;
        nanos = nanos.checked_add(amount.scaled(unit_nanos)?)?;
        rest = after;
    }
    let nanos = i64::try_from(nanos).ok().filter(|n| *n > 0)?;
    Some(SignedDuration::from_nanos(nanos))
}

/// A decimal number: its digits as an integer and how many of them follow the point.
struct Decimal {
    digits: i128,
    fraction_digits: u32,
}

impl Decimal {
    /// The number times `unit_nanos`, truncated to whole nanoseconds (as Go does).
    fn scaled(&self, unit_nanos: i128) -> Option<i128> {
        let whole = self.digits.checked_mul(unit_nanos)?;
        Some(whole / 10i128.checked_pow(self.fraction_digits)?)
    }
}

fn decimal(s: &str) -> Option<(Decimal, &str)> {
    let mut digits: i128 = 0;
    let mut fraction_digits = 0u32;
    let mut seen_digit = false;
    let mut seen_point = false;
    let mut end = 0;
    for (i, c) in s.char_indices() {
        match c {
            '0'..='9' => {
                digits = digits
                    .checked_mul(10)?
                    .checked_add(i128::from(c as u8 - b'0'))?;
                if seen_point {
                    fraction_digits += 1;
                }
                seen_digit = true;
            }
            '.' if !seen_point => seen_point = true,
            _ => break,
        }
        end = i + c.len_utf8();
    }
    seen_digit.then_some((
        Decimal {
            digits,
            fraction_digits,
        },
        &s[end..],
    ))
}

fn unit(s: &str) -> Option<(i128, &str)> {
    const UNITS: &[(&str, i128)] = &[
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000),
        ("μs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    let name_len = s
        .char_indices()
        .find(|(_, c)| c.is_ascii_digit() || *c == '.')
        .map_or(s.len(), |(i, _)| i);
    let (name, rest) = s.split_at(name_len);
    UNITS
        .iter()
        .find(|(u, _)| *u == name)
        .map(|(_, n)| (*n, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_785_000_000_000;

    fn ms(v: &str) -> Option<i64> {
        parse_bound(v, NOW)
    }

    #[test]
    fn timestamps_need_an_offset() {
        assert_eq!(ms("2026-07-01T00:00:00Z"), Some(1_782_864_000_000));
        assert_eq!(ms("2026-07-01T02:00:00+02:00"), Some(1_782_864_000_000));
        assert_eq!(ms("2026-07-01T00:00:00"), None);
    }

    #[test]
    fn a_date_is_midnight_utc() {
        assert_eq!(ms("2026-07-01"), Some(1_782_864_000_000));
        assert_eq!(ms("2026-7-1"), None);
        assert_eq!(ms("2026-02-30"), None);
    }

    #[test]
    fn go_durations_count_back_from_now() {
        assert_eq!(ms("24h"), Some(NOW - 86_400_000));
        assert_eq!(ms("90m"), Some(NOW - 5_400_000));
        assert_eq!(ms("1h30m"), Some(NOW - 5_400_000));
        assert_eq!(ms("1.5h"), Some(NOW - 5_400_000));
        assert_eq!(ms("+2s500ms"), Some(NOW - 2_500));
        // A fraction of a millisecond back lands in the millisecond before.
        assert_eq!(ms("1500us"), Some(NOW - 2));
    }

    #[test]
    fn days_zero_negative_and_text_are_malformed() {
        for v in [
            "7d",
            "0",
            "0s",
            "-24h",
            "24",
            "h",
            "1h-30m",
            "yesterday",
            ".h",
            "1..5h",
            "+",
        ] {
            assert_eq!(ms(v), None, "{v}");
        }
    }

    #[test]
    fn the_pair_must_be_ordered() {
        let r = Range::resolve(Some("2026-07-02"), Some("2026-07-01"), NOW);
        assert_eq!(r, Err(RangeError::Misordered));
        let r = Range::resolve(Some("2026-07-01"), Some("2026-07-01"), NOW);
        assert_eq!(r, Err(RangeError::Misordered));
        let r = Range::resolve(Some("7d"), Some("2026-07-01"), NOW);
        assert_eq!(r, Err(RangeError::Malformed("since")));
        let r = Range::resolve(Some(""), Some("x"), NOW);
        assert_eq!(r, Err(RangeError::Malformed("until")));
        let r = Range::resolve(None, Some(""), NOW);
        assert_eq!(r, Ok(Range::default()));
    }
}
