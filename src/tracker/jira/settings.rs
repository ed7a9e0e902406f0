//! The kind's settings: `tracker.*` (with `api_version` and `user_agent`) plus the `jira:` block
//! (`email`, `blocker_link_type`, `page_cap`, `timeout_ms`, `retry_base_ms`), checked without
//! I/O. Jira Cloud (REST v3, the default) authenticates with Basic `email:api-token`, so a
//! missing email is as fatal as a missing token. Jira Server / Data Center (`api_version: "2"`,
//! REST v2) takes a personal access token as `Bearer`, or `user:password` as Basic.

use serde_json::Value;

use super::KIND;
use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::settings_check;
use crate::tracker::{SettingProblem, TrackerError, TrackerErrorKind, TrackerSettings};

/// States read as active when `tracker.active_states` is not set.
pub const DEFAULT_ACTIVE: &[&str] = &["Backlog", "Selected for Development", "In Progress"];
/// The issue-link type whose inward side names an issue's blockers.
const DEFAULT_LINK_TYPE: &str = "Blocks";

/// Which REST API the site speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// Jira Server / Data Center: `/rest/api/2`, offset-paged search, wiki-markup text.
    V2,
    /// Jira Cloud: `/rest/api/3`, `search/jql` by cursor, Atlassian Document Format.
    V3,
}

/// How requests authenticate.
#[derive(Clone, PartialEq, Eq)]
pub enum JiraAuth {
    /// `Authorization: Basic base64(user:secret)` (Cloud: email and API token).
    Basic { user: String, secret: String },
    /// `Authorization: Bearer <token>`: a Server / Data Center personal access token.
    Bearer(String),
}

impl std::fmt::Debug for JiraAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JiraAuth::Basic { user, .. } => write!(f, "Basic({user}:{})", crate::mask::REDACTED),
            JiraAuth::Bearer(_) => write!(f, "Bearer({})", crate::mask::REDACTED),
        }
    }
}

