//! The cross-origin rule (seed "Cross-origin requests"): a state-changing request that a
//! browser sends from a page on another origin is refused, before routing, on every path.

/// What the rule decided, with the table row that decided it (for tests and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginDecision {
    Served(u8),
    Refused(u8),
}

impl OriginDecision {
    pub fn refused(self) -> bool {
        matches!(self, OriginDecision::Refused(_))
    }
}

/// Applies the six rows in order; the first that applies decides. Methods and
/// `Sec-Fetch-Site` values are compared exactly as written (both are case-sensitive tokens;
/// the header parser already strips the optional whitespace around a value). A header with
/// an empty value counts as absent.
pub fn check(
    method: &str,
    sec_fetch_site: Option<&str>,
    origin: Option<&str>,
    host: Option<&str>,
) -> OriginDecision {
    if matches!(method, "GET" | "HEAD" | "OPTIONS") {
        return OriginDecision::Served(1);
    }
    if let Some(site) = present(sec_fetch_site) {
        if site == "same-origin" || site == "none" {
            return OriginDecision::Served(2);
        }
        return OriginDecision::Refused(3);
    }
    let Some(origin) = present(origin) else {
        return OriginDecision::Served(4);
    };
    match (origin_host_port(origin), host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h.trim()) => OriginDecision::Served(5),
        _ => OriginDecision::Refused(6),
    }
}

/// A header value, `None` when absent or empty.
fn present(v: Option<&str>) -> Option<&str> {
    v.filter(|v| !v.is_empty())
}

/// `scheme://host[:port]` → `host[:port]` (the scheme is ignored, the port kept as written).
/// `null` and anything without a scheme yields `None`, which never equals a Host.
fn origin_host_port(origin: &str) -> Option<&str> {
    let origin = origin.trim();
    let (_, rest) = origin.split_once("://")?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    Some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use OriginDecision::*;

    #[test]
    fn row1_safe_methods_are_served_whatever_the_headers() {
        for m in ["GET", "HEAD", "OPTIONS"] {
            assert_eq!(
                check(
                    m,
                    Some("cross-site"),
                    Some("http://evil.example"),
                    Some("127.0.0.1:7678")
                ),
                Served(1)
            );
        }
    }

    #[test]
    fn row2_same_origin_or_none_is_served() {
        assert_eq!(
            check("POST", Some("same-origin"), Some("http://evil"), None),
            Served(2)
        );
        assert_eq!(check("POST", Some("none"), None, None), Served(2));
    }

    #[test]
    fn fetch_site_values_are_compared_exactly() {
        for v in [
            "SAME-ORIGIN",
            "Same-Origin",
            "NONE",
            "same-origin,none",
            "same- origin",
        ] {
            assert_eq!(check("POST", Some(v), None, None), Refused(3), "{v}");
        }
    }

    #[test]
    fn empty_headers_count_as_absent() {
        assert_eq!(check("POST", Some(""), None, None), Served(4));
        assert_eq!(check("POST", Some(""), Some(""), Some("h:1")), Served(4));
        assert_eq!(
            check("POST", Some(""), Some("http://h:1"), Some("h:1")),
            Served(5)
        );
        assert_eq!(
            check("POST", Some(""), Some("http://evil:1"), Some("h:1")),
            Refused(6)
        );
    }

    #[test]
    fn methods_are_compared_exactly() {
        assert_eq!(check("get", Some("cross-site"), None, None), Refused(3));
    }

    #[test]
    fn row3_other_fetch_site_is_refused_whatever_origin_says() {
        assert_eq!(
            check(
                "POST",
                Some("same-site"),
                Some("http://127.0.0.1:7678"),
                Some("127.0.0.1:7678")
            ),
            Refused(3)
        );
        assert_eq!(check("DELETE", Some("cross-site"), None, None), Refused(3));
    }

    #[test]
    fn row4_no_fetch_site_and_no_origin_is_served() {
        assert_eq!(check("POST", None, None, Some("127.0.0.1:7678")), Served(4));
    }

    #[test]
    fn row5_origin_equal_to_host_is_served_ignoring_scheme() {
        assert_eq!(
            check(
                "POST",
                None,
                Some("https://127.0.0.1:7678"),
                Some("127.0.0.1:7678")
            ),
            Served(5)
        );
    }

    #[test]
    fn row6_origin_different_from_host_is_refused() {
        assert_eq!(
            check(
                "POST",
                None,
                Some("http://127.0.0.1:9999"),
                Some("127.0.0.1:7678")
            ),
            Refused(6)
        );
        assert_eq!(
            check("POST", None, Some("null"), Some("127.0.0.1:7678")),
            Refused(6)
        );
        assert_eq!(check("POST", None, Some("http://x"), None), Refused(6));
    }
}
