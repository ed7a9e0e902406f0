//! The `bwrap` command line of one sandboxed process.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::SandboxError;
use super::{Network, Sandbox};

/// System directories mounted read-only (a symlink, as on merged-`/usr` systems, is recreated
/// as the same symlink).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Files of `/etc` that hold secrets: masked with an empty file.
const ETC_SECRET_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
];

/// Directories of `/etc` that hold secrets: masked with an empty read-only directory.
const ETC_SECRET_DIRS: &[&str] = &["/etc/sudoers.d", "/etc/ssl/private"];

/// Variables that would point the agent back at the daemon's directories.
const UNSET: &[&str] = &[
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];

struct Args {
    out: Vec<OsString>,
    /// Sources mounted so far, to decide which hidden paths need a mask.
    mounted: Vec<PathBuf>,
}

impl Args {
    fn push(&mut self, words: &[&str]) {
        self.out.extend(words.iter().map(OsString::from));
    }

    fn path(&mut self, p: &Path) {
        self.out.push(p.as_os_str().to_os_string());
    }

    fn ro_bind(&mut self, p: &Path) {
        if self.mounted.iter().any(|m| p.starts_with(m)) {
            return;
        }
        self.push(&["--ro-bind"]);
        self.path(p);
        self.path(p);
        self.mounted.push(p.to_path_buf());
    }

    fn mask(&mut self, p: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        if meta.is_dir() {
            self.push(&["--tmpfs"]);
            self.path(p);
            self.push(&["--remount-ro"]);
            self.path(p);
        } else {
            self.push(&["--ro-bind", "/dev/null"]);
            self.path(p);
        }
    }
}

/// `bwrap`'s arguments (without the program name) that run `program args` in `workspace`
/// (`None`: no workspace, as the availability probe runs).
pub fn bwrap_argv(
    sb: &Sandbox,
    workspace: Option<&Path>,
    program: &str,
    args: &[String],
) -> Vec<OsString> {
    argv_with(sb, workspace, None, program, args)
}

/// What runs in front of the agent with `network: allowlist`: sortie's own binary and the
/// proxy's socket, both outside paths bound at fixed places inside.
struct Forwarder<'a> {
    exe: &'a Path,
    socket: &'a Path,
}

/// Where sortie's binary is mounted inside the sandbox.
const INSIDE_EXE: &str = "/run/sortie/forward";

fn argv_with(
    sb: &Sandbox,
    workspace: Option<&Path>,
    forwarder: Option<Forwarder<'_>>,
    program: &str,
    args: &[String],
) -> Vec<OsString> {
    let mut a = Args {
        out: Vec::new(),
        mounted: Vec::new(),
    };
    a.push(&[
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
    ]);
    if sb.network != Network::Host {
        a.push(&["--unshare-net"]);
    }
    // bwrap applies mounts in order: the private /tmp and /var/tmp come first, so an agent
    // program or a workspace that lives under them is bound on top, not hidden.
    a.push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    a.push(&["--tmpfs", "/var/tmp", "--setenv", "TMPDIR", "/tmp"]);
    system(&mut a);
    for dir in install_dirs(program, args) {
        a.ro_bind(&dir);
    }
    for p in &sb.read_only {
        if p.exists() {
            a.ro_bind(p);
        }
    }
    for p in &sb.read_write {
        if p.exists() {
            a.push(&["--bind"]);
            a.path(p);
            a.path(p);
            a.mounted.push(p.clone());
        }
    }
    for p in &sb.hide {
        if a.mounted.iter().any(|m| p.starts_with(m)) {
            a.mask(p);
        }
    }
    for v in UNSET {
        a.push(&["--unsetenv", v]);
    }
    if let Some(ws) = workspace {
        a.push(&["--bind"]);
        a.path(ws);
        a.path(ws);
        a.push(&["--setenv", "HOME"]);
        a.path(&Sandbox::home_in(ws));
        a.push(&["--chdir"]);
        a.path(ws);
    }
    if let Some(f) = forwarder {
        a.push(&["--ro-bind"]);
        a.path(f.exe);
        a.push(&[INSIDE_EXE, "--bind"]);
        a.path(f.socket);
        a.path(super::proxy::inside_socket());
        a.push(&["--", INSIDE_EXE, super::forward::FORWARD]);
        a.path(super::proxy::inside_socket());
        a.push(&["--"]);
        a.push(&[program]);
    } else {
        a.push(&["--", program]);
    }
    a.out.extend(args.iter().map(OsString::from));
    a.out
}

