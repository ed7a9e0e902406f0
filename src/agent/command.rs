//! Resolving an agent command to the program that would run, like `which`: a program with a
//! `/` is taken as a path, otherwise the directories of `PATH` are searched in order. Used by
//! the claude-code adapter before each session and by startup preflight, `sortie validate`
//! and the per-tick dispatch preflight, so a missing or non-executable command is reported
//! before anything is dispatched, with the path that was tried.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a command does not resolve to a runnable program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandProblem {
    /// The command is empty or only whitespace.
    Empty,
    /// A path (the program contains `/`) that is not a file.
    NotFound { path: PathBuf },
    /// A bare name that no `PATH` directory holds as a file.
    NotOnPath { program: String, path_var: String },
    /// The file exists but has no execute bit.
    NotExecutable { path: PathBuf },
}

impl std::fmt::Display for CommandProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandProblem::Empty => f.write_str("agent command is empty"),
            CommandProblem::NotFound { path } => {
                write!(f, "agent command {} does not exist", path.display())
            }
            CommandProblem::NotOnPath { program, path_var } => write!(
                f,
                "agent command {program:?} was not found in PATH (searched: {path_var})"
            ),
            CommandProblem::NotExecutable { path } => {
                write!(f, "agent command {} is not executable", path.display())
            }
        }
    }
}

impl std::error::Error for CommandProblem {}

/// The program `command` runs (its first word), resolved; see the module doc.
pub fn resolve_command(command: &str) -> Result<PathBuf, CommandProblem> {
    let program = command
        .split_whitespace()
        .next()
        .ok_or(CommandProblem::Empty)?;
    let path_var = std::env::var("PATH").unwrap_or_default();
    resolve_program_in(program, &path_var)
}

/// [`resolve_command`]'s lookup of one program against an explicit `PATH` value.
pub fn resolve_program_in(program: &str, path_var: &str) -> Result<PathBuf, CommandProblem> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if path.is_file() {
            executable(path)
        } else {
            Err(CommandProblem::NotFound { path })
        };
    }
    let found = std::env::split_paths(path_var)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file());
    match found {
        Some(p) => executable(p),
        None => Err(CommandProblem::NotOnPath {
            program: program.to_string(),
            path_var: path_var.to_string(),
        }),
    }
}

fn executable(path: PathBuf) -> Result<PathBuf, CommandProblem> {
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(CommandProblem::NotExecutable { path })
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_names_and_modes_are_told_apart() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let exe = dir.path().join("agent");
        std::fs::write(&exe, "#!/bin/sh\n")?;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))?;
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "")?;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644))?;
        let path_var = dir.path().display().to_string();

        assert_eq!(resolve_program_in("agent", &path_var), Ok(exe.clone()));
        let exe_text = exe.display().to_string();
        assert_eq!(resolve_program_in(&exe_text, ""), Ok(exe.clone()));
        assert_eq!(
            resolve_program_in("plain", &path_var),
            Err(CommandProblem::NotExecutable {
                path: plain.clone()
            })
        );
        let missing = dir.path().join("missing");
        let missing_text = missing.display().to_string();
        let err = resolve_program_in(&missing_text, &path_var);
        assert_eq!(
            err,
            Err(CommandProblem::NotFound {
                path: missing.clone()
            })
        );
        assert!(
            err.err()
                .is_some_and(|e| e.to_string().contains(&missing_text))
        );
        let err = resolve_program_in("nope", &path_var);
        assert!(err.err().is_some_and(
            |e| e.to_string().contains("\"nope\"") && e.to_string().contains(&path_var)
        ));
        assert_eq!(resolve_command("  "), Err(CommandProblem::Empty));
        Ok(())
    }
}
