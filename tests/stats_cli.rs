//! `sortie stats` reading the database a workflow names, with no daemon: the JSON report's
//! figures, the table, and clear errors with a non-zero exit for a bad range, a bad format
//! and a missing database (which it never creates).

mod common;
mod stats_seed;

use std::process::Output;

use common::*;

fn project() -> Setup {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    stats_seed::seed(&s.path().join(".sortie.db"));
    s
}

fn stats(s: &Setup, args: &[&str]) -> Output {
    sortie_command()
        .arg("stats")
        .args(args)
        .arg(s.path().join("WORKFLOW.md"))
        .current_dir(s.path())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn stats_cli_json_reports_the_seeded_figures() {
    let s = project();
    let o = stats(
        &s,
        &[
            "--since",
            stats_seed::SINCE,
            "--until",
            stats_seed::UNTIL,
            "--format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    stats_seed::assert_figures(&report);
    assert!(
        report["generated_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
}

#[test]
fn stats_cli_accepts_go_style_flags_and_prints_a_table_by_default() {
    let s = project();
    let o = stats(
        &s,
        &[
            &format!("-since={}", stats_seed::SINCE),
            "--until",
            stats_seed::UNTIL,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "4 over 3 issues: 2 succeeded, 1 failed, 0 stopped, 1 cancelled (success rate 50.0%)"
        ),
        "{text}"
    );
    assert!(text.contains("≥$2.00 recorded"), "{text}");
    assert!(text.contains("By model"), "{text}");
    assert!(text.contains("2026-03-26       3 runs  ≥$2.00"), "{text}");
}

#[test]
fn stats_cli_refuses_a_bad_range_with_a_clear_error() {
    let s = project();
    for (args, needle) in [
        (vec!["--since", "7d"], "invalid --since value \"7d\""),
        (
            vec!["--until", "2026-07-01T00:00:00"],
            "invalid --until value",
        ),
        (vec!["--since", "0h"], "positive duration"),
        (
            vec!["--since", "2026-07-02", "--until", "2026-07-01"],
            "--since (2026-07-02) must be before --until (2026-07-01)",
        ),
        (vec!["--format", "yaml"], "invalid --format value \"yaml\""),
    ] {
        let o = stats(&s, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).starts_with("sortie stats: "), "{}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn stats_cli_reports_a_missing_database_and_never_creates_it() {
    let s = Setup::new(&mock_workflow("", ""), &issues(&[]));
    let o = stats(&s, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no run history database at"),
        "{}",
        stderr(&o)
    );
    assert!(!s.path().join(".sortie.db").exists());
}

#[test]
fn stats_cli_follows_the_workflows_db_path() {
    let s = Setup::new(
        &mock_workflow("", "").replacen("---\n", "---\ndb_path: data/history.db\n", 1),
        &issues(&[]),
    );
    std::fs::create_dir_all(s.path().join("data")).unwrap();
    stats_seed::seed(&s.path().join("data/history.db"));
    let o = stats(&s, &["--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        report["db_path"],
        s.path().join("data/history.db").display().to_string()
    );
    assert_eq!(report["summary"]["runs"], 5);
}
