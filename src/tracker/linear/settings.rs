//! The kind's settings: `tracker.*` plus the `linear:` block (`page_cap`, `timeout_ms`,
//! `retry_base_ms`), checked without I/O. `tracker.project` is the team key (`ENG`), the
//! prefix of the team's issue identifiers.

use super::KIND;
use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::settings_check;
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

/// Where the API lives unless `tracker.endpoint` says otherwise (`/graphql` is appended).
pub const DEFAULT_ENDPOINT: &str = "https://api.linear.app";
/// States read as active when `tracker.active_states` is not set: the started and unstarted
/// states of a new Linear team.
pub const DEFAULT_ACTIVE: &[&str] = &["Todo", "In Progress"];
/// States read as terminal when `tracker.terminal_states` is not set: the completed and
/// canceled states of a new Linear team.
pub const DEFAULT_TERMINAL: &[&str] = &["Done", "Canceled", "Duplicate"];

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct LinearConfig {
    /// The API root, no trailing `/`.
    pub endpoint: String,
    pub token: String,
    /// The team key, as written.
    pub team: String,
    /// Config order and casing (names are matched case-insensitively).
    pub active: Vec<String>,
    /// `tracker.query_filter`: an `IssueFilter` object combined with the adapter's own team
    /// and state filter in candidate and by-state reads.
    pub extra_filter: Option<serde_json::Value>,
    pub tuning: HttpTuning,
}

fn query_filter_problem(message: String) -> SettingProblem {
    SettingProblem::new("tracker.query_filter", message)
}

/// `tracker.query_filter` as an `IssueFilter` object; `None` when unset or blank.
fn extra_filter(s: &TrackerSettings) -> Result<Option<serde_json::Value>, SettingProblem> {
    let Some(text) = s
        .query_filter
        .as_deref()
        .map(str::trim)
        .filter(|q| !q.is_empty())
    else {
        return Ok(None);
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) if v.as_object().is_some_and(|o| !o.is_empty()) => Ok(Some(v)),
        Ok(_) => Err(query_filter_problem(format!(
            "tracker.query_filter {text:?} must be a non-empty JSON object in Linear's IssueFilter shape, e.g. {{\"labels\": {{\"name\": {{\"eq\": \"bug\"}}}}}}"
        ))),
        Err(e) => Err(query_filter_problem(format!(
            "tracker.query_filter is not JSON ({e}); for tracker kind \"linear\" it is an IssueFilter object, e.g. {{\"labels\": {{\"name\": {{\"eq\": \"bug\"}}}}}}"
        ))),
    }
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = Vec::new();
    if s.api_key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        out.push(SettingProblem::new(
            "tracker.api_key",
            "tracker.api_key is required for tracker kind \"linear\": set it to $LINEAR_API_KEY holding a personal API key (Settings → Security & access) with read and write access to the team",
        ));
    }
    match s.project.as_deref().map(str::trim) {
        None | Some("") => out.push(SettingProblem::new(
            "tracker.project",
            "tracker.project is required for tracker kind \"linear\": the team key, e.g. ENG",
        )),
        Some(p) if p.chars().any(|c| c.is_whitespace() || c == '-') => out.push(SettingProblem::new(
            "tracker.project",
            format!(
                "tracker.project {p:?} must be a Linear team key such as ENG (no spaces, no issue number)"
            ),
        )),
        Some(_) => {}
    }
    if let Some(e) = s.endpoint.as_deref().map(str::trim)
        && e.ends_with("/graphql")
    {
        out.push(SettingProblem::new(
            "tracker.endpoint",
            format!("tracker.endpoint {e:?} must be the API root, without /graphql"),
        ));
    }
    if let Err(e) = extra_filter(s) {
        out.push(e);
    }
    for key in http_tuning::KEYS {
        if let Err(e) = block_number(s, key) {
            out.push(e);
        }
    }
    out
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<LinearConfig, TrackerError> {
    settings_check::first_problem(KIND, problems(s))?;
    let active: Vec<String> = s
        .active_states
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    let endpoint = s
        .endpoint
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .unwrap_or(DEFAULT_ENDPOINT);
    Ok(LinearConfig {
        endpoint: endpoint.trim_end_matches('/').to_string(),
        token: s.api_key.as_deref().unwrap_or_default().trim().to_string(),
        team: s.project.as_deref().unwrap_or_default().trim().to_string(),
        active: if active.is_empty() {
            DEFAULT_ACTIVE.iter().map(|a| a.to_string()).collect()
        } else {
            active
        },
        extra_filter: extra_filter(s).unwrap_or_default(),
        tuning: http_tuning::from_settings(s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::TrackerErrorKind;

    fn settings(key: Option<&str>, project: Option<&str>) -> TrackerSettings {
        TrackerSettings {
            kind: KIND.into(),
            api_key: key.map(String::from),
            project: project.map(String::from),
            ..TrackerSettings::default()
        }
    }

    #[test]
    fn missing_key_and_team_are_one_line_each() {
        let p = problems(&settings(None, None));
        assert_eq!(p.len(), 2);
        assert!(p[0].message.contains("$LINEAR_API_KEY") && !p[0].message.contains('\n'));
        assert!(p[1].message.contains("team key"));
        assert_eq!(problems(&settings(Some("k"), Some("ENG-12"))).len(), 1);
        let e = parse(&settings(None, Some("ENG"))).err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::MissingTrackerApiKey));
        let e = parse(&settings(Some("k"), Some(" "))).err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::MissingTrackerProject));
    }

    #[test]
    fn defaults_apply() {
        let c =
            parse(&settings(Some(" lin_api_x "), Some(" ENG "))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert_eq!((c.token.as_str(), c.team.as_str()), ("lin_api_x", "ENG"));
        assert_eq!(c.active, DEFAULT_ACTIVE);
        let mut s = settings(Some("k"), Some("ENG"));
        s.endpoint = Some("https://api.linear.app/graphql".into());
        assert_eq!(problems(&s).len(), 1);
    }

    #[test]
    fn the_query_filter_is_an_issue_filter_object() {
        let mut s = settings(Some("k"), Some("ENG"));
        s.query_filter = Some(r#" {"labels": {"name": {"eq": "bug"}}} "#.into());
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.extra_filter,
            Some(serde_json::json!({"labels": {"name": {"eq": "bug"}}}))
        );
        s.query_filter = Some("  ".into());
        assert_eq!(parse(&s).map(|c| c.extra_filter).ok(), Some(None));
        for bad in ["label = bug", "[1]", "{}", "\"x\""] {
            s.query_filter = Some(bad.into());
            let p = problems(&s);
            assert_eq!(p.len(), 1, "{bad}");
            assert_eq!(p[0].field, "tracker.query_filter");
            assert!(p[0].message.contains("IssueFilter"), "{}", p[0].message);
        }
    }
}
