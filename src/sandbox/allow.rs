//! `allow_hosts` patterns and their matching rule: `host` (exactly that name or address),
//! `*.suffix` (any name ending in `.suffix`, at any depth, but not `suffix` itself), each
//! optionally followed by `:port` (only that port; without it any port). Names compare
//! case-insensitively with a trailing dot ignored; an IPv6 address is written in brackets
//! (`[::1]:8080`). No DNS is involved: the name the agent asks the proxy for is the name
//! matched, so an allowed name cannot be reached through its address, nor the other way round.

use std::fmt;

use super::error::{HostPatternError, PatternFault};

/// The longest host name accepted (RFC 1035's limit on a whole name).
const MAX_HOST: usize = 253;

/// One `allow_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// Lower-case, without a trailing dot or brackets.
    host: String,
    /// `*.host`: names strictly below `host`.
    wildcard: bool,
    port: Option<u16>,
}

impl HostPattern {
    /// Parses one entry; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<HostPattern, HostPatternError> {
        let s = s.trim();
        let fault = |reason| HostPatternError {
            entry: s.to_string(),
            reason,
        };
        if s.contains("://") || s.contains('/') {
            return Err(fault(PatternFault::NotAHost));
        }
        let (host, port) = split_host_port(s).map_err(fault)?;
        let (host, wildcard) = match host.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (host, false),
        };
        let host = normalize(host);
        if !valid_host(&host) {
            return Err(fault(PatternFault::BadHost));
        }
        Ok(HostPattern {
            host,
            wildcard,
            port,
        })
    }

    /// Whether a connection to `host:port` is allowed by this entry.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = normalize(host.trim_start_matches('[').trim_end_matches(']'));
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Whether `host:port` is allowed by any of `patterns`.
pub fn allowed(patterns: &[HostPattern], host: &str, port: u16) -> bool {
    patterns.iter().any(|p| p.matches(host, port))
}

fn normalize(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// `host[:port]` or `[v6][:port]`.
fn split_host_port(s: &str) -> Result<(&str, Option<u16>), PatternFault> {
    let bad_port = |p: &str| PatternFault::BadPort(p.to_string());
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad_port(p))
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(PatternFault::UnclosedBracket)?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(port(p)?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(PatternFault::AfterAddress(after.to_string())),
        };
    }
    match s.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Ok((s, None)),
        Some((host, p)) => Ok((host, Some(port(p)?))),
        None => Ok((s, None)),
    }
}

fn valid_host(host: &str) -> bool {
    if host.is_empty() || host.len() > MAX_HOST {
        return false;
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn exact_names_match_any_port_unless_one_is_given() {
        assert!(p("API.example.com.").matches("api.example.com", 443));
        assert!(p("api.example.com").matches("Api.Example.Com.", 80));
        assert!(!p("api.example.com").matches("example.com", 443));
        assert!(!p("api.example.com").matches("xapi.example.com", 443));
        assert!(p("api.example.com:443").matches("api.example.com", 443));
        assert!(!p("api.example.com:443").matches("api.example.com", 80));
    }

    #[test]
    fn a_wildcard_matches_names_below_its_domain_only() {
        let w = p("*.example.com");
        assert!(w.matches("a.example.com", 443));
        assert!(w.matches("a.b.example.com", 1));
        assert!(!w.matches("example.com", 443));
        assert!(!w.matches("badexample.com", 443));
        assert!(!w.matches("example.com.evil.org", 443));
    }

    #[test]
    fn addresses_are_exact() {
        assert!(p("127.0.0.1:8080").matches("127.0.0.1", 8080));
        assert!(!p("127.0.0.1:8080").matches("127.0.0.2", 8080));
        assert!(p("[::1]:80").matches("[::1]", 80));
        assert!(p("::1").matches("::1", 9));
        assert_eq!(p("[::1]:80").to_string(), "[::1]:80");
        assert_eq!(p("*.Example.com:443").to_string(), "*.example.com:443");
    }

    #[test]
    fn malformed_entries_are_refused_with_the_reason() {
        for bad in [
            "",
            "https://api.example.com",
            "api.example.com/v1",
            "host:0",
            "host:99999",
            "host:http",
            "*",
            "*.",
            "a..b",
            "-a.com",
            "sp ace.com",
            "[::1",
            "[::1]x",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?}");
        }
        let e = HostPattern::parse("https://x.org").unwrap_err().to_string();
        assert!(e.contains("without a scheme"), "{e}");
    }
}
