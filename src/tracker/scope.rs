//! The scope rule of issue ids that come from outside sortie (an agent's tool call): an issue
//! is reachable only when the tracker's own answer says it belongs to the configured project,
//! team or repository (and matches the query filter where one is set), never because of how
//! its id is spelled; and an id is checked against its kind's grammar before any request, so
//! no spelling (`/`, `..`, `%2F`, a URL) can change the path a request goes to. Adapters parse
//! every id they are given through the helpers here and implement
//! [`super::TrackerAdapter::resolve_in_scope`] from what their tracker answers.

use super::{TrackerError, TrackerErrorKind};

/// The rule, as refusals quote it.
pub const RULE: &str = "an issue is reachable only when the tracker says it belongs to tracker.project (and matches tracker.query_filter when one is set); an id that is not a plain issue id of the tracker kind is refused before any request";

/// An out-of-scope refusal of `id` by adapter `kind`, saying why and quoting the rule.
pub fn refusal(kind: &str, id: &str, why: &str) -> TrackerError {
    TrackerError::new(
        TrackerErrorKind::OutOfScope,
        kind,
        format!("issue {id:?} is out of scope: {why} (rule: {RULE})"),
    )
}

/// Whether `s` is a plain decimal number of at most 19 digits (no sign, no spaces).
pub fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `KEY-12` → (`KEY`, 12): a project or team key (a letter, then letters, digits or `_`, at
/// most 32) and a number. The key comes back uppercased.
pub fn key_number(s: &str) -> Option<(String, u64)> {
    let (key, number) = s.split_once('-')?;
    let mut chars = key.chars();
    let key_ok = key.len() <= 32
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !key_ok || !is_number(number) {
        return None;
    }
    Some((key.to_ascii_uppercase(), number.parse().ok()?))
}

/// Whether `s` is a UUID as text (`8-4-4-4-12` hex digits).
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The issue number of a repository tracker's id: `12`, `#12`, or `<home>#12` where `<home>`
/// is the configured repository or project path (case-insensitive). Anything else, another
/// repository's reference included, is refused before any request.
pub fn repo_number(kind: &str, id: &str, home: &str) -> Result<String, TrackerError> {
    let trimmed = id.trim();
    let (prefix, number) = match trimmed.rsplit_once('#') {
        Some((p, n)) => (Some(p), n),
        None => (None, trimmed),
    };
    if !is_number(number) {
        return Err(refusal(
            kind,
            id,
            &format!("a {kind} issue id is its number (12, #12 or {home}#12)"),
        ));
    }
    match prefix {
        None | Some("") => Ok(number.to_string()),
        Some(p) if p.eq_ignore_ascii_case(home) => Ok(number.to_string()),
        Some(p) => Err(refusal(
            kind,
            id,
            &format!("it names the repository {p:?}, not {home:?}"),
        )),
    }
}

/// The check of a resolved issue's owner: `Ok` when `owner` (what the tracker answered) is
/// `configured` (case-insensitive), the refusal naming both otherwise.
pub fn same_owner(
    kind: &str,
    id: &str,
    what: &str,
    owner: &str,
    configured: &str,
) -> Result<(), TrackerError> {
    if owner.trim().eq_ignore_ascii_case(configured.trim()) {
        return Ok(());
    }
    let owner = if owner.is_empty() { "none" } else { owner };
    Err(refusal(
        kind,
        id,
        &format!(
            "the tracker says it belongs to {what} {owner:?}, and tracker.project is {configured:?}"
        ),
    ))
}

/// The refusal of an issue the query filter does not select.
pub fn filtered_out(kind: &str, id: &str, filter: &str) -> TrackerError {
    refusal(
        kind,
        id,
        &format!("tracker.query_filter ({filter}) does not select it"),
    )
}

/// Whether an error means the id was refused or names nothing: a batch lookup omits such ids.
pub fn omitted(e: &TrackerError) -> bool {
    matches!(
        e.kind,
        TrackerErrorKind::NotFound | TrackerErrorKind::OutOfScope
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_numbers_accept_only_this_repository() {
        let n = |id: &str| repo_number("github", id, "o/r").map_err(|e| e.kind);
        assert_eq!(n("12"), Ok("12".into()));
        assert_eq!(n(" #12 "), Ok("12".into()));
        assert_eq!(n("O/R#12"), Ok("12".into()));
        for bad in [
            "",
            " ",
            "..",
            "../12",
            "12/..",
            "%2F12",
            "12%2F..",
            "1 2",
            "-1",
            "+1",
            "12/",
            "/12",
            "other/repo#12",
            "o/r#",
            "http://127.0.0.1:1/repos/o/r/issues/12",
            "12?x=1",
            "1\n2",
            "0x1f",
            "99999999999999999999",
        ] {
            assert_eq!(n(bad), Err(TrackerErrorKind::OutOfScope), "{bad:?}");
        }
        let e = repo_number("github", "x/y#1", "o/r")
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref().is_some_and(|e| e.contains("\"x/y\"")
                && e.contains("tracker_out_of_scope")
                && e.contains("rule: ")),
            "{e:?}"
        );
    }

    #[test]
    fn keys_numbers_and_uuids() {
        assert_eq!(key_number("proj-12"), Some(("PROJ".into(), 12)));
        assert_eq!(key_number("P_2-1"), Some(("P_2".into(), 1)));
        for bad in [
            "PROJ", "-1", "1P-2", "PROJ-", "PROJ-1-2", "PR/J-1", "PROJ-%31", "P.J-1",
        ] {
            assert_eq!(key_number(bad), None, "{bad:?}");
        }
        assert!(is_uuid("00000000-0000-4000-8000-000000000001"));
        assert!(!is_uuid("00000000-0000-4000-8000-00000000000/"));
        assert!(!is_uuid("ENG-1"));
        assert!(is_number("20009") && !is_number("") && !is_number("2 0"));
    }

    #[test]
    fn owners_compare_case_insensitively_and_name_both_sides() {
        assert!(same_owner("jira", "1", "project", "proj", "PROJ").is_ok());
        let e = same_owner("jira", "20009", "project", "OTHER", "PROJ").err();
        let e = e.map(|e| (e.kind, e.message));
        assert!(
            e.as_ref()
                .is_some_and(|(k, m)| *k == TrackerErrorKind::OutOfScope
                    && m.contains("\"OTHER\"")
                    && m.contains("\"PROJ\"")),
            "{e:?}"
        );
    }
}
