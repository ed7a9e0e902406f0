//! The kind's settings: `tracker.*` plus the `gitea:` block (`page_cap`, `timeout_ms`,
//! `retry_base_ms`), checked without I/O. Gitea is self-hosted, so there is no default host:
//! a missing `tracker.endpoint` stops the adapter like a missing token or project. Suspicious
//! state lists are warnings.

use super::KIND;
use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::label_state::StateWords;
use crate::tracker::query_params;
use crate::tracker::settings_check::{self, split_owner_repo};
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

/// State labels used when `tracker.active_states` is not set.
pub const DEFAULT_ACTIVE: &[&str] = &["backlog", "in-progress", "review"];
/// State labels used when `tracker.terminal_states` is not set.
pub const DEFAULT_TERMINAL: &[&str] = &["done", "wontfix"];
/// The REST API's root below the instance URL.
const API_ROOT: &str = "/api/v1";

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct GiteaConfig {
    /// The API root: the instance URL with `/api/v1`, no trailing `/`.
    pub api_base: String,
    pub token: String,
    pub owner: String,
    pub repo: String,
    /// Lowercased, config order.
    pub active: Vec<String>,
    pub terminal: Vec<String>,
    pub handoff: Option<String>,
    /// Extra issue-list parameters for candidates (`tracker.query_filter`).
    pub filter: Vec<(String, String)>,
    pub tuning: HttpTuning,
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = Vec::new();
    match s.endpoint.as_deref().map(str::trim) {
        None | Some("") => out.push(SettingProblem::new(
            "tracker.endpoint",
            "tracker.endpoint is required for tracker kind \"gitea\": the instance URL, e.g. https://gitea.example.com (/api/v1 is added)",
        )),
        Some(e) if !(e.starts_with("http://") || e.starts_with("https://")) => out.push(SettingProblem::new(
            "tracker.endpoint",
            format!("tracker.endpoint {e:?} must be an http:// or https:// URL"),
        )),
        Some(_) => {}
    }
    if s.api_key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        out.push(SettingProblem::new(
            "tracker.api_key",
            "tracker.api_key is required for tracker kind \"gitea\": set it to $GITEA_TOKEN (an access token with issue read and write)",
        ));
    }
    match s.project.as_deref() {
        None => out.push(SettingProblem::new(
            "tracker.project",
            "tracker.project is required for tracker kind \"gitea\": the repository as owner/repo",
        )),
        Some(p) if split_owner_repo(p).is_none() => out.push(SettingProblem::new(
            "tracker.project",
            format!("tracker.project {p:?} must be owner/repo (exactly one '/', no spaces)"),
        )),
        Some(_) => {}
    }
    for key in http_tuning::KEYS {
        if let Err(e) = block_number(s, key) {
            out.push(e);
        }
    }
    if let Some(Err(e)) = s.query_filter.as_deref().map(parse_filter) {
        out.push(e);
    }
    out
}

/// Issue-list parameters the adapter sets itself (state, kind and paging).
const RESERVED_LIST_KEYS: &[&str] = &["state", "type", "page", "limit"];

/// `key=value&key=value` (`q`, `labels`, `milestones`, `since`, `before`, `created_by`,
/// `assigned_by`, `mentioned_by`); blank means none.
fn parse_filter(f: &str) -> Result<Vec<(String, String)>, SettingProblem> {
    query_params::parse(f, RESERVED_LIST_KEYS)
}

/// Settings that work but are probably not what was meant.
pub fn warnings(s: &TrackerSettings) -> Vec<String> {
    let words = StateWords::configured(s, DEFAULT_ACTIVE, DEFAULT_TERMINAL);
    words.warnings(s)
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<GiteaConfig, TrackerError> {
    settings_check::first_problem(KIND, problems(s))?;
    let words = StateWords::configured(s, DEFAULT_ACTIVE, DEFAULT_TERMINAL);
    let (owner, repo) = s
        .project
        .as_deref()
        .and_then(split_owner_repo)
        .unwrap_or_default();
    Ok(GiteaConfig {
        api_base: api_base(s.endpoint.as_deref().unwrap_or_default()),
        token: s.api_key.clone().unwrap_or_default(),
        owner,
        repo,
        active: words.active,
        terminal: words.terminal,
        handoff: words.handoff,
        filter: s
            .query_filter
            .as_deref()
            .map(parse_filter)
            .and_then(Result::ok)
            .unwrap_or_default(),
        tuning: http_tuning::from_settings(s),
    })
}

/// The instance URL with `/api/v1` appended once (an endpoint that already names it keeps it).
fn api_base(endpoint: &str) -> String {
    crate::http_client::with_api_root(endpoint, API_ROOT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracker::TrackerErrorKind;

    fn settings(
        endpoint: Option<&str>,
        key: Option<&str>,
        project: Option<&str>,
    ) -> TrackerSettings {
        TrackerSettings {
            kind: KIND.into(),
            endpoint: endpoint.map(String::from),
            api_key: key.map(String::from),
            project: project.map(String::from),
            ..TrackerSettings::default()
        }
    }

    #[test]
    fn endpoint_token_and_project_are_required_one_line_each() {
        let p = problems(&settings(None, None, None));
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            ["tracker.endpoint", "tracker.api_key", "tracker.project"]
        );
        assert!(p.iter().all(|p| !p.message.contains('\n')));
        assert!(p[1].message.contains("$GITEA_TOKEN"));
        let e = parse(&settings(None, Some("t0ken"), Some("o/r"))).err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(TrackerErrorKind::Payload));
        assert!(e.is_some_and(|e| e.message.contains("tracker.endpoint is required")));
        let e = parse(&settings(Some("https://g"), None, Some("o/r"))).err();
        assert_eq!(
            e.map(|e| e.kind),
            Some(TrackerErrorKind::MissingTrackerApiKey)
        );
        let bad = problems(&settings(Some("gitea.local"), Some("t"), Some("a/b/c")));
        assert_eq!(bad.len(), 2);
        assert!(problems(&settings(Some("https://g"), Some("t"), Some("o/r"))).is_empty());
    }

    #[test]
    fn the_api_root_is_appended_once_and_states_default() {
        assert_eq!(
            api_base("https://git.example.com/"),
            "https://git.example.com/api/v1"
        );
        assert_eq!(
            api_base("https://h/gitea/api/v1/"),
            "https://h/gitea/api/v1"
        );
        let mut s = settings(Some("http://127.0.0.1:3000"), Some("t"), Some("o/r"));
        s.terminal_states = vec!["Done".into(), " ".into()];
        s.handoff_state = Some("Review".into());
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.api_base, "http://127.0.0.1:3000/api/v1");
        assert_eq!(c.active, ["backlog", "in-progress", "review"]);
        assert_eq!(c.terminal, ["done"]);
        assert_eq!(c.tuning.page_cap, 200);
        let w = warnings(&s);
        assert!(w.iter().any(|w| w.contains("blank")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("handoff_state")), "{w:?}");
    }
}
