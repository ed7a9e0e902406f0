//! The `Host` rule against DNS rebinding: a page on `http://evil.example:7678` whose name is
//! made to resolve to 127.0.0.1 is same-origin with itself, so the cross-origin rule
//! ([`super::origin`]) lets it through; only the `Host` header it sends betrays it.
//!
//! - Bound to a loopback address (the default), `Host` must name `localhost`, `127.0.0.1`,
//!   `[::1]` or the bound address, with or without a port; anything else is refused with 403
//!   `host_not_allowed`.
//! - Bound to any other address, `Host` is not restricted (probes and proxies use whatever
//!   name they reach sortie by) unless `server.allowed_hosts` lists names; then those names,
//!   the loopback names and the bound address are accepted.
//! - A request without `Host` is served on HTTP/1.0 (no browser omits it, so no rebinding
//!   page can) and refused with 400 `missing_host` on HTTP/1.1, which requires it (RFC 9112
//!   §3.2).

use std::net::IpAddr;

const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// Which `Host` names are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPolicy {
    Any,
    /// Lower-case names without port.
    Only(Vec<String>),
}

/// What the rule decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostDecision {
    Served,
    /// HTTP/1.1 without a `Host` header.
    Missing,
    NotAllowed,
}

impl HostPolicy {
    pub fn for_bind(ip: IpAddr, allowed_hosts: &[String]) -> HostPolicy {
        if allowed_hosts.is_empty() && !ip.is_loopback() {
            return HostPolicy::Any;
        }
        let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect();
        names.push(match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        });
        names.extend(allowed_hosts.iter().map(|h| h.to_ascii_lowercase()));
        names.sort();
        names.dedup();
        HostPolicy::Only(names)
    }

    pub fn check(&self, host: Option<&str>, http_1_0: bool) -> HostDecision {
        let Some(host) = host else {
            return if http_1_0 {
                HostDecision::Served
            } else {
                HostDecision::Missing
            };
        };
        match self {
            HostPolicy::Any => HostDecision::Served,
            HostPolicy::Only(names) => match host_name(host) {
                Some(name) if names.contains(&name) => HostDecision::Served,
                _ => HostDecision::NotAllowed,
            },
        }
    }
}

/// `name[:port]` or `[v6][:port]` → the lower-case name (a trailing dot dropped); `None` when
/// the port is not decimal digits or the text is not a host.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        (&host[..=end], &host[end + 1..])
    } else {
        match host.split_once(':') {
            Some((n, _)) => (n, &host[n.len()..]),
            None => (host, ""),
        }
    };
    if !port.is_empty() {
        let digits = port.strip_prefix(':')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return None;
    }
    Some(name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HostPolicy {
        HostPolicy::for_bind(IpAddr::from([127, 0, 0, 1]), &[])
    }

    #[test]
    fn loopback_bind_serves_loopback_names_with_or_without_port() {
        let p = loopback();
        for h in [
            "127.0.0.1",
            "127.0.0.1:7678",
            "localhost",
            "LOCALHOST:7678",
            "localhost.:1",
            "[::1]",
            "[::1]:7678",
        ] {
            assert_eq!(p.check(Some(h), false), HostDecision::Served, "{h}");
        }
    }

    #[test]
    fn loopback_bind_refuses_other_names() {
        let p = loopback();
        for h in [
            "evil.example:7678",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "127.0.0.1:x",
            "127.0.0.1:",
            "[::1",
            "",
            "[::2]:7678",
        ] {
            assert_eq!(p.check(Some(h), false), HostDecision::NotAllowed, "{h}");
        }
    }

    #[test]
    fn missing_host_is_served_on_http_1_0_only() {
        assert_eq!(loopback().check(None, true), HostDecision::Served);
        assert_eq!(loopback().check(None, false), HostDecision::Missing);
        assert_eq!(HostPolicy::Any.check(None, false), HostDecision::Missing);
    }

    #[test]
    fn other_binds_are_unrestricted_unless_names_are_listed() {
        let any = HostPolicy::for_bind(IpAddr::from([0, 0, 0, 0]), &[]);
        assert_eq!(any, HostPolicy::Any);
        assert_eq!(any.check(Some("whatever:1"), false), HostDecision::Served);
        let listed = HostPolicy::for_bind(
            IpAddr::from([10, 0, 0, 5]),
            &["sortie.internal".to_string()],
        );
        assert_eq!(
            listed.check(Some("Sortie.Internal:7678"), false),
            HostDecision::Served
        );
        assert_eq!(
            listed.check(Some("10.0.0.5:7678"), false),
            HostDecision::Served
        );
        assert_eq!(listed.check(Some("localhost"), false), HostDecision::Served);
        assert_eq!(
            listed.check(Some("evil.example"), false),
            HostDecision::NotAllowed
        );
    }

    #[test]
    fn the_bound_address_is_allowed() {
        let p = HostPolicy::for_bind("::1".parse().unwrap_or(IpAddr::from([0; 16])), &[]);
        assert_eq!(p.check(Some("[::1]:9"), false), HostDecision::Served);
        let p = HostPolicy::for_bind(IpAddr::from([127, 0, 0, 2]), &[]);
        assert_eq!(p.check(Some("127.0.0.2:9"), false), HostDecision::Served);
    }
}
