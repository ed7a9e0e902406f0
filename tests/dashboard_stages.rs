//! The dashboard's rule and stage views in headless Chromium (tests/browser/stages.py) against
//! the real HTTP server serving a constructed snapshot (tests/common/stages.rs): the rule and
//! chain position of the running and retry rows, the "Between stages" section with its hold
//! sentence, the Rule and Stage columns of the Runs screen, and the issue page of an issue
//! between stages.
//!
//! Skips with a printed reason when Chromium or python3 is missing; under CI (`CI` set) a
//! missing tool fails instead.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, RwLock};

use sortie::clock::SystemClock;
use sortie::config::ServerBind;
use sortie::orchestrator::OrchestratorHandle;
use sortie::store::Store;

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

#[test]
fn the_dashboard_shows_rules_stages_and_issues_between_stages() {
    let tools = which("chromium")
        .or_else(|| which("chromium-browser"))
        .zip(which("python3"));
    let Some((chromium, python)) = tools else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the stages browser check needs chromium and python3 under CI"
        );
        eprintln!("SKIP stages browser check: chromium or python3 is missing");
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = Store::open(&dir.path().join("s.db"), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .writer()
        .record_run(common::stages::hop_run(), Vec::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, _rx) = crossbeam_channel::unbounded();
    let orch = OrchestratorHandle {
        tx,
        snapshot: Arc::new(RwLock::new(Arc::new(common::stages::snapshot()))),
        metrics: Arc::new(sortie::metrics::Metrics::new(&Default::default())),
        prices: Default::default(),
    };
    let port = common::free_port();
    let bind = ServerBind {
        host: std::net::Ipv4Addr::LOCALHOST.into(),
        port,
        explicit: true,
        allowed_hosts: Vec::new(),
        max_connections: None,
        max_connections_per_client: None,
    };
    let server = sortie::http::start(&bind, orch, Arc::new(store), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the server did not start"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/stages.py");
    let result = Command::new(python)
        .arg(script)
        .args(["--base", &format!("http://127.0.0.1:{port}")])
        .arg("--out")
        .arg(&out)
        .arg("--chromium")
        .arg(chromium)
        .output()
        .unwrap_or_else(|e| panic!("run the browser driver: {e}"));
    server.shutdown();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(
        result.status.success(),
        "stages browser check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    for shot in [
        "overview-stages.png",
        "runs-stages.png",
        "issue-between-stages.png",
    ] {
        let len = std::fs::metadata(out.join(shot))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "screenshot {shot} missing or empty");
    }
}
