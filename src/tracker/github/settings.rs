//! The kind's settings: `tracker.*` plus the `github:` block (`etag_cache_size`, `page_cap`,
//! `timeout_ms`, `retry_base_ms`), checked without I/O. Missing token or project is an error; suspicious state
//! lists are warnings.

use super::KIND;
use crate::tracker::http_tuning::{self, HttpTuning, block_number};
use crate::tracker::{SettingProblem, TrackerError, TrackerErrorKind, TrackerSettings};

/// Where the API lives unless `tracker.endpoint` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://api.github.com";
/// State labels used when `tracker.active_states` is not set.
pub const DEFAULT_ACTIVE: &[&str] = &["backlog", "in-progress", "review"];
/// State labels used when `tracker.terminal_states` is not set.
pub const DEFAULT_TERMINAL: &[&str] = &["done", "wontfix"];
const DEFAULT_ETAG_CACHE_SIZE: usize = 1000;

/// Everything the adapter needs, resolved.
#[derive(Debug, Clone)]
pub struct GithubConfig {
    pub endpoint: String,
    pub token: String,
    pub owner: String,
    pub repo: String,
    /// Lowercased, config order.
    pub active: Vec<String>,
    pub terminal: Vec<String>,
    pub handoff: Option<String>,
    pub query_filter: Option<String>,
    pub etag_cache_size: usize,
    pub tuning: HttpTuning,
}

/// The problems that stop the adapter from being built, one line each.
pub fn problems(s: &TrackerSettings) -> Vec<SettingProblem> {
    let mut out = Vec::new();
    if s.api_key.as_deref().is_none_or(|k| k.trim().is_empty()) {
        out.push(problem(
            "tracker.api_key",
            "tracker.api_key is required for tracker kind \"github\": set it to $GITHUB_TOKEN (a token with Issues read/write and Metadata read)",
        ));
    }
    match s.project.as_deref() {
        None => out.push(problem(
            "tracker.project",
            "tracker.project is required for tracker kind \"github\": the repository as owner/repo",
        )),
        Some(p) if split_project(p).is_none() => out.push(problem(
            "tracker.project",
            &format!("tracker.project {p:?} must be owner/repo (exactly one '/', no spaces)"),
        )),
        Some(_) => {}
    }
    for key in std::iter::once("etag_cache_size").chain(http_tuning::KEYS) {
        if let Err(e) = block_number(s, key) {
            out.push(problem(&format!("github.{key}"), &e));
        }
    }
    out
}

fn problem(field: &str, message: &str) -> SettingProblem {
    SettingProblem {
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// Settings that work but are probably not what was meant.
pub fn warnings(s: &TrackerSettings) -> Vec<String> {
    let mut out = Vec::new();
    let raw = s.active_states.iter().chain(&s.terminal_states);
    if raw.clone().any(|v| v.trim().is_empty()) {
        out.push("tracker state lists contain a blank item".to_string());
    }
    let (active, terminal) = (
        states(&s.active_states, DEFAULT_ACTIVE),
        states(&s.terminal_states, DEFAULT_TERMINAL),
    );
    for a in active.iter().filter(|a| terminal.contains(a)) {
        out.push(format!("state {a:?} is both active and terminal"));
    }
    let handoff = s.handoff_state.as_deref().map(str::to_lowercase);
    if let Some(h) = &handoff
        && (active.contains(h) || terminal.contains(h))
    {
        out.push(format!(
            "handoff_state {h:?} is also an active or terminal state"
        ));
    }
    if let Some(p) = s.in_progress_state.as_deref().map(str::to_lowercase)
        && (terminal.contains(&p) || handoff.as_ref() == Some(&p))
    {
        out.push(format!(
            "in_progress_state {p:?} is terminal or equals handoff_state"
        ));
    }
    out
}

/// The resolved settings; the first problem is an error.
pub fn parse(s: &TrackerSettings) -> Result<GithubConfig, TrackerError> {
    if let Some(p) = problems(s).into_iter().next() {
        let kind = match p.field.as_str() {
            "tracker.api_key" => TrackerErrorKind::MissingTrackerApiKey,
            "tracker.project" => TrackerErrorKind::MissingTrackerProject,
            _ => TrackerErrorKind::Payload,
        };
        return Err(TrackerError::new(kind, KIND, p.message));
    }
    let (owner, repo) = s
        .project
        .as_deref()
        .and_then(split_project)
        .unwrap_or_default();
    let endpoint = s
        .endpoint
        .as_deref()
        .filter(|e| !e.trim().is_empty())
        .unwrap_or(DEFAULT_ENDPOINT);
    Ok(GithubConfig {
        endpoint: endpoint.trim().trim_end_matches('/').to_string(),
        token: s.api_key.clone().unwrap_or_default(),
        owner,
        repo,
        active: states(&s.active_states, DEFAULT_ACTIVE),
        terminal: states(&s.terminal_states, DEFAULT_TERMINAL),
        handoff: s.handoff_state.as_deref().map(|h| h.trim().to_lowercase()),
        query_filter: s.query_filter.clone().filter(|q| !q.trim().is_empty()),
        etag_cache_size: block_number(s, "etag_cache_size")
            .ok()
            .flatten()
            .map_or(DEFAULT_ETAG_CACHE_SIZE, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            }),
        tuning: http_tuning::from_settings(s),
    })
}

/// `owner/repo`, each side non-empty, no whitespace.
fn split_project(p: &str) -> Option<(String, String)> {
    let (o, r) = p.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && !s.contains('/') && !s.chars().any(char::is_whitespace);
    (ok(o) && ok(r)).then(|| (o.to_string(), r.to_string()))
}

/// Lowercased non-blank states, or the defaults when none are configured.
fn states(configured: &[String], default: &[&str]) -> Vec<String> {
    let list: Vec<String> = configured
        .iter()
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() {
        default.iter().map(|s| s.to_string()).collect()
    } else {
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c.active, ["backlog", "in-progress", "review"]);
        assert_eq!(c.terminal, ["done"]);
        assert_eq!((c.etag_cache_size, c.tuning.page_cap), (1000, 200));
        let w = warnings(&s);
        assert!(w.iter().any(|w| w.contains("blank")), "{w:?}");
        assert!(w.iter().any(|w| w.contains("handoff_state")), "{w:?}");
    }
}
