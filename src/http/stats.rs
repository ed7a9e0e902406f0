//! `GET /api/v1/stats`: the run statistics report of [`crate::store::stats`] over a
//! completion-time range, the same body `sortie stats --format json` prints (`period`, an
//! addition of the route for the dashboard's charts, picks the spend buckets). Every parameter
//! is checked before anything is read; each request opens its own read-only connection to
//! the database file, never the orchestrator's. The body is served unmasked by design: it
//! holds no titles, errors or agent output, only paths and rule, template and model names.

use tiny_http::Request;

use crate::store::stats::{self, HOUR_BUCKETS_UP_TO_DAYS, Period, Range, RangeError, StatsRequest};

use super::AppState;
use super::query::{self, Refusals};
use super::respond::{ApiError, send_error, send_text};

/// The parameters the route accepts (the OpenAPI document lists the same).
pub const STATS_PARAMS: &[&str] = &["since", "until", "period"];

/// The route's wording of an unknown and a repeated parameter.
const REFUSALS: Refusals = Refusals {
    unknown: |k, _| format!("parameter \"{k}\" is not a parameter of this route"),
    repeated: |k| format!("parameter \"{k}\" is given more than once"),
};

/// The 400 for a range that does not parse or is misordered.
fn range_error(e: RangeError) -> ApiError {
    ApiError::invalid_parameter(match e {
        RangeError::Malformed(name) => format!(
            "parameter \"{name}\" must be an RFC 3339 timestamp, a date such as 2026-07-01, or a positive duration such as 24h"
        ),
        RangeError::Misordered => "parameter \"since\" must be before until".to_string(),
    })
}

/// The resolved range of the request's query; `now_ms` anchors duration bounds.
pub fn parse_range(url: &str, now_ms: i64) -> Result<Range, ApiError> {
    parse(url, now_ms).map(|(range, _)| range)
}

/// The range and the spend period of the request's query, every parameter checked.
fn parse(url: &str, now_ms: i64) -> Result<(Range, Option<Period>), ApiError> {
    let q = query::strict_worded(url, STATS_PARAMS, &REFUSALS)?;
    let range = Range::resolve(
        q.get("since").map(String::as_str),
        q.get("until").map(String::as_str),
        now_ms,
    )
    .map_err(range_error)?;
    let period = match q
        .get("period")
        .map(String::as_str)
        .filter(|v| !v.is_empty())
    {
        None => None,
        Some(v) => Some(Period::parse(v).ok_or_else(|| {
            ApiError::invalid_parameter(
                "parameter \"period\" must be hour, day or month".to_string(),
            )
        })?),
    };
    if let Some(p) = period.filter(|p| !p.fits(&range, now_ms)) {
        return Err(ApiError::invalid_parameter(format!(
            "parameter \"period\" {} needs a since at most {HOUR_BUCKETS_UP_TO_DAYS} days before until",
            p.as_str()
        )));
    }
    Ok((range, period))
}

fn report_text(state: &AppState, url: &str) -> Result<String, ApiError> {
    let now_ms = state.clock.now_ms();
    let (range, period) = parse(url, now_ms)?;
    let snap = state.orch.snapshot();
    // The funnels follow the dispatch rules in force now, so they follow a reload.
    let chains = snap.config.dispatch.chains();
    let report = stats::build_by(
        &StatsRequest {
            db_path: state.store.path(),
            workflow_path: &snap.workflow_path,
            now_ms,
            range,
            chains: &chains,
        },
        period,
    )
    .map_err(|e| {
        log::warn!(error:% = e.to_string(); "run statistics not read");
        ApiError::history_unavailable(e)
    })?;
    serde_json::to_string(&report)
        .map_err(|e| ApiError::new(500, "internal_error", format!("report not serialized: {e}")))
}

/// Answers the request (200 with the report, or the error envelope).
pub fn serve(state: &AppState, req: Request, url: &str) {
    match report_text(state, url) {
        Ok(text) => send_text(req, 200, text, None),
        Err(e) => send_error(req, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_785_000_000_000;

    fn message(url: &str) -> String {
        parse_range(url, NOW)
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    }

    #[test]
    fn refusals_use_the_routes_wording() {
        assert_eq!(
            message("/api/v1/stats?since=7d"),
            "parameter \"since\" must be an RFC 3339 timestamp, a date such as 2026-07-01, or a positive duration such as 24h"
        );
        assert_eq!(
            message("/api/v1/stats?limit=5"),
            "parameter \"limit\" is not a parameter of this route"
        );
        assert_eq!(
            message("/api/v1/stats?until=24h&until=1h"),
            "parameter \"until\" is given more than once"
        );
        assert_eq!(
            message("/api/v1/stats?since=1h&until=2h"),
            "parameter \"since\" must be before until"
        );
    }

    #[test]
    fn the_period_is_checked_before_anything_is_read() {
        assert_eq!(
            message("/api/v1/stats?period=week"),
            "parameter \"period\" must be hour, day or month"
        );
        let too_wide = "parameter \"period\" hour needs a since at most 31 days before until";
        assert_eq!(message("/api/v1/stats?period=hour"), too_wide);
        assert_eq!(message("/api/v1/stats?since=745h&period=hour"), too_wide);
        assert_eq!(
            parse("/api/v1/stats?since=24h&period=hour", NOW).ok(),
            Some((
                Range {
                    since_ms: Some(NOW - 24 * 3_600_000),
                    until_ms: None
                },
                Some(Period::Hour)
            ))
        );
        assert_eq!(
            parse("/api/v1/stats?period=&since=", NOW).ok(),
            Some((Range::default(), None))
        );
        assert!(parse("/api/v1/stats?period=month", NOW).is_ok());
    }

    #[test]
    fn empty_values_are_open_bounds() {
        assert_eq!(
            parse_range("/api/v1/stats?since=&until=", NOW).ok(),
            Some(Range::default())
        );
        let r = parse_range("/api/v1/stats?since=2026-07-01T00:00:00%2B02:00", NOW).ok();
        assert_eq!(r.and_then(|r| r.since_ms), Some(1_782_856_800_000));
    }
}