/// The read-only system view: the `SYSTEM` directories, `/etc` with its secrets masked and a
/// resolver configuration that lives elsewhere (a `/run` stub) mounted where it points.
fn system(a: &mut Args) {
    for s in SYSTEM {
        let p = Path::new(s);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    a.push(&["--symlink"]);
                    a.path(&target);
                    a.path(p);
                }
            }
            Ok(m) if m.is_dir() => a.ro_bind(p),
            _ => {}
        }
    }
    a.ro_bind(Path::new("/etc"));
    for f in ETC_SECRET_FILES {
        a.mask(Path::new(f));
    }
    for d in ETC_SECRET_DIRS {
        a.mask(Path::new(d));
    }
    for key in ssh_host_keys() {
        a.mask(&key);
    }
    if let Ok(resolv) = std::fs::canonicalize("/etc/resolv.conf")
        && !a.mounted.iter().any(|m| resolv.starts_with(m))
    {
        a.push(&["--ro-bind-try"]);
        a.path(&resolv);
        a.path(&resolv);
    }
}

/// The SSH server's private host keys (`/etc/ssh/ssh_host_*_key`).
fn ssh_host_keys() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/etc/ssh") else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"))
        })
        .collect()
}

/// The directories the agent program lives in: the one it is called from and the one its
/// symlinks resolve to; the same for an argument that is an absolute path to an executable
/// file (`env VAR=x /opt/agent/bin/agent`).
fn install_dirs(program: &str, args: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let candidates = std::iter::once(program).chain(
        args.iter()
            .map(String::as_str)
            .filter(|a| a.starts_with('/') && executable_file(Path::new(a))),
    );
    for c in candidates {
        let p = Path::new(c);
        if !p.is_absolute() {
            continue;
        }
        let real = std::fs::canonicalize(p).ok();
        for file in symlink_hops(p).into_iter().chain(real) {
            if let Some(dir) = file.parent()
                && dir != Path::new("/")
                && !out.iter().any(|d: &PathBuf| d == dir)
            {
                out.push(dir.to_path_buf());
            }
        }
    }
    out
}

/// `p` and each path its symlinks name on the way to the file, as written (not resolved
/// further): a relative link such as `node_modules/.bin/x -> ../pkg/bin/x` must find its
/// target at that path inside the sandbox too.
fn symlink_hops(p: &Path) -> Vec<PathBuf> {
    let mut hops = vec![p.to_path_buf()];
    let mut cur = p.to_path_buf();
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&cur) else {
            break;
        };
        cur = lexical(&match cur.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        });
        hops.push(cur.clone());
    }
    hops
}

/// `p` with `.` and `..` components folded away without resolving symlinks.
fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A `bwrap` command that runs `program args` in `workspace` under `sb`, its private home
/// created and seeded. The caller sets the environment, stdio and process group as for an
/// unsandboxed process; `bwrap` passes the environment on.
///
/// With `network: allowlist` a proxy for this process starts here (labelled from `env`'s
/// session variables) and ends with the sandbox (`proxy`).
pub fn wrap_command(
    sb: &Sandbox,
    program: &str,
    args: &[String],
    workspace: &Path,
    env: Option<&[(OsString, OsString)]>,
) -> Result<Command, SandboxError> {
    let bwrap = super::find_bwrap().ok_or(SandboxError::NotInstalled)?;
    super::home::prepare(sb, workspace)?;
    let mut cmd = Command::new(bwrap);
    let argv = if sb.network == Network::Allowlist {
        let exe = std::env::current_exe()
            .map_err(|e| SandboxError::setup("sortie's own binary (the network forwarder)", e))?;
        let socket = super::proxy::start(sb.allow_hosts.clone(), labels(env))?;
        let f = Forwarder {
            exe: &exe,
            socket: &socket,
        };
        argv_with(sb, Some(workspace), Some(f), program, args)
    } else {
        bwrap_argv(sb, Some(workspace), program, args)
    };
    cmd.args(argv).current_dir(workspace);
    Ok(cmd)
}

