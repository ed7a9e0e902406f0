//! Why the fake agent cannot play an invocation: printed to stderr before it exits non-zero,
//! as the real CLIs do.

/// One refusal, with what it is about.
#[derive(Debug)]
pub enum FakeError {
    /// An argument the real CLI would refuse, worded as the CLI's message.
    Usage(String),
    /// Stdin could not be read (`what` was being read).
    Stdin(&'static str, std::io::Error),
    /// The scenario file could not be read.
    Scenario(std::io::Error),
    /// A scenario line (1-based) is not JSON.
    Line(usize, serde_json::Error),
}

impl std::fmt::Display for FakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FakeError::Usage(m) => f.write_str(m),
            FakeError::Stdin(what, e) => write!(f, "reading {what}: {e}"),
            FakeError::Scenario(e) => write!(f, "{e}"),
            FakeError::Line(n, e) => write!(f, "line {n}: {e}"),
        }
    }
}

impl std::error::Error for FakeError {}
