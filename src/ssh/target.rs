//! One `worker.ssh_hosts` entry: `host`, `user@host`, `host:port`, `user@host:port` or
//! `[v6-address]:port`. The port becomes `-p`; the rest is handed to `ssh` as the destination
//! (so `~/.ssh/config` host aliases work).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshTarget {
    written: String,
    /// `user@host` or `host`, as `ssh` takes it.
    pub destination: String,
    pub port: Option<u16>,
}

/// Why an entry is not a usable destination; the text ends a config error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl SshTarget {
    pub fn parse(entry: &str) -> Result<SshTarget, TargetError> {
        let written = entry.trim();
        if written.is_empty() {
            return Err(TargetError("empty host".into()));
        }
        if written.starts_with('-') {
            return Err(TargetError(format!(
                "{written:?} starts with '-' (it would be read as an ssh option)"
            )));
        }
        if let Some(c) = written
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || "'\"`$;&|<>\\".contains(*c))
        {
            return Err(TargetError(format!(
                "{written:?} contains {c:?}, which no host name or user name has"
            )));
        }
        let (user, host_port) = match written.rsplit_once('@') {
            Some((u, rest)) if !u.is_empty() => (Some(u), rest),
            Some(_) => return Err(TargetError(format!("{written:?} has an empty user"))),
            None => (None, written),
        };
        let (host, port) = split_port(host_port, written)?;
        if host.is_empty() {
            return Err(TargetError(format!("{written:?} has an empty host")));
        }
        let destination = match user {
            Some(u) => format!("{u}@{host}"),
            None => host.to_string(),
        };
        Ok(SshTarget {
            written: written.to_string(),
            destination,
            port,
        })
    }

    /// The entry as written (trimmed).
    pub fn as_written(&self) -> &str {
        &self.written
    }
}

fn split_port<'a>(s: &'a str, written: &str) -> Result<(&'a str, Option<u16>), TargetError> {
    let bad_port =
        |p: &str| TargetError(format!("{written:?} has port {p:?} (expected 1 to 65535)"));
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest
            .split_once(']')
            .ok_or_else(|| TargetError(format!("{written:?} opens '[' without closing it")))?;
        return match after {
            "" => Ok((addr, None)),
            p => {
                let p = p.strip_prefix(':').ok_or_else(|| bad_port(p))?;
                Ok((addr, Some(port(p).ok_or_else(|| bad_port(p))?)))
            }
        };
    }
    match s.split_once(':') {
        // More than one ':' is a bare IPv6 address without a port.
        Some((_, rest)) if rest.contains(':') => Ok((s, None)),
        Some((h, p)) => Ok((h, Some(port(p).ok_or_else(|| bad_port(p))?))),
        None => Ok((s, None)),
    }
}

fn port(p: &str) -> Option<u16> {
    p.parse::<u16>().ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> (String, Option<u16>) {
        let t = SshTarget::parse(s).unwrap();
        (t.destination, t.port)
    }

    #[test]
    fn entries_split_into_destination_and_port() {
        assert_eq!(ok("build1"), ("build1".into(), None));
        assert_eq!(ok(" ci@build1 "), ("ci@build1".into(), None));
        assert_eq!(ok("build1:2222"), ("build1".into(), Some(2222)));
        assert_eq!(ok("ci@127.0.0.1:22"), ("ci@127.0.0.1".into(), Some(22)));
        assert_eq!(ok("[::1]:2200"), ("::1".into(), Some(2200)));
        assert_eq!(ok("fe80::1"), ("fe80::1".into(), None));
        assert_eq!(SshTarget::parse(" a@b ").unwrap().as_written(), "a@b");
    }

    #[test]
    fn bad_entries_say_why() {
        for (s, want) in [
            ("", "empty host"),
            ("-oProxyCommand=x", "starts with '-'"),
            ("a b", "contains ' '"),
            ("h;rm", "contains ';'"),
            ("@h", "empty user"),
            ("u@", "empty host"),
            ("h:0", "port \"0\""),
            ("h:x", "port \"x\""),
            ("[::1", "without closing"),
        ] {
            let e = SshTarget::parse(s).unwrap_err().0;
            assert!(e.contains(want), "{s:?}: {e}");
        }
    }
}