/// The session's labels from its environment (`agent::env`'s session variables).
fn labels(env: Option<&[(OsString, OsString)]>) -> super::proxy::Labels {
    let get = |name: &str| {
        env.unwrap_or_default()
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string_lossy().into_owned())
    };
    super::proxy::Labels {
        issue_id: get("SORTIE_ISSUE_ID").unwrap_or_default(),
        issue_identifier: get("SORTIE_ISSUE_IDENTIFIER").unwrap_or_default(),
        session_id: get("SORTIE_SESSION_ID").unwrap_or_default(),
        attempt: get("SORTIE_ATTEMPT").and_then(|a| a.parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_workspace_is_bound_read_write_after_the_private_tmp() {
        let sb = Sandbox::default();
        let w = words(&bwrap_argv(
            &sb,
            Some(Path::new("/tmp/ws/A-1")),
            "/bin/true",
            &[],
        ));
        let tmp = w.iter().position(|s| s == "/tmp").unwrap_or(usize::MAX);
        let bind = w.iter().position(|s| s == "--bind").unwrap_or(0);
        assert!(tmp < bind, "{w:?}");
        assert_eq!(w[bind + 1], "/tmp/ws/A-1");
        assert!(w.contains(&"/tmp/ws/A-1/.sortie/home".to_string()));
        assert!(!w.contains(&"--unshare-net".to_string()));
        assert_eq!(w[w.len() - 1], "/bin/true");
    }

    #[test]
    fn a_program_under_tmp_is_bound_after_the_private_tmp() {
        let dir = Path::new("/tmp").join(format!("sortie-argv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = dir.join("agent");
        std::fs::write(&program, "").unwrap();
        let w = words(&bwrap_argv(
            &Sandbox::default(),
            None,
            &program.to_string_lossy(),
            &[],
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let tmp = w.iter().position(|s| s == "/tmp").unwrap_or(usize::MAX);
        let bound = w
            .iter()
            .position(|s| *s == dir.to_string_lossy())
            .unwrap_or(0);
        assert!(tmp < bound, "{w:?}");
    }

    #[test]
    fn network_none_unshares_the_network() {
        let sb = Sandbox {
            network: Network::None,
            ..Sandbox::default()
        };
        let w = words(&bwrap_argv(&sb, None, "true", &[]));
        assert!(w.contains(&"--unshare-net".to_string()));
    }

    #[test]
    fn a_hidden_path_under_a_mounted_directory_is_masked() {
        let dir = std::env::temp_dir().join(format!("sortie-sb-argv-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let agent = dir.join("agent");
        let env = dir.join(".env");
        let _ = std::fs::write(&agent, "#!/bin/sh\n");
        let _ = std::fs::write(&env, "SORTIE_X=1\n");
        let sb = Sandbox {
            hide: vec![env.clone(), PathBuf::from("/nowhere/db.sqlite")],
            ..Sandbox::default()
        };
        let w = words(&bwrap_argv(&sb, None, &agent.to_string_lossy(), &[]));
        let env_s = env.to_string_lossy().into_owned();
        let i = w.iter().position(|s| *s == env_s).unwrap_or(0);
        assert_eq!(w[i - 1], "/dev/null", "{w:?}");
        assert!(!w.contains(&"/nowhere/db.sqlite".to_string()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
