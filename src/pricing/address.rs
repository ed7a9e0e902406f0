//! A download address as the API serves it: scheme, host and path only, so a credential in the
//! user part or a token in the query of the setting never leaves Sortie.

/// The served form of `url`; `None` when it is not an `http` or `https` address with a host.
pub fn served_address(url: &str) -> Option<String> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let host = strip_port(host_port)?;
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None;
    }
    let tail = &rest[end..];
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let path = &tail[..path_end];
    let path = if path.is_empty() { "/" } else { path };
    Some(format!("{scheme}://{}{path}", host.to_ascii_lowercase()))
}

fn strip_port(host_port: &str) -> Option<&str> {
    if let Some(v6) = host_port.strip_prefix('[') {
        let close = v6.find(']')?;
        return Some(&host_port[..close + 2]);
    }
    let host = match host_port.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        Some(_) => return None,
        None => host_port,
    };
    Some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_ports_and_queries_never_reach_the_served_address() {
        assert_eq!(
            served_address("https://user:tok@Example.com:8443/a/p.json?key=s3cret#x").as_deref(),
            Some("https://example.com/a/p.json")
        );
        assert_eq!(
            served_address("http://127.0.0.1:9/").as_deref(),
            Some("http://127.0.0.1/")
        );
        assert_eq!(
            served_address("https://h.example").as_deref(),
            Some("https://h.example/")
        );
        assert_eq!(
            served_address("http://[::1]:80/x").as_deref(),
            Some("http://[::1]/x")
        );
    }

    #[test]
    fn an_address_that_does_not_parse_is_none() {
        for bad in [
            "",
            "ftp://h/x",
            "h/x",
            "https:///x",
            "https://h:port/x",
            "https://a b/",
        ] {
            assert_eq!(served_address(bad), None, "{bad}");
        }
    }
}
