//! A real OpenSSH server on 127.0.0.1 for the SSH transport tests: Debian's `/usr/sbin/sshd`
//! in the foreground with a throwaway host key, a throwaway user key for the current user and
//! a client configuration file (passed as `-F`) that reaches it. Killed on drop.
//!
//! When sshd cannot be started, [`Sshd::start`] returns the reason; a test prints it and
//! returns, except under `CI`, where [`Sshd::start_or_skip`] fails the test instead.

use sortie::ssh::{SshHost, SshOptions, SshTarget, StrictHostKeyChecking};
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";
/// The `Host` alias of the client configuration.
pub const HOST_ALIAS: &str = "sortie-test-host";

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
    /// The client configuration (`-F`).
    pub client_config: PathBuf,
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

fn current_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            let out = Command::new("id").arg("-un").output().ok()?;
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "root".into())
}

impl Sshd {
    /// Starts sshd, or says why it cannot.
    pub fn start() -> Result<Sshd, String> {
        if !Path::new(SSHD).exists() {
            return Err(format!("{SSHD} is not installed (Debian openssh-server)"));
        }
        if Command::new("ssh").arg("-V").output().is_err() {
            return Err("no ssh client on PATH (Debian openssh-client)".into());
        }
        // sshd insists on its privilege-separation directory.
        if !Path::new("/run/sshd").exists() {
            std::fs::create_dir_all("/run/sshd").map_err(|e| format!("mkdir /run/sshd: {e}"))?;
        }
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let d = dir.path();
        for (key, what) in [("host_key", "host key"), ("user_key", "user key")] {
            run_ok(
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                    .arg(d.join(key)),
                &format!("ssh-keygen {what}"),
            )?;
        }
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))
            .map_err(|e| format!("authorized_keys: {e}"))?;
        let user = current_user();
        let mut last = String::new();
        // A port picked free can be taken before sshd binds it; try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let config = d.join("sshd_config");
            std::fs::write(
                &config,
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                     PidFile {}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nAllowUsers {user}\n\
                     LogLevel ERROR\n",
                    d.join("host_key").display(),
                    d.join("authorized_keys").display(),
                    d.join("sshd.pid").display(),
                ),
            )
            .map_err(|e| format!("sshd_config: {e}"))?;
            let client_config = d.join("ssh_config");
            std::fs::write(
                &client_config,
                format!(
                    "Host {HOST_ALIAS}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  \
                     IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  \
                     LogLevel ERROR\n",
                    d.join("user_key").display(),
                    d.join("known_hosts").display(),
                ),
            )
            .map_err(|e| format!("ssh_config: {e}"))?;
            let mut child = Command::new(SSHD)
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("spawn sshd: {e}"))?;
            let host = host_for(&client_config, HOST_ALIAS);
            match wait_ready(&mut child, &host, Duration::from_secs(20)) {
                Ok(()) => {
                    return Ok(Sshd {
                        dir,
                        port,
                        child,
                        client_config,
                    });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let mut err = String::new();
                    if let Some(mut s) = child.stderr.take() {
                        let _ = s.read_to_string(&mut err);
                    }
                    last = format!("{e}; sshd said: {}", err.trim());
                }
            }
        }
        Err(format!("sshd did not come up: {last}"))
    }

    /// [`Sshd::start`]; on failure prints the reason and returns `None`, or panics under `CI`.
    pub fn start_or_skip() -> Option<Sshd> {
        match Sshd::start() {
            Ok(s) => Some(s),
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("sshd is required under CI: {why}")
            }
            Err(why) => {
                eprintln!("skipped: {why}");
                None
            }
        }
    }

    /// The host as sortie names it: the alias, with the client configuration as `-F`.
    pub fn host(&self) -> SshHost {
        self.host_entry(HOST_ALIAS)
    }

    /// A host entry (`alias`, `alias:port`) with this server's client configuration.
    pub fn host_entry(&self, entry: &str) -> SshHost {
        host_for(&self.client_config, entry)
    }
}

fn host_for(client_config: &Path, entry: &str) -> SshHost {
    SshHost {
        target: SshTarget::parse(entry).unwrap_or_else(|e| panic!("{entry}: {e}")),
        options: Arc::new(SshOptions {
            strict_host_key_checking: StrictHostKeyChecking::AcceptNew,
            config_file: Some(client_config.to_path_buf()),
            connect_timeout_s: 10,
            server_alive_interval_s: 15,
            server_alive_count_max: 3,
        }),
    }
}

/// Polls `ssh … true` until it logs in (or sshd exits, or the deadline passes).
fn wait_ready(child: &mut Child, host: &SshHost, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("sshd exited {st}"));
        }
        let out = Command::new("ssh")
            .args(host.argv("true"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("ssh: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("no ssh login within {timeout:?}: {last}"))
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
