//! The command lines handed to `ssh`: POSIX quoting, the client argument vector, and the remote
//! command that starts an agent in its workspace as the leader of its own process group.

use super::SshHost;
use std::path::Path;

/// The file (relative to the remote workspace) holding the remote agent's process group id,
/// written by the remote shell before it `exec`s the agent.
pub const AGENT_PGID_FILE: &str = ".sortie/agent.pgid";

/// `s` as one POSIX shell word: wrapped in single quotes, each `'` written as `'\''`. A NUL
/// byte cannot cross a command line and becomes `_`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '\0' => out.push('_'),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Whether `name` can be an environment variable name on a remote command line (`env K=v`).
fn env_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `K='v' …` for `env`, skipping names that are not variable names (they would be read as the
/// program to run).
pub fn env_assignments(env: &[(String, String)]) -> String {
    let mut out = String::new();
    for (k, v) in env {
        if !env_name_ok(k) {
            log::warn!(name:% = k; "remote environment variable skipped, not a variable name");
            continue;
        }
        out.push(' ');
        out.push_str(k);
        out.push('=');
        out.push_str(&quote(v));
    }
    out
}

/// The remote command that runs an agent: enter the workspace, record the shell's pid (sshd
/// makes the remote shell a session and process group leader, and `exec` keeps the pid, so it
/// is the agent's process group) in [`AGENT_PGID_FILE`], then replace the shell with the agent
/// under `env`.
pub fn remote_agent_command(
    workspace: &Path,
    env: &[(String, String)],
    program: &str,
    args: &[String],
) -> String {
    let mut cmd = format!(
        "cd -- {} && mkdir -p .sortie && echo $$ > {AGENT_PGID_FILE} && exec env{} {}",
        quote(&workspace.to_string_lossy()),
        env_assignments(env),
        quote(program)
    );
    for a in args {
        cmd.push(' ');
        cmd.push_str(&quote(a));
    }
    cmd
}

impl SshHost {
    /// The arguments for program `ssh` that run `remote_command` on this host: the options
    /// (never interactive, bounded connect, keepalives), `-p` when the entry names a port, no
    /// pseudo-terminal, and `--` so the destination is never read as an option.
    pub fn argv(&self, remote_command: &str) -> Vec<String> {
        let o = &self.options;
        let mut v = Vec::with_capacity(20);
        if let Some(f) = &o.config_file {
            v.push("-F".to_string());
            v.push(f.to_string_lossy().into_owned());
        }
        for opt in [
            format!(
                "StrictHostKeyChecking={}",
                o.strict_host_key_checking.as_str()
            ),
            "BatchMode=yes".to_string(),
            format!("ConnectTimeout={}", o.connect_timeout_s),
            format!("ServerAliveInterval={}", o.server_alive_interval_s),
            format!("ServerAliveCountMax={}", o.server_alive_count_max),
        ] {
            v.push("-o".to_string());
            v.push(opt);
        }
        if let Some(p) = self.target.port {
            v.push("-p".to_string());
            v.push(p.to_string());
        }
        v.push("-T".to_string());
        v.push("--".to_string());
        v.push(self.target.destination.clone());
        v.push(remote_command.replace('\0', "_"));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh::{SshOptions, SshTarget, StrictHostKeyChecking};
    use std::path::PathBuf;
    use std::sync::Arc;

    fn host(entry: &str, options: SshOptions) -> SshHost {
        SshHost {
            target: SshTarget::parse(entry).unwrap(),
            options: Arc::new(options),
        }
    }

    #[test]
    fn quoting_wraps_and_escapes_single_quotes() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("$HOME `x` \"y\""), "'$HOME `x` \"y\"'");
        assert_eq!(quote("a\0b"), "'a_b'");
    }

    #[test]
    fn argv_with_defaults_and_no_port() {
        let h = host("ci@build1", SshOptions::default());
        assert_eq!(
            h.argv("true"),
            [
                "-o",
                "StrictHostKeyChecking=accept-new",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=30",
                "-o",
                "ServerAliveInterval=15",
                "-o",
                "ServerAliveCountMax=3",
                "-T",
                "--",
                "ci@build1",
                "true"
            ]
        );
    }

    #[test]
    fn argv_with_config_file_port_and_options() {
        let h = host(
            "build1:2222",
            SshOptions {
                strict_host_key_checking: StrictHostKeyChecking::Yes,
                config_file: Some(PathBuf::from("/etc/sortie/ssh_config")),
                connect_timeout_s: 5,
                server_alive_interval_s: 7,
                server_alive_count_max: 2,
            },
        );
        let v = h.argv("echo 'x'");
        assert_eq!(&v[..2], ["-F", "/etc/sortie/ssh_config"]);
        assert!(v.contains(&"StrictHostKeyChecking=yes".to_string()));
        assert!(v.contains(&"ConnectTimeout=5".to_string()));
        assert!(v.contains(&"ServerAliveInterval=7".to_string()));
        assert!(v.contains(&"ServerAliveCountMax=2".to_string()));
        let n = v.len();
        assert_eq!(
            &v[n - 6..],
            ["-p", "2222", "-T", "--", "build1", "echo 'x'"]
        );
    }

    #[test]
    fn agent_command_records_the_group_and_execs_under_env() {
        let cmd = remote_agent_command(
            Path::new("/w/it's here"),
            &[
                ("API_KEY".into(), "k$1".into()),
                ("bad name".into(), "x".into()),
            ],
            "/usr/bin/agent",
            &["-p".into(), "fix 'it'".into()],
        );
        assert_eq!(
            cmd,
            "cd -- '/w/it'\\''s here' && mkdir -p .sortie && echo $$ > .sortie/agent.pgid \
             && exec env API_KEY='k$1' '/usr/bin/agent' '-p' 'fix '\\''it'\\'''"
        );
    }
}
