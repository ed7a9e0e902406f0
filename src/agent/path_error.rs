//! Why a path in a workspace was refused or could not be read: the workspace as an agent's
//! cwd ([`super::process::verify_workspace`]) and the files under `.sortie/`
//! ([`super::sortie_file`]). The `Display` text is the one line logs, run errors and status
//! warnings show.

use std::fmt;
use std::path::PathBuf;

/// A refused or unreadable path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    pub path: PathBuf,
    pub problem: PathProblem,
}

/// What is wrong with the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    NotAbsolute,
    /// A symlink where a real directory or file is required.
    Symlink,
    NotDirectory,
    NotRegularFile,
    /// Larger than the reader's cap.
    TooLarge {
        len: u64,
        max: u64,
    },
    /// The file system's own error, as text.
    Io(String),
    /// The SSH host's answer for a workspace there, whole (it names the path itself).
    Host(String),
}

impl PathError {
    pub fn new(path: impl Into<PathBuf>, problem: PathProblem) -> PathError {
        PathError {
            path: path.into(),
            problem,
        }
    }

    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, e: &std::io::Error) -> PathError {
        PathError::new(path, PathProblem::Io(e.to_string()))
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.problem {
            PathProblem::NotAbsolute => write!(f, "{p} is not absolute"),
            PathProblem::Symlink => write!(f, "{p} is a symlink"),
            PathProblem::NotDirectory => write!(f, "{p} is not a directory"),
            PathProblem::NotRegularFile => write!(f, "{p} is not a regular file"),
            PathProblem::TooLarge { len, max } => {
                write!(f, "{p} is {len} bytes, over the {max}-byte limit")
            }
            PathProblem::Io(e) => write!(f, "{p}: {e}"),
            PathProblem::Host(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for PathError {}
