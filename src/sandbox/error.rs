//! Why a sandbox could not be set up or started, why an `allow_hosts` entry is refused, and why
//! the proxy refused a request's head.

use std::fmt;
use std::path::PathBuf;

use super::PACKAGE_HINT;

/// A sandbox that cannot be set up or started (the spawn fails; the agent never runs
/// unsandboxed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxError {
    /// No `bwrap` on `PATH` nor at `/usr/bin/bwrap`.
    NotInstalled,
    /// `bwrap` could not be run, or ran and refused (its stderr, capped, in `detail`).
    CannotStart { bwrap: PathBuf, detail: String },
    /// `bwrap` did not finish the readiness check within `secs`.
    Timeout { bwrap: PathBuf, secs: u64 },
    /// A file or directory the sandbox needs: the private home, a proxy socket, the check's
    /// scratch workspace.
    Io { path: PathBuf, detail: String },
    /// Something else the setup needs: a thread, a random name, sortie's own binary, the relay.
    Setup { what: &'static str, detail: String },
    /// No check has finished yet for this configuration.
    Checking,
}

impl SandboxError {
    pub(crate) fn io(path: impl Into<PathBuf>, e: impl fmt::Display) -> SandboxError {
        SandboxError::Io {
            path: path.into(),
            detail: e.to_string(),
        }
    }

    pub(crate) fn setup(what: &'static str, e: impl fmt::Display) -> SandboxError {
        SandboxError::Setup {
            what,
            detail: e.to_string(),
        }
    }
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxError::NotInstalled => {
                write!(f, "bwrap was not found in PATH; {PACKAGE_HINT}")
            }
            SandboxError::CannotStart { bwrap, detail } => write!(
                f,
                "{} cannot start a sandbox: {detail}; {PACKAGE_HINT}, and allow unprivileged user namespaces or run as root",
                bwrap.display()
            ),
            SandboxError::Timeout { bwrap, secs } => write!(
                f,
                "{} did not finish a trivial sandbox within {secs} s",
                bwrap.display()
            ),
            SandboxError::Io { path, detail } => write!(f, "{}: {detail}", path.display()),
            SandboxError::Setup { what, detail } => write!(f, "{what}: {detail}"),
            SandboxError::Checking => f.write_str("the sandbox is still being checked"),
        }
    }
}

impl std::error::Error for SandboxError {}

/// An `allow_hosts` entry that is not a host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPatternError {
    /// The entry as written.
    pub entry: String,
    pub reason: PatternFault,
}

/// What is wrong with an `allow_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternFault {
    /// A URL (scheme or path) instead of a host.
    NotAHost,
    /// Not a host name, an address, or `*.` and a domain.
    BadHost,
    /// The port is not 1-65535.
    BadPort(String),
    /// `[` without `]`.
    UnclosedBracket,
    /// Text after `]` that is not `:port`.
    AfterAddress(String),
}

impl fmt::Display for HostPatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.entry;
        match &self.reason {
            PatternFault::NotAHost => write!(
                f,
                "{s:?} is not a host pattern (write a host name such as api.example.com, \
                 *.example.com or host:443, without a scheme or path)"
            ),
            PatternFault::BadHost => write!(
                f,
                "{s:?} is not a host pattern (a host name, an IP address, or *. followed by a \
                 domain, optionally with :port)"
            ),
            PatternFault::BadPort(p) => write!(f, "{s:?}: {p:?} is not a port (1-65535)"),
            PatternFault::UnclosedBracket => {
                write!(f, "{s:?}: an unclosed [ in an IPv6 address")
            }
            PatternFault::AfterAddress(a) => {
                write!(f, "{s:?}: unexpected {a:?} after the address")
            }
        }
    }
}

impl std::error::Error for HostPatternError {}

/// Why the proxy answered a request with 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The head exceeds the cap (bytes).
    HeadTooLarge(usize),
    /// The connection ended inside the head.
    Truncated,
    /// Reading the head failed.
    Read(String),
    NotUtf8,
    MalformedLine(String),
    UnsupportedVersion(String),
    /// Neither `CONNECT host:port` nor an absolute `http://` URI.
    NotProxyTarget(String),
    /// Not `host:port`.
    BadAuthority(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::HeadTooLarge(max) => write!(f, "request head over {max} bytes"),
            RequestError::Truncated => f.write_str("the request ended before its head did"),
            RequestError::Read(e) => write!(f, "reading the request: {e}"),
            RequestError::NotUtf8 => f.write_str("the request head is not UTF-8"),
            RequestError::MalformedLine(l) => write!(f, "malformed request line {l:?}"),
            RequestError::UnsupportedVersion(v) => write!(f, "unsupported version {v:?}"),
            RequestError::NotProxyTarget(t) => write!(
                f,
                "{t:?}: the proxy takes CONNECT host:port or an absolute http:// URI"
            ),
            RequestError::BadAuthority(s) => write!(f, "{s:?} is not host:port"),
        }
    }
}

impl std::error::Error for RequestError {}
