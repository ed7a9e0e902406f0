//! The kind's settings: `tracker.*` plus the `github:` block (`etag_cache_size`, `page_cap`,
//! `timeout_ms`, `retry_base_ms`), checked without I/O. Missing token or project is an error; suspicious state
//! lists are warnings.

use super::KIND;
use crate::tracker::http_tuning::{HttpTuning, block_number};
use crate::tracker::label_state::StateWords;
use crate::tracker::rest_labels::settings::{self as rest, OWNER_REPO_FORM, Rules, owner_repo_ok};
use crate::tracker::{SettingProblem, TrackerError, TrackerSettings};

pub use rest::{DEFAULT_ACTIVE, DEFAULT_TERMINAL};

/// Where the API lives unless `tracker.endpoint` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://api.github.com";
const DEFAULT_ETAG_CACHE_SIZE: usize = 1000;

const RULES: Rules = Rules {
    kind: KIND,
    token_hint: "$GITHUB_TOKEN (a token with Issues read/write and Metadata read)",
    project_hint: "the repository as owner/repo",
    project_ok: owner_repo_ok,
    project_form: OWNER_REPO_FORM,
};

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct GithubConfig {
    pub endpoint: String,
    pub token: String,
    pub owner: String,
    pub repo: String,
    /// Lowercased, config order.
    pub words: StateWords,
    pub query_filter: Option<String>,
    pub etag_cache_size: usize,
    pub tuning: HttpTuning,
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = rest::required(s, &RULES);
    out.extend(rest::numbers(s, &["etag_cache_size"]));
    out
}

/// Settings that work but are probably not what was meant.
pub fn warnings(s: &TrackerSettings) -> Vec<String> {
    rest::words(s).warnings(s)
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<GithubConfig, TrackerError> {
    let common = rest::resolve(s, KIND, problems(s))?;
    let (owner, repo) = rest::owner_repo(s);
    let endpoint = rest::endpoint_or(s, DEFAULT_ENDPOINT);
    Ok(GithubConfig {
        endpoint: endpoint.trim().trim_end_matches('/').to_string(),
        token: s.api_key.clone().unwrap_or_default(),
        owner,
        repo,
        words: common.words,
        query_filter: s.query_filter.clone().filter(|q| !q.trim().is_empty()),
        etag_cache_size: block_number(s, "etag_cache_size")
            .ok()
            .flatten()
            .map_or(DEFAULT_ETAG_CACHE_SIZE, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
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
        assert!(p[0].message.contains("$GITHUB_TOKEN") && !p[0].message.contains('\n'));
        assert!(p[1].message.contains("owner/repo"));
        assert_eq!(problems(&settings(Some("t0ken"), Some("a/b/c"))).len(), 1);
        assert_eq!(problems(&settings(Some("t0ken"), Some("a b/c"))).len(), 1);
        assert!(problems(&settings(Some("t0ken"), Some("octo/repo"))).is_empty());
        let e = parse(&settings(None, Some("o/r"))).err().map(|e| e.kind);
        assert_eq!(e, Some(TrackerErrorKind::MissingTrackerApiKey));
    }

    #[test]
    fn defaults_and_lowercasing() {
        let mut s = settings(Some("t0ken"), Some("o/r"));
        s.terminal_states = vec!["Done".into(), " ".into()];
        s.handoff_state = Some("Review".into());
        let c = parse(&s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(c.words.active, ["backlog", "in-progress", "review"]);
        assert_eq!(c.words.terminal, ["done"]);
        assert_eq!((c.etag_cache_size, c.tuning.page_cap), (1000, 200));
        let w = warnings(&s);
        assert!(w.iter().any(|w| w.contains("blank")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("handoff_state")), "{w:?}");
    }
}
