//! The kind's settings: `tracker.*` plus the `gitea:` block (`page_cap`, `timeout_ms`,
//! `retry_base_ms`), checked without I/O. Gitea is self-hosted, so there is no default host:
//! a missing `tracker.endpoint` stops the adapter like a missing token or project. Suspicious
//! state lists are warnings.

use super::KIND;
use crate::tracker::http_tuning::HttpTuning;
use crate::tracker::label_state::StateWords;
use crate::tracker::rest_labels::settings::{self as rest, OWNER_REPO_FORM, Rules, owner_repo_ok};
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

pub use rest::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// The REST API's root below the instance URL.
const API_ROOT: &str = "/api/v1";

const RULES: Rules = Rules {
    kind: KIND,
    token_hint: "$GITEA_TOKEN (an access token with issue read and write)",
    project_hint: "the repository as owner/repo",
    project_ok: owner_repo_ok,
    project_form: OWNER_REPO_FORM,
};

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct GiteaConfig {
    /// The API root: the instance URL with `/api/v1`, no trailing `/`.
    pub api_base: String,
    pub token: String,
    pub owner: String,
    pub repo: String,
    /// Lowercased, config order.
    pub words: StateWords,
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
    out.extend(rest::required(s, &RULES));
    out.extend(rest::numbers(s, &[]));
    out.extend(rest::filter_problem(s, RESERVED_LIST_KEYS));
    out
}

/// Issue-list parameters the adapter sets itself (state, kind and paging); the filter may set
/// `q`, `labels`, `milestones`, `since`, `before`, `created_by`, `assigned_by`, `mentioned_by`.
const RESERVED_LIST_KEYS: &[&str] = &["state", "type", "page", "limit"];

/// Settings that work but are probably not what was meant.
pub fn warnings(s: &TrackerSettings) -> Vec<String> {
    rest::words(s).warnings(s)
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<GiteaConfig, TrackerError> {
    let common = rest::resolve(s, KIND, problems(s))?;
    let (owner, repo) = rest::owner_repo(s);
    Ok(GiteaConfig {
        api_base: api_base(s.endpoint.as_deref().unwrap_or_default()),
        token: s.api_key.clone().unwrap_or_default(),
        owner,
        repo,
        words: common.words,
        filter: rest::filter(s, RESERVED_LIST_KEYS),
        tuning: common.tuning,
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
        assert_eq!(c.words.active, ["backlog", "in-progress", "review"]);
        assert_eq!(c.words.terminal, ["done"]);
        assert_eq!(c.tuning.page_cap, 200);
        let w = warnings(&s);
        assert!(w.iter().any(|w| w.contains("blank")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("handoff_state")), "{w:?}");
    }
}
