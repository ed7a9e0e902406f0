//! The kind's settings: `tracker.*` plus the `gitlab:` block (`auth`, `page_cap`, `timeout_ms`,
//! `retry_base_ms`), checked without I/O. Missing token or project is an error; suspicious state
//! lists are warnings.
//!
//! `tracker.endpoint` is the instance's web root (`https://gitlab.example.com`); `/api/v4` is
//! appended unless the endpoint already ends with it. `tracker.project` is the namespace path
//! (`group/sub/project`, sent URL-encoded) or the numeric project id. `gitlab.auth` picks the
//! header the token travels in: `private_token` (default, `PRIVATE-TOKEN: <token>`, for
//! personal, project and group access tokens) or `bearer` (`Authorization: Bearer <token>`,
//! for OAuth tokens).

use super::KIND;
use crate::tracker::http_tuning::HttpTuning;
use crate::tracker::label_state::StateWords;
use crate::tracker::rest_labels::settings::{self as rest, Rules};
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

pub use rest::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// Where the API lives unless `tracker.endpoint` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://gitlab.com";
/// The REST API's path under the instance root.
pub const API_PATH: &str = "/api/v4";

const RULES: Rules = Rules {
    kind: KIND,
    token_hint: "$GITLAB_TOKEN (a token with the api scope)",
    project_hint: "the project path (group/project) or numeric id",
    project_ok: valid_project,
    project_form: "a project path like group/project (no spaces, no empty segments) or a numeric id",
};

/// Which header carries the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `PRIVATE-TOKEN: <token>`.
    PrivateToken,
    /// `Authorization: Bearer <token>`.
    Bearer,
}

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct GitlabConfig {
    /// The API base, `…/api/v4`, no trailing slash.
    pub api_base: String,
    pub token: String,
    pub auth: Auth,
    /// `tracker.project` as written (path or numeric id).
    pub project: String,
    /// Lowercased, config order.
    pub words: StateWords,
    /// Extra list parameters (`key=value&key=value`) from `tracker.query_filter`.
    pub filter: Vec<(String, String)>,
    pub tuning: HttpTuning,
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = rest::required(s, &RULES);
    if let Err(e) = auth(s) {
        out.push(e);
    }
    out.extend(rest::numbers(s, &[]));
    out.extend(rest::filter_problem(s, RESERVED_LIST_KEYS));
    out
}

fn auth(s: &TrackerSettings) -> Result<Auth, SettingProblem> {
    match s.block.get("auth") {
        None | Some(serde_json::Value::Null) => Ok(Auth::PrivateToken),
        Some(v) => match v.as_str().map(|a| a.trim().to_ascii_lowercase()).as_deref() {
            Some("private_token") | Some("private-token") => Ok(Auth::PrivateToken),
            Some("bearer") => Ok(Auth::Bearer),
            _ => Err(SettingProblem::new(
                "gitlab.auth",
                format!("gitlab.auth must be \"private_token\" or \"bearer\", got {v}"),
            )),
        },
    }
}

/// A numeric id, or `/`-separated non-empty segments without whitespace.
fn valid_project(p: &str) -> bool {
    let p = p.trim();
    !p.is_empty() && !p.chars().any(char::is_whitespace) && p.split('/').all(|seg| !seg.is_empty())
}

/// Issue-list parameters the adapter sets itself (state, order and paging).
const RESERVED_LIST_KEYS: &[&str] = &["state", "order_by", "sort", "page", "per_page"];

/// Settings that work but are probably not what was meant.
pub fn warnings(s: &TrackerSettings) -> Vec<String> {
    let words = rest::words(s);
    let mut out = words.warnings(s);
    for st in words.active.iter().chain(&words.terminal) {
        if st.contains(',') {
            out.push(format!(
                "state {st:?} contains a comma, which GitLab label lists cannot carry"
            ));
        }
    }
    out
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<GitlabConfig, TrackerError> {
    let common = rest::resolve(s, KIND, problems(s))?;
    let endpoint = rest::endpoint_or(s, DEFAULT_ENDPOINT);
    Ok(GitlabConfig {
        api_base: crate::http_client::with_api_root(endpoint, API_PATH),
        token: s.api_key.clone().unwrap_or_default().trim().to_string(),
        auth: auth(s).unwrap_or(Auth::PrivateToken),
        project: s.project.clone().unwrap_or_default().trim().to_string(),
        words: common.words,
        filter: rest::filter(s, RESERVED_LIST_KEYS),
        tuning: common.tuning,
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
    fn missing_token_and_project_are_one_line_each() {
        let p = problems(&settings(None, None));
        assert_eq!(p.len(), 2);
        assert!(p[0].message.contains("$GITLAB_TOKEN") && !p[0].message.contains('\n'));
        assert!(p[1].message.contains("group/project"));
        assert_eq!(problems(&settings(Some("t"), Some("a//b"))).len(), 1);
        assert_eq!(problems(&settings(Some("t"), Some("a b/c"))).len(), 1);
        assert_eq!(problems(&settings(Some("t"), Some("/a"))).len(), 1);
        assert!(problems(&settings(Some("t"), Some("group/sub/project"))).is_empty());
        assert!(problems(&settings(Some("t"), Some("278964"))).is_empty());
        let e = parse(&settings(None, Some("g/p"))).err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::MissingTrackerApiKey));
    }

    #[test]
    fn endpoint_auth_filter_and_defaults() {
        let mut s = settings(Some("t"), Some("g/p"));
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.api_base, "https://gitlab.com/api/v4");
        assert_eq!(c.auth, Auth::PrivateToken);
        assert_eq!(c.words.active, ["backlog", "in-progress", "review"]);
        assert_eq!(c.words.terminal, ["done", "wontfix"]);
        s.endpoint = Some("https://git.example.com/api/v4/".into());
        s.block.insert("auth".into(), "Bearer".into());
        s.query_filter = Some("labels=bug & milestone=v1".into());
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.api_base, "https://git.example.com/api/v4");
        assert_eq!(c.auth, Auth::Bearer);
        assert_eq!(
            c.filter,
            [
                ("labels".to_string(), "bug".to_string()),
                ("milestone".to_string(), "v1".to_string())
            ]
        );
        s.block.insert("auth".into(), "basic".into());
        s.query_filter = Some("nonsense".into());
        let fields: Vec<String> = problems(&s).into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["gitlab.auth", "tracker.query_filter"]);
    }
}
