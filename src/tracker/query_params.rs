//! `tracker.query_filter` for the REST trackers whose issue list takes plain query parameters
//! (GitLab, Gitea): `key=value&key=value`, each pair added to the candidate list request.
//! Keys the adapter sets itself (state, paging, order) are refused, so a filter can narrow the
//! candidates but never change what "open" or "every page" means.

use crate::domain::SettingProblem;

/// The setting this module reads.
const FIELD: &str = "tracker.query_filter";

/// The pairs of `filter` in order (blank pieces skipped, keys and values trimmed), or why
/// it cannot be used.
pub fn parse(filter: &str, reserved: &[&str]) -> Result<Vec<(String, String)>, SettingProblem> {
    let problem = |message: String| SettingProblem::new(FIELD, message);
    let mut pairs = Vec::new();
    for piece in filter.trim().split('&').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = piece.split_once('=') else {
            return Err(problem(format!(
                "tracker.query_filter {filter:?} must be issue-list parameters like labels=bug&milestone=v1"
            )));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(problem(format!(
                "tracker.query_filter {filter:?} must be issue-list parameters like labels=bug&milestone=v1"
            )));
        }
        if reserved.iter().any(|r| r.eq_ignore_ascii_case(k)) {
            return Err(problem(format!(
                "tracker.query_filter may not set {k:?}: the adapter sets {} itself",
                reserved.join(", ")
            )));
        }
        pairs.push((k.to_string(), v.trim().to_string()));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_trimmed_and_kept_in_order() {
        assert_eq!(
            parse(" labels=bug & milestone=v1 &", &["state"]),
            Ok(vec![
                ("labels".to_string(), "bug".to_string()),
                ("milestone".to_string(), "v1".to_string())
            ])
        );
        assert_eq!(parse("  ", &[]), Ok(vec![]));
        assert_eq!(parse("q=", &[]), Ok(vec![("q".to_string(), String::new())]));
    }

    #[test]
    fn malformed_pieces_and_reserved_keys_are_refused() {
        for bad in ["nonsense", "=x", "labels=bug&oops"] {
            let e = parse(bad, &[]).err().map(|e| e.message).unwrap_or_default();
            assert!(e.contains("labels=bug&milestone=v1"), "{bad}: {e}");
        }
        let e = parse("labels=a&State=closed", &["state", "page"])
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "tracker.query_filter may not set \"State\": the adapter sets state, page itself"
        );
    }
}
