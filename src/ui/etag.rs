//! `If-None-Match` matching (RFC 9110 §13.1.2: weak comparison, lists, `*`).

/// Whether the header value matches `etag` (a quoted strong tag).
pub fn matches(header: &str, etag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn lists_weak_tags_and_star_match() {
        assert!(matches("\"abc\"", "\"abc\""));
        assert!(matches("\"x\", W/\"abc\"", "\"abc\""));
        assert!(matches("*", "\"abc\""));
        assert!(!matches("\"abd\"", "\"abc\""));
        assert!(!matches("abc", "\"abc\""));
        assert!(!matches("", "\"abc\""));
    }
}