impl JiraAuth {
    /// The secret part, registered for masking.
    pub fn secret(&self) -> &str {
        match self {
            JiraAuth::Basic { secret, .. } => secret,
            JiraAuth::Bearer(t) => t,
        }
    }
}

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct JiraConfig {
    /// The site root, no trailing `/`.
    pub endpoint: String,
    pub api_version: ApiVersion,
    pub auth: JiraAuth,
    /// `tracker.user_agent`; `None` keeps the client's `sortie/<version>`.
    pub user_agent: Option<String>,
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
    match api_version(s) {
        Err(e) => out.push(e),
        Ok(ApiVersion::V2) => server_problems(s, &mut out),
        Ok(ApiVersion::V3) => cloud_credential_problems(s, &mut out),
    }
    if s.project.as_deref().is_none_or(|p| p.trim().is_empty()) {
        out.push(SettingProblem::new(
            "tracker.project",
            "tracker.project is required for tracker kind \"jira\": the project key, e.g. PROJ",
        ));
    }
    for key in http_tuning::KEYS {
        if let Err(e) = block_number(s, key) {
            out.push(e);
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

/// `tracker.api_version`: absent or `"3"` is Jira Cloud's v3, `"2"` Server / Data Center's.
fn api_version(s: &TrackerSettings) -> Result<ApiVersion, SettingProblem> {
    match s.api_version.as_deref().map(str::trim) {
        None | Some("") | Some("3") => Ok(ApiVersion::V3),
        Some("2") => Ok(ApiVersion::V2),
        Some(other) => Err(SettingProblem::new(
            "tracker.api_version",
            format!(
                "tracker.api_version must be \"2\" (Jira Server / Data Center) or \"3\" (Jira Cloud), not {other:?}"
            ),
        )),
    }
}

/// The endpoint's host when it is a Jira Cloud site (`*.atlassian.net`).
fn cloud_host(s: &TrackerSettings) -> Option<String> {
    let e = s.endpoint.as_deref()?.trim();
    let rest = e.split_once("://").map_or(e, |(_, r)| r);
    let host = rest.split(['/', ':']).next()?.to_ascii_lowercase();
    host.ends_with(".atlassian.net").then_some(host)
}

/// Server / Data Center: a site that is not Jira Cloud, and a token or `user:password`.
fn server_problems(s: &TrackerSettings, out: &mut Vec<SettingProblem>) {
    if let Some(host) = cloud_host(s) {
        out.push(SettingProblem::new(
            "tracker.api_version",
            format!("tracker.api_version \"2\" is Jira Server / Data Center's REST API; {host} is Jira Cloud, which needs \"3\""),
        ));
    }
    if credentials_v2(s).is_none() {
        out.push(SettingProblem::new(
            "tracker.api_key",
            "tracker.api_key is required for tracker kind \"jira\" with api_version \"2\": set it to $JIRA_API_TOKEN holding a personal access token, or user:password",
        ));
    }
}

/// Server / Data Center credentials: `user:password` (split on the first `:`) as Basic, a
/// colon-free key as a personal access token.
fn credentials_v2(s: &TrackerSettings) -> Option<JiraAuth> {
    let key = s.api_key.as_deref().map(str::trim).unwrap_or_default();
    if key.is_empty() {
        return None;
    }
    match key.split_once(':') {
        Some((u, p)) if !u.trim().is_empty() && !p.trim().is_empty() => Some(JiraAuth::Basic {
            user: u.trim().to_string(),
            secret: p.trim().to_string(),
        }),
        Some(_) => None,
        None => Some(JiraAuth::Bearer(key.to_string())),
    }
}

fn cloud_credential_problems(s: &TrackerSettings, out: &mut Vec<SettingProblem>) {
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
    let missing = |why: &str| {
        TrackerError::new(
            TrackerErrorKind::MissingTrackerApiKey,
            KIND,
            why.to_string(),
        )
    };
    let api_version = api_version(s).map_err(|e| missing(&e.message))?;
    let auth = match api_version {
        ApiVersion::V2 => credentials_v2(s)
            .ok_or_else(|| missing("tracker.api_key is not a token or user:password"))?,
        ApiVersion::V3 => match credentials(s) {
            Credentials::Ok(user, secret) => JiraAuth::Basic { user, secret },
            _ => return Err(missing("tracker.api_key is not email:api-token")),
        },
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
        api_version,
        auth,
        user_agent: s
            .user_agent
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(String::from),
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
        assert_eq!(
            c.auth,
            JiraAuth::Basic {
                user: "me@x.io".into(),
                secret: "a:b".into()
            }
        );
        assert_eq!(c.api_version, ApiVersion::V3);
        assert_eq!(c.endpoint, "https://x.atlassian.net");
        assert_eq!(c.project, "P");
        assert_eq!(c.active, DEFAULT_ACTIVE);
        assert_eq!((c.link_type.as_str(), c.tuning.page_cap), ("Blocks", 200));
        let mut s = settings(Some("a:b"), Some("P"));
        s.endpoint = Some("https://x.atlassian.net/rest/api/3".into());
        assert_eq!(problems(&s).len(), 1);
    }

    #[test]
    fn api_version_2_takes_a_token_or_user_password_and_no_cloud_site() {
        let mut s = settings(Some("pat-0123"), Some("P"));
        s.endpoint = Some("https://jira.example.com".into());
        s.api_version = Some("2".into());
        assert!(problems(&s).is_empty(), "{:?}", problems(&s));
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.api_version, ApiVersion::V2);
        assert_eq!(c.auth, JiraAuth::Bearer("pat-0123".into()));
        s.api_key = Some("jdoe:secret".into());
        assert_eq!(
            parse(&s).map(|c| c.auth).ok(),
            Some(JiraAuth::Basic {
                user: "jdoe".into(),
                secret: "secret".into()
            })
        );
        s.api_key = Some(":secret".into());
        assert_eq!(problems(&s).len(), 1);
        s.api_key = Some("pat".into());
        s.endpoint = Some("https://x.atlassian.net".into());
        let p = problems(&s);
        assert!(p.len() == 1 && p[0].message.contains("Jira Cloud"), "{p:?}");
        s.api_version = Some("4".into());
        let p = problems(&s);
        assert!(p.len() == 1 && p[0].field == "tracker.api_version", "{p:?}");
        // Version 3 still wants email:token.
        s.api_version = Some("3".into());
        assert_eq!(problems(&s).len(), 1);
    }
}
