//! `workspace.retention_days` through the real binary: the startup sweep removes a workspace
//! whose newest recorded run ended longer ago than the window (running `before_remove`),
//! keeps one inside the window, one without any recorded run and one whose lock another
//! process holds, counts the removal in `/metrics` and logs one summary line. Run records are
//! written before the daemon starts, dated with the real clock minus the ages the test wants.
//! Off (the default), nothing is removed; a window under 30 days is refused.

mod common;

use common::{Setup, wait_for};
use sortie::clock::{Clock, SystemClock};
use sortie::domain::RunStatus;
use sortie::store::{RunRecord, Store};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(40);
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn workflow(retention: &str) -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do]\n  terminal_states: [Done]\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 60000\nworkspace:\n  root: ./ws\n{retention}hooks:\n  before_remove: |\n    echo \"$SORTIE_ISSUE_IDENTIFIER\" >> ../../removed.log\nagent:\n  kind: mock\n---\nWork on {{{{ .issue.identifier }}}}.\n"
    )
}

/// Records one finished run of `identifier` in `workspace` that ended `age_days` ago.
fn record(store: &Store, identifier: &str, workspace: &Path, age_days: i64) {
    let end = SystemClock.now_ms() - age_days * DAY_MS;
    let run = RunRecord {
        issue_id: format!("id-{identifier}"),
        identifier: identifier.into(),
        attempt: 1,
        started_at_ms: end - 60_000,
        completed_at_ms: end,
        agent_kind: "mock".into(),
        workspace: workspace.display().to_string(),
        workflow_file: "WORKFLOW.md".into(),
        ..RunRecord::new(RunStatus::Succeeded)
    };
    store.writer().record_run(run, Vec::new()).unwrap();
}

/// A project with four workspaces: `OLD-1` (last run 40 days ago), `NEW-1` (2 days ago),
/// `LOCKED-1` (40 days ago) and `NOREC-1` (no run), none of them in a terminal state.
fn project(retention: &str) -> Setup {
    let setup = Setup::new(
        &workflow(retention),
        &common::issues(&[
            ("1", "OLD-1", "Review"),
            ("2", "NEW-1", "Review"),
            ("3", "LOCKED-1", "Review"),
            ("4", "NOREC-1", "Review"),
        ]),
    );
    let ws = setup.path().join("ws");
    for dir in ["OLD-1", "NEW-1", "LOCKED-1", "NOREC-1"] {
        std::fs::create_dir_all(ws.join(dir).join("src")).unwrap();
    }
    let store = Store::open(&setup.path().join(".sortie.db"), Arc::new(SystemClock)).unwrap();
    record(&store, "OLD-1", &ws.join("OLD-1"), 40);
    record(&store, "NEW-1", &ws.join("NEW-1"), 2);
    record(&store, "LOCKED-1", &ws.join("LOCKED-1"), 40);
    store.close().unwrap();
    setup
}

/// Holds `LOCKED-1`'s workspace lock the way a session of another process does.
fn hold_lock(setup: &Setup) -> std::fs::File {
    let dir = setup.path().join("ws/LOCKED-1/.sortie");
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))
        .unwrap();
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    file
}

#[test]
fn aged_out_workspaces_are_removed_and_the_rest_kept() {
    let setup = project("  retention_days: 30\n");
    let _lock = hold_lock(&setup);
    let d = setup.start(&[]);
    let ws = setup.path().join("ws");
    wait_for("the sweep summary", WAIT, || {
        d.log_text().contains("workspace sweep").then_some(())
    });
    assert!(!ws.join("OLD-1").exists(), "40 days without a run: removed");
    for kept in ["NEW-1", "LOCKED-1", "NOREC-1"] {
        assert!(ws.join(kept).exists(), "{kept} kept");
    }
    let removed = std::fs::read_to_string(setup.path().join("removed.log")).unwrap_or_default();
    assert_eq!(
        removed.trim(),
        "OLD-1",
        "before_remove ran for the removal only"
    );

    let log = d.log_text();
    let summary = log
        .lines()
        .find(|l| l.contains("workspace sweep"))
        .unwrap_or_default();
    for field in [
        "removed_by_age=1",
        "retained_in_window=1",
        "retained_no_record=1",
        "retained_locked=1",
        "retention_days=30",
    ] {
        assert!(summary.contains(field), "{field} in {summary}");
    }
    assert!(log.contains("workspace removed by retention"), "{log}");
    let metrics = d.get_ok("/metrics").unwrap_or_default();
    assert!(
        metrics.contains("sortie_reconciliation_actions_total{action=\"retention_cleanup\"} 1"),
        "{metrics}"
    );
}

#[test]
fn without_retention_days_every_workspace_is_kept() {
    let setup = project("");
    let d = setup.start(&[]);
    d.wait_until("a poll", WAIT, || {
        d.try_state()
            .is_some_and(|s| s["health"]["poll"]["checked_at"].is_string())
    });
    for kept in ["OLD-1", "NEW-1", "LOCKED-1", "NOREC-1"] {
        assert!(setup.path().join("ws").join(kept).exists(), "{kept} kept");
    }
    assert!(!d.log_text().contains("workspace removed"));
}

#[test]
fn a_window_under_thirty_days_is_refused() {
    let setup = project("  retention_days: 7\n");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("workspace.retention_days") && text.contains("at least 30"),
        "{text}"
    );
    let setup = project("  retention_days: 30\n");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("unsupported_key"), "{text}");
}
