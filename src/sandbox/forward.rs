//! The inside of `network: allowlist`: sortie's own binary, bound read-only into the sandbox,
//! in two hidden modes.
//!
//! - [`FORWARD`] `<socket> -- <program> <args…>`: starts the relay, reads the loopback port
//!   it listens on, points the proxy variables at it (`HTTPS_PROXY`, `HTTP_PROXY` and their
//!   lower-case forms; `NO_PROXY` empty, so loopback goes through the proxy too) and execs the
//!   agent in its own place: the agent keeps the process id, group and parent the sandbox gave
//!   the forwarder, so stopping works as without the proxy.
//! - [`RELAY`] `<socket>`: holds the proxy open ([`super::proxy::HOLD`]), listens on
//!   `127.0.0.1`, and copies each connection to the proxy's socket. It dies with the agent
//!   (parent-death signal), and with the sandbox's PID namespace in any case, so it does not
//!   carry the turn's token.
//!
//! A relay that cannot reach the proxy fails the start: the agent never runs with a network
//! sortie does not filter (it has none at all in its own namespace).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::SandboxError;

/// The hidden argument of the forwarder mode.
pub const FORWARD: &str = "__sandbox-forward";
/// The hidden argument of the relay mode.
pub const RELAY: &str = "__sandbox-relay";
/// Connections the relay carries at once.
const MAX_CONNECTIONS: usize = 256;
/// The variables pointed at the relay.
const PROXY_VARS: &[&str] = &["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"];
const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// Runs a hidden mode when `args` (without the program name) names one; `None` otherwise.
pub fn run_hidden(args: &[OsString]) -> Option<i32> {
    let first = args.first()?;
    if first == FORWARD {
        Some(forward(&args[1..]))
    } else if first == RELAY {
        Some(relay(&args[1..]))
    } else {
        None
    }
}

fn forward(args: &[OsString]) -> i32 {
    let (socket, program, rest) = match args {
        [socket, sep, program, rest @ ..] if sep == "--" => (socket, program, rest),
        _ => {
            eprintln!("sortie {FORWARD}: expected <socket> -- <program> [args…]");
            return 2;
        }
    };
    let port = match start_relay(socket) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("sortie sandbox: the network relay did not start: {e}");
            return 1;
        }
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(program);
    cmd.args(rest);
    for v in PROXY_VARS {
        cmd.env(v, &url);
    }
    for v in NO_PROXY_VARS {
        cmd.env(v, "");
    }
    let e = cmd.exec();
    eprintln!("sortie sandbox: {}: {e}", program.to_string_lossy());
    if e.kind() == ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Starts the relay as a child and returns the port it announced.
fn start_relay(socket: &OsStr) -> Result<u16, SandboxError> {
    let exe = std::env::current_exe().map_err(|e| SandboxError::setup("own binary", e))?;
    // The relay is sortie's, not the agent's: without the turn's token, the turn's end does
    // not take it for an agent process that escaped (it dies with the sandbox regardless).
    let mut child = Command::new(exe)
        .arg(RELAY)
        .arg(socket)
        .env_remove(crate::process_signal::orphans::TOKEN_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| SandboxError::setup("relay", e))?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| SandboxError::setup("relay", "no stdout"))?;
    let mut line = String::new();
    let _ = BufReader::new(std::io::Read::take(out, 16)).read_line(&mut line);
    line.trim().parse::<u16>().map_err(|_| {
        let _ = child.kill();
        let _ = child.wait();
        SandboxError::setup("relay", "it exited before it listened")
    })
}

fn relay(args: &[OsString]) -> i32 {
    let [socket] = args else {
        eprintln!("sortie {RELAY}: expected <socket>");
        return 2;
    };
    let parent = rustix::process::getppid();
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .is_err()
        || rustix::process::getppid() != parent
    {
        return 1;
    }
    let hold = UnixStream::connect(socket).and_then(|mut s| {
        s.write_all(format!("{}\r\n\r\n", super::proxy::HOLD).as_bytes())
            .map(|()| s)
    });
    let _hold = match hold {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "sortie sandbox: the proxy socket {}: {e}",
                socket.to_string_lossy()
            );
            return 1;
        }
    };
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sortie sandbox: listening on 127.0.0.1: {e}");
            return 1;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut out = std::io::stdout();
    if writeln!(out, "{port}").and_then(|()| out.flush()).is_err() {
        return 1;
    }
    let active = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (socket, done) = (socket.clone(), active.clone());
        let spawned = std::thread::Builder::new().spawn(move || {
            carry(conn, &socket);
            done.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
    0
}

/// Copies one loopback connection to and from the proxy's socket; the proxy enforces the
/// deadlines.
fn carry(conn: TcpStream, socket: &OsStr) {
    let Ok(proxy) = UnixStream::connect(socket) else {
        let _ = conn.shutdown(Shutdown::Both);
        return;
    };
    let (Ok(mut c_read), Ok(mut p_write)) = (conn.try_clone(), proxy.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut p_write);
        let _ = p_write.shutdown(Shutdown::Write);
    });
    let (mut p_read, mut c_write) = (proxy, conn);
    let _ = std::io::copy(&mut p_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = up.join();
}
