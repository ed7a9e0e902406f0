//! The calendar of the spend windows: the current UTC calendar day, the UTC week that starts
//! on Monday at 00:00, and the UTC calendar month, each as `[start, end)` in epoch ms. The
//! calendar arithmetic is jiff's, so month lengths and leap years are never hand-written.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::domain::SpendWindow;

/// The window's bounds around `now_ms`: its start, and its end (the `resets_at`, the next
/// window's start). `None` only for an instant outside jiff's range.
pub fn bounds(window: SpendWindow, now_ms: i64) -> Option<(i64, i64)> {
    let today = Timestamp::from_millisecond(now_ms)
        .ok()?
        .to_zoned(TimeZone::UTC)
        .date();
    let (start, end) = match window {
        SpendWindow::Daily => (today, today.checked_add(1.day()).ok()?),
        SpendWindow::Weekly => {
            let back = i64::from(today.weekday().to_monday_zero_offset());
            let monday = today.checked_sub(back.days()).ok()?;
            (monday, monday.checked_add(1.week()).ok()?)
        }
        SpendWindow::Monthly => {
            let first = today.first_of_month();
            (first, first.checked_add(1.month()).ok()?)
        }
    };
    Some((midnight_ms(start)?, midnight_ms(end)?))
}

/// 00:00 UTC of `date`, in epoch ms.
fn midnight_ms(date: Date) -> Option<i64> {
    date.to_zoned(TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn text(ms: i64) -> String {
        Timestamp::from_millisecond(ms).unwrap().to_string()
    }

    fn at(window: SpendWindow, now: &str) -> (String, String) {
        let (s, e) = bounds(window, ms(now)).unwrap();
        (text(s), text(e))
    }

    #[test]
    fn a_day_runs_from_midnight_to_midnight_utc() {
        assert_eq!(
            at(SpendWindow::Daily, "2026-03-26T14:30:00Z"),
            ("2026-03-26T00:00:00Z".into(), "2026-03-27T00:00:00Z".into())
        );
        // The first instant of a day belongs to it; the last millisecond to the day before.
        assert_eq!(
            at(SpendWindow::Daily, "2026-03-27T00:00:00Z").0,
            "2026-03-27T00:00:00Z"
        );
        assert_eq!(
            at(SpendWindow::Daily, "2026-03-26T23:59:59.999Z").1,
            "2026-03-27T00:00:00Z"
        );
    }

    #[test]
    fn days_cross_month_and_year_ends() {
        assert_eq!(
            at(SpendWindow::Daily, "2026-12-31T23:00:00Z"),
            ("2026-12-31T00:00:00Z".into(), "2027-01-01T00:00:00Z".into())
        );
        assert_eq!(
            at(SpendWindow::Daily, "2028-02-28T12:00:00Z").1,
            "2028-02-29T00:00:00Z"
        );
        assert_eq!(
            at(SpendWindow::Daily, "2027-02-28T12:00:00Z").1,
            "2027-03-01T00:00:00Z"
        );
    }

    #[test]
    fn a_week_starts_on_monday() {
        // Thursday 2026-03-26: the week of Monday 2026-03-23 (the seed's example resets
        // 2026-03-30).
        assert_eq!(
            at(SpendWindow::Weekly, "2026-03-26T14:30:00Z"),
            ("2026-03-23T00:00:00Z".into(), "2026-03-30T00:00:00Z".into())
        );
        // A Monday is its own week's first day; a Sunday its last.
        assert_eq!(
            at(SpendWindow::Weekly, "2026-03-30T00:00:00Z").0,
            "2026-03-30T00:00:00Z"
        );
        assert_eq!(
            at(SpendWindow::Weekly, "2026-03-29T23:59:59Z").0,
            "2026-03-23T00:00:00Z"
        );
    }

    #[test]
    fn weeks_span_month_and_year_ends() {
        // Thursday 2026-12-31: from Monday 2026-12-28 to Monday 2027-01-04.
        assert_eq!(
            at(SpendWindow::Weekly, "2026-12-31T08:00:00Z"),
            ("2026-12-28T00:00:00Z".into(), "2027-01-04T00:00:00Z".into())
        );
        // Friday 2027-01-01 is in the same week.
        assert_eq!(
            at(SpendWindow::Weekly, "2027-01-01T08:00:00Z").0,
            "2026-12-28T00:00:00Z"
        );
    }

    #[test]
    fn a_month_runs_from_the_first_to_the_first() {
        assert_eq!(
            at(SpendWindow::Monthly, "2026-03-26T14:30:00Z"),
            ("2026-03-01T00:00:00Z".into(), "2026-04-01T00:00:00Z".into())
        );
        assert_eq!(
            at(SpendWindow::Monthly, "2026-12-31T23:59:59Z"),
            ("2026-12-01T00:00:00Z".into(), "2027-01-01T00:00:00Z".into())
        );
        assert_eq!(
            at(SpendWindow::Monthly, "2028-02-29T10:00:00Z"),
            ("2028-02-01T00:00:00Z".into(), "2028-03-01T00:00:00Z".into())
        );
        assert_eq!(
            at(SpendWindow::Monthly, "2027-01-31T10:00:00Z").1,
            "2027-02-01T00:00:00Z"
        );
    }
}
