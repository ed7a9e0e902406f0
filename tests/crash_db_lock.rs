//! One daemon per database: a second sortie on the same `db_path` exits non-zero at once,
//! naming the database and the pid that holds its lock; `validate` and `--dry-run` never need
//! the lock; the lock is free again once the first daemon has stopped.

mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::Project;
use serde_json::json;

/// Runs sortie with `args` in the project; panics if it has not exited within `limit`.
fn run_bounded(p: &Project, args: &[&str], limit: Duration) -> Output {
    let mut child = common::sortie_command()
        .current_dir(p.dir.path())
        .args(args)
        .arg(p.workflow())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sortie");
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "sortie {args:?} still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_daemon_on_the_same_database_exits_naming_the_holder() {
    let p = Project::new();
    p.issues(json!([]));
    p.fake_agent_workflow("", "");
    let first = p.start();
    let first_pid = first.child.id();

    let out = run_bounded(&p, &["--port", "0"], Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains(&p.db().display().to_string()),
        "names the database:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {first_pid}")),
        "names the holder's pid {first_pid}:\n{stderr}"
    );
    let lock_text = std::fs::read_to_string(p.path(".sortie.db.lock")).expect("lock file");
    assert_eq!(lock_text.trim(), first_pid.to_string());
    // The first daemon is unaffected.
    assert!(
        first.get_ok("/readyz").is_some(),
        "first daemon still serves"
    );

    // validate and --dry-run do not need the lock.
    let v = run_bounded(&p, &["validate"], Duration::from_secs(10));
    assert_eq!(
        v.status.code(),
        Some(0),
        "validate: {}",
        String::from_utf8_lossy(&v.stderr)
    );
    let d = run_bounded(&p, &["--dry-run"], Duration::from_secs(10));
    assert_eq!(
        d.status.code(),
        Some(0),
        "dry run: {}",
        String::from_utf8_lossy(&d.stderr)
    );

    // Once the first has stopped, the database is free again.
    let mut first = first;
    assert_eq!(first.terminate(), Some(0));
    let second = p.start();
    assert!(second.get_ok("/readyz").is_some());
    let lock_text = std::fs::read_to_string(p.path(".sortie.db.lock")).expect("lock file");
    assert_eq!(lock_text.trim(), second.child.id().to_string());
}
