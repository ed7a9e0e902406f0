//! Query strings: percent-decoding and the checks every history route applies before it reads
//! anything (unknown or repeated parameters, malformed values answer 400).

use std::collections::BTreeMap;

use crate::domain::RunStatus;

use super::respond::{ApiError, echo};

/// Decodes `%XX` escapes and `+` (as a space). Invalid escapes are kept as written.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded `(name, value)` pairs of a URL's query, in order.
pub fn pairs(url: &str) -> Vec<(String, String)> {
    let Some((_, q)) = url.split_once('?') else {
        return Vec::new();
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

/// How a route words the refusal of an unknown and of a repeated parameter (given the
/// parameter's echo and the accepted names).
pub struct Refusals {
    pub unknown: fn(&str, &[&str]) -> String,
    pub repeated: fn(&str) -> String,
}

/// The run history routes' wording.
const HISTORY_REFUSALS: Refusals = Refusals {
    unknown: |k, allowed| {
        format!(
            "unknown parameter \"{k}\"; accepted parameters are {}",
            allowed.join(", ")
        )
    },
    repeated: |k| format!("parameter \"{k}\" must not be given more than once"),
};

/// Checks names against `allowed` and refuses repeats; returns the non-empty values.
pub fn strict(url: &str, allowed: &[&str]) -> Result<BTreeMap<String, String>, ApiError> {
    strict_worded(url, allowed, &HISTORY_REFUSALS)
}

/// [`strict`] with the route's own wording of the refusals.
pub fn strict_worded(
    url: &str,
    allowed: &[&str],
    words: &Refusals,
) -> Result<BTreeMap<String, String>, ApiError> {
    let mut out = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for (k, v) in pairs(url) {
        if !allowed.contains(&k.as_str()) {
            return Err(ApiError::invalid_parameter((words.unknown)(
                &echo(&k),
                allowed,
            )));
        }
        if !seen.insert(k.clone()) {
            return Err(ApiError::invalid_parameter((words.repeated)(&echo(&k))));
        }
        if !v.is_empty() {
            out.insert(k, v);
        }
    }
    Ok(out)
}

/// An integer in `lo..=hi`, or the default when absent.
pub fn int_in(
    q: &BTreeMap<String, String>,
    name: &str,
    lo: i64,
    hi: i64,
    default: i64,
) -> Result<i64, ApiError> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| (lo..=hi).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_parameter(format!(
                    "parameter \"{name}\" must be an integer from {lo} to {hi}"
                ))
            }),
    }
}

/// A paging cursor: an integer of at least 1.
pub fn cursor(q: &BTreeMap<String, String>) -> Result<Option<i64>, ApiError> {
    match q.get("cursor") {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| {
                ApiError::invalid_parameter("parameter \"cursor\" must be an integer of at least 1")
            }),
    }
}

/// An RFC 3339 timestamp (any offset) as epoch milliseconds.
pub fn timestamp(q: &BTreeMap<String, String>, name: &str) -> Result<Option<i64>, ApiError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => v
            .parse::<jiff::Timestamp>()
            .map(|t| Some(t.as_millisecond()))
            .map_err(|_| {
                ApiError::invalid_parameter(format!(
                    "parameter \"{name}\" must be an RFC 3339 timestamp"
                ))
            }),
    }
}

/// The `status` filter: one of the run statuses, in their stored spelling.
pub fn status(q: &BTreeMap<String, String>) -> Result<Option<RunStatus>, ApiError> {
    match q.get("status") {
        None => Ok(None),
        Some(v) => v.parse::<RunStatus>().map(Some).map_err(|_| {
            let words: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid_parameter(format!(
                "parameter \"status\" must be one of {}",
                words.join(", ")
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_plus() {
        assert_eq!(percent_decode("a%20b+c%3A1"), "a b c:1");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn strict_refuses_unknown_and_repeated() {
        let e = strict("/x?isue=1", &["issue"]).err();
        assert_eq!(e.map(|e| e.code), Some("invalid_parameter"));
        let e = strict("/x?issue=1&issue=2", &["issue"]).err();
        assert!(e.is_some_and(|e| e.message.contains("more than once")));
        let q = strict("/x?issue=&limit=5", &["issue", "limit"]).unwrap_or_default();
        assert!(!q.contains_key("issue"));
        assert_eq!(int_in(&q, "limit", 1, 200, 50).ok(), Some(5));
    }

    #[test]
    fn limit_message_names_the_rule() {
        let q = strict("/x?limit=0", &["limit"]).unwrap_or_default();
        let e = int_in(&q, "limit", 1, 200, 50).err();
        assert_eq!(
            e.map(|e| e.message),
            Some("parameter \"limit\" must be an integer from 1 to 200".to_string())
        );
    }

    #[test]
    fn timestamps_accept_offsets() {
        let q = strict("/x?since=2026-03-26T15:00:00%2B01:00", &["since"]).unwrap_or_default();
        assert_eq!(
            timestamp(&q, "since").ok().flatten(),
            Some(1_774_533_600_000)
        );
    }
}
