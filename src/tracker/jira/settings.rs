//! The kind's settings: `tracker.*` plus the `jira:` block (`email`, `blocker_link_type`,
//! `page_cap`, `timeout_ms`, `retry_base_ms`), checked without I/O. Jira Cloud authenticates
//! with Basic `email:api-token`, so a missing email is as fatal as a missing token.

use serde_json::Value;

use super::KIND;
use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::settings_check;
use crate::tracker::{SettingProblem, TrackerError, TrackerErrorKind, TrackerSettings};

/// States read as active when `tracker.active_states` is not set.
pub const DEFAULT_ACTIVE: &[&str] = &["Backlog", "Selected for Development", "In Progress"];
/// The issue-link type whose inward side names an issue's blockers.
const DEFAULT_LINK_TYPE: &str = "Blocks";

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct JiraConfig {
    /// The site root, no trailing `/`.
    pub endpoint: String,
    pub email: String,
    pub token: String,
    pub project: String,
    /// Config order and casing (Jira compares status names case-insensitively).
    pub active: Vec<String>,
    pub query_filter: Option<String>,
    pub link_type: String,
    pub tuning: HttpTuning,
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = Vec::new();
    match s.endpoint.as_deref().map(str::trim) {
        None | Some("") => out.push(SettingProblem::new(
            "tracker.endpoint",
            "tracker.endpoint is required for tracker kind \"jira\": the site root, e.g. https://your-site.atlassian.net",
        )),
        Some(e) if e.contains("/rest/api/") => out.push(SettingProblem::new(
            "tracker.endpoint",
            format!("tracker.endpoint {e:?} must be the site root, without /rest/api/…"),
        )),
        Some(_) => {}
    }
    match credentials(s) {
        Credentials::NoToken => out.push(SettingProblem::new(
            "tracker.api_key",
            "tracker.api_key is required for tracker kind \"jira\": set it to $JIRA_API_TOKEN holding email:api-token (a token with Browse projects, Edit issues, Transition issues and Add comments)",
        )),
        Credentials::NoEmail => out.push(SettingProblem::new(
            "tracker.api_key",
            "tracker.api_key for tracker kind \"jira\" has no account email: write it as email:api-token, or set jira.email",
        )),
        Credentials::Ok(..) => {}
    }
    if s.project.as_deref().is_none_or(|p| p.trim().is_empty()) {
        out.push(SettingProblem::new(
            "tracker.project",
            "tracker.project is required for tracker kind \"jira\": the project key, e.g. PROJ",
        ));
    }
    for key in http_tuning::KEYS {
        if let Err(e) = block_number(s, key) {
            out.push(SettingProblem::new(format!("jira.{key}"), &e));
        }
    }
    if s.block
        .get("blocker_link_type")
        .is_some_and(|v| !v.is_string())
    {
        out.push(SettingProblem::new(
            "jira.blocker_link_type",
            "jira.blocker_link_type must be a link type name such as Blocks",
        ));
    }
    out
}

enum Credentials {
    NoToken,
    NoEmail,
    Ok(String, String),
}

/// `email:token` split on the first `:`, or the token alone with `jira.email`.
fn credentials(s: &TrackerSettings) -> Credentials {
    let key = s.api_key.as_deref().map(str::trim).unwrap_or_default();
    if key.is_empty() {
        return Credentials::NoToken;
    }
    let block_email = s
        .block
        .get("email")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|e| !e.is_empty());
    let (email, token) = match (key.split_once(':'), block_email) {
        (Some((e, t)), _) => (e.trim(), t.trim()),
        (None, Some(e)) => (e, key),
        (None, None) => return Credentials::NoEmail,
    };
    match (email.is_empty(), token.is_empty()) {
        (_, true) => Credentials::NoToken,
        (true, false) => Credentials::NoEmail,
        _ => Credentials::Ok(email.to_string(), token.to_string()),
    }
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<JiraConfig, TrackerError> {
    settings_check::first_problem(KIND, problems(s))?;
    let Credentials::Ok(email, token) = credentials(s) else {
        return Err(TrackerError::new(
            TrackerErrorKind::MissingTrackerApiKey,
            KIND,
            "tracker.api_key is not email:api-token",
        ));
    };
    let active: Vec<String> = s
        .active_states
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    Ok(JiraConfig {
        endpoint: s
            .endpoint
            .as_deref()
            .unwrap_or_default()
            .trim()
            .trim_end_matches('/')
            .to_string(),
        email,
        token,
        project: s.project.as_deref().unwrap_or_default().trim().to_string(),
        active: if active.is_empty() {
            DEFAULT_ACTIVE.iter().map(|a| a.to_string()).collect()
        } else {
            active
        },
        query_filter: s.query_filter.clone().filter(|q| !q.trim().is_empty()),
        link_type: s
            .block
            .get("blocker_link_type")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(DEFAULT_LINK_TYPE)
            .to_string(),
        tuning: http_tuning::from_settings(s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(key: Option<&str>, project: Option<&str>) -> TrackerSettings {
        TrackerSettings {
            kind: KIND.into(),
            endpoint: Some("https://x.atlassian.net/".into()),
            api_key: key.map(String::from),
            project: project.map(String::from),
            ..TrackerSettings::default()
        }
    }

    #[test]
    fn missing_token_email_and_project_are_one_line_each() {
        let p = problems(&settings(None, None));
        assert_eq!(p.len(), 2);
        assert!(p[0].message.contains("$JIRA_API_TOKEN") && !p[0].message.contains('\n'));
        assert!(p[1].message.contains("project key"));
        let p = problems(&settings(Some("just-a-token"), Some("P")));
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("email"), "{p:?}");
        assert_eq!(problems(&settings(Some(":tok"), Some("P"))).len(), 1);
        assert_eq!(problems(&settings(Some("me@x.io:"), Some("P"))).len(), 1);
        let mut s = settings(Some("just-a-token"), Some("P"));
        s.block.insert("email".into(), "me@x.io".into());
        assert!(problems(&s).is_empty());
        let e = parse(&settings(None, Some("P"))).err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::MissingTrackerApiKey));
    }

    #[test]
    fn the_token_splits_on_the_first_colon_and_defaults_apply() {
        let c =
            parse(&settings(Some("me@x.io:a:b"), Some(" P "))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.email.as_str(), c.token.as_str()), ("me@x.io", "a:b"));
        assert_eq!(c.endpoint, "https://x.atlassian.net");
        assert_eq!(c.project, "P");
        assert_eq!(c.active, DEFAULT_ACTIVE);
        assert_eq!((c.link_type.as_str(), c.tuning.page_cap), ("Blocks", 200));
        let mut s = settings(Some("a:b"), Some("P"));
        s.endpoint = Some("https://x.atlassian.net/rest/api/3".into());
        assert_eq!(problems(&s).len(), 1);
    }
}
