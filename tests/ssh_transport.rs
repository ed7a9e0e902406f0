//! The SSH transport against a real sshd on 127.0.0.1 (`common::sshd`): quoting through the
//! remote shell, remote scripts and file reads, agent turns over ssh (events, the remote
//! environment, cancellation leaving nothing on the host, connection failures), and hooks and
//! workspaces prepared on the host.

mod common;

use common::sshd::Sshd;
use sortie::ssh::{SshErrorKind, quote};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

macro_rules! sshd_or_skip {
    () => {
        match Sshd::start_or_skip() {
            Some(s) => s,
            None => return,
        }
    };
}

#[test]
fn hostile_strings_round_trip_through_the_remote_shell() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    for s in [
        "plain",
        "with spaces  and\ttabs",
        "it's 'quoted' \"twice\"",
        "$HOME ${PATH} $(id) `id` \\n \\",
        "line one\nline two\n",
        "; rm -rf / & | > < * ? [a] ~ #",
        "",
    ] {
        let out = host
            .run(&format!("printf '%s' {}", quote(s)), None, T)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.success(), "{s:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), s);
    }
}

#[test]
fn run_reports_exit_codes_output_and_stdin() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let out = host
        .run("cat; echo oops >&2; exit 3", Some(b"from stdin"), T)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.code, Some(3));
    assert_eq!(out.stdout, b"from stdin");
    assert_eq!(out.last_stderr_line().as_deref(), Some("oops"));
    // The remote side is a real sshd session.
    let out = host
        .run("printf %s \"$SSH_CONNECTION\"", None, T)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("127.0.0.1 "),
        "{out:?}"
    );
}

#[test]
fn run_kills_the_remote_group_at_its_deadline() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let pid_file = sshd.dir.path().join("bg.pid");
    let script = format!(
        "sleep 300 & echo $! > {}; wait",
        quote(&pid_file.to_string_lossy())
    );
    let err = host
        .run(&script, None, Duration::from_millis(1500))
        .unwrap_err();
    assert!(matches!(err.kind, SshErrorKind::Timeout(_)), "{err}");
    assert!(err.to_string().contains("sortie-test-host"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        common::poll(T, Duration::from_millis(20), || (!alive(pid)).then_some(())).is_some(),
        "remote background process {pid} outlived the deadline"
    );
}

#[test]
fn a_wrong_port_is_a_connection_failure_naming_the_host() {
    let sshd = sshd_or_skip!();
    let port = closed_port();
    let host = sshd.host_entry(&format!("127.0.0.1:{port}"));
    let err = host.run("true", None, T).unwrap_err();
    match &err.kind {
        SshErrorKind::Connection(line) => assert!(line.contains("refused"), "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn read_file_present_absent_symlinked_and_capped() {
    let sshd = sshd_or_skip!();
    let host = sshd.host();
    let d = sshd.dir.path().join("ws");
    let dot = d.join(".sortie");
    std::fs::create_dir_all(&dot).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dot.join("status"), "blocked\nwhy\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        host.read_file(&dot.join("status"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        Some(b"blocked\nwhy\n".to_vec())
    );
    assert_eq!(
        host.read_file(&dot.join("missing"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        None
    );
    assert_eq!(
        host.read_file(&d.join("no-dir").join("f"), 1024)
            .unwrap_or_else(|e| panic!("{e}")),
        None
    );
    // Over the cap.
    let err = host.read_file(&dot.join("status"), 4).unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("4-byte")),
        "{err}"
    );
    // A symlinked file.
    std::os::unix::fs::symlink("/etc/hostname", dot.join("link")).unwrap_or_else(|e| panic!("{e}"));
    let err = host.read_file(&dot.join("link"), 1024).unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("symlink")),
        "{err}"
    );
    // A symlinked `.sortie`.
    let other = sshd.dir.path().join("ws2");
    std::fs::create_dir_all(&other).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&dot, other.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    let err = host
        .read_file(&other.join(".sortie").join("status"), 1024)
        .unwrap_err();
    assert!(
        matches!(&err.kind, SshErrorKind::Refused(m) if m.contains("symlink")),
        "{err}"
    );
    // A directory is not a regular file.
    let err = host.read_file(&dot, 1024).unwrap_err();
    assert!(matches!(&err.kind, SshErrorKind::Refused(_)), "{err}");
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only a running process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// A port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}
