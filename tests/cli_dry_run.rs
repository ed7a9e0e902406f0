//! `sortie --dry-run` on the demo: dispatch order, rendered prompts, no side effects.

mod common;

use std::path::Path;

#[test]
fn dry_run_prints_the_demo_dispatch_order_and_prompts_without_running_anything() {
    let tmp = tempfile::tempdir().unwrap();
    // Work on a copy so nothing is written next to the repository's demo.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    for f in ["WORKFLOW.md", "issues.json"] {
        std::fs::copy(demo.join(f), tmp.path().join(f)).unwrap();
    }
    let issues_before = std::fs::read(tmp.path().join("issues.json")).unwrap();
    let out = common::sortie_command()
        .current_dir(tmp.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");

    // Every candidate in dispatch order: priority, then oldest, then identifier. DEMO-7
    // (Backlog) and DEMO-8 (Done) are not candidates.
    let order: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("== ") || l.starts_with("-- "))
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("DEMO-"))
                .map(|w| w.trim_end_matches(':'))
        })
        .collect();
    assert_eq!(
        order,
        vec!["DEMO-4", "DEMO-3", "DEMO-2", "DEMO-1", "DEMO-5", "DEMO-6"],
        "{stdout}"
    );
    // The blocked issue is excluded; the demo's two agent slots go to the next two.
    assert!(
        stdout.contains("-- held DEMO-4: blocked by DEMO-7 (Backlog)"),
        "{stdout}"
    );
    assert!(stdout.contains("== 1. dispatch DEMO-3"), "{stdout}");
    assert!(stdout.contains("== 2. dispatch DEMO-2"), "{stdout}");
    assert!(
        stdout.contains("-- held DEMO-1: all 2 agent slots taken"),
        "{stdout}"
    );
    assert!(!stdout.contains("DEMO-8"), "{stdout}");

    // Rendered first-turn prompts with the status protocol suffix and workspace paths.
    assert!(stdout.contains("You are working on DEMO-3: Rename the config loader module."));
    assert!(stdout.contains("Labels: bug, backend"), "{stdout}");
    assert!(stdout.contains(".sortie/status"), "status suffix missing");
    assert!(stdout.contains(&format!(
        "workspace: {}",
        tmp.path().join("workspaces/DEMO-3").display()
    )));
    assert!(stdout.contains("dry run complete: would_dispatch=2"));

    // No agent ran, no database, the tracker file untouched, no workspace created.
    assert!(!tmp.path().join(".sortie.db").exists());
    assert_eq!(
        std::fs::read(tmp.path().join("issues.json")).unwrap(),
        issues_before
    );
    assert!(!tmp.path().join("workspaces/DEMO-3").exists());
}

#[test]
fn dry_run_with_an_unreadable_tracker_file_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo/WORKFLOW.md");
    std::fs::copy(demo, tmp.path().join("WORKFLOW.md")).unwrap();
    std::fs::write(tmp.path().join("issues.json"), "{not json").unwrap();
    let out = common::sortie_command()
        .current_dir(tmp.path())
        .args(["--dry-run", "WORKFLOW.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed to parse file"));
}
