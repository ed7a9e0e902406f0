//! What every tracker kind's settings check shares: the first problem found becomes the
//! error that stops the adapter from being built, typed by the field it is about, and the
//! `owner/repo` form of a repository project.

use super::{SettingProblem, TrackerError, TrackerErrorKind};

/// `Err` with the first of `problems` (a missing token or project keeps its own kind, so the
/// daemon's startup error names it; anything else is a payload error), `Ok` when there is none.
pub fn first_problem(kind: &str, problems: Vec<SettingProblem>) -> Result<(), TrackerError> {
    let Some(p) = problems.into_iter().next() else {
        return Ok(());
    };
    let error_kind = match p.field.as_str() {
        "tracker.api_key" => TrackerErrorKind::MissingTrackerApiKey,
        "tracker.project" => TrackerErrorKind::MissingTrackerProject,
        _ => TrackerErrorKind::Payload,
    };
    Err(TrackerError::new(error_kind, kind, p.message))
}

/// `owner/repo`, each side non-empty, no whitespace and no further `/`.
pub fn split_owner_repo(p: &str) -> Option<(String, String)> {
    let (o, r) = p.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && !s.contains('/') && !s.chars().any(char::is_whitespace);
    (ok(o) && ok(r)).then(|| (o.to_string(), r.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_problem_is_the_error_typed_by_its_field() {
        assert!(first_problem("x", Vec::new()).is_ok());
        let kind_of = |field: &str| {
            let ps = vec![
                SettingProblem::new(field, "first"),
                SettingProblem::new("tracker.project", "second"),
            ];
            first_problem("x", ps)
                .err()
                .map(|e| (e.kind, e.message, e.tracker))
        };
        assert_eq!(
            kind_of("tracker.api_key"),
            Some((
                TrackerErrorKind::MissingTrackerApiKey,
                "first".into(),
                "x".into()
            ))
        );
        assert_eq!(
            kind_of("tracker.project").map(|k| k.0),
            Some(TrackerErrorKind::MissingTrackerProject)
        );
        assert_eq!(
            kind_of("tracker.endpoint").map(|k| k.0),
            Some(TrackerErrorKind::Payload)
        );
    }

    #[test]
    fn owner_repo_is_two_plain_parts() {
        assert_eq!(split_owner_repo("o/r"), Some(("o".into(), "r".into())));
        for bad in ["o", "/r", "o/", "a/b/c", "o /r", ""] {
            assert_eq!(split_owner_repo(bad), None, "{bad:?}");
        }
    }
}
