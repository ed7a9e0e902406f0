//! The stop protocol (`.sortie/status`) and the workspace state file (`.sortie/state.json`).

use sortie::agent::state_file::{self, StateFile};
use sortie::agent::status_file::{self, DeclaredOutcome, MAX_STATUS_BYTES};
use std::os::unix::fs::symlink;
use std::path::Path;

fn ws() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn write_status(ws: &Path, content: &[u8]) {
    std::fs::create_dir_all(ws.join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join(".sortie/status"), content).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn each_token_is_recognized() {
    for (token, expected) in [
        ("blocked", DeclaredOutcome::Blocked),
        ("needs-human-review", DeclaredOutcome::NeedsHumanReview),
        ("no-change-needed", DeclaredOutcome::NoChangeNeeded),
    ] {
        let d = ws();
        write_status(d.path(), format!("  {token}\t\r\n").as_bytes());
        let r = status_file::read(d.path());
        assert_eq!(r.outcome, Some(expected), "{token}");
        assert_eq!(r.statement, None, "{token}");
        assert_eq!(r.warning, None, "{token}");
        assert_eq!(expected.token(), token);
    }
}

#[test]
fn the_statement_follows_the_token_cleaned() {
    let d = ws();
    write_status(
        d.path(),
        b"blocked\r\n\r\n  Which delete should the API expose?\x07\r\nSoft or hard.\x1b[0m  \n\n",
    );
    let r = status_file::read(d.path());
    assert_eq!(r.outcome, Some(DeclaredOutcome::Blocked));
    assert_eq!(
        r.statement.as_deref(),
        Some("Which delete should the API expose?\nSoft or hard.")
    );
}

#[test]
fn a_long_statement_is_bounded() {
    let d = ws();
    let body = format!("blocked\n{}", "word ".repeat(5000));
    write_status(d.path(), body.as_bytes());
    let r = status_file::read(d.path());
    let s = r.statement.unwrap_or_default();
    assert_eq!(s.chars().count(), status_file::MAX_STATEMENT_CHARS + 1);
    assert!(s.ends_with('…'));
}

#[test]
fn a_symlinked_sortie_dir_is_refused_and_not_cleared_through() {
    let d = ws();
    let elsewhere = ws();
    std::fs::write(elsewhere.path().join("status"), "blocked\n").unwrap_or_else(|e| panic!("{e}"));
    symlink(elsewhere.path(), d.path().join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    let r = status_file::read(d.path());
    assert_eq!(r.outcome, None);
    assert!(r.warning.is_some_and(|w| w.contains("symlink")));
    assert!(status_file::clear(d.path()).is_err());
    assert!(
        elsewhere.path().join("status").exists(),
        "clear must not follow the link"
    );
}

#[test]
fn a_symlinked_status_file_is_refused_and_cleared_as_a_link() {
    let d = ws();
    let target = ws();
    let real = target.path().join("real");
    std::fs::write(&real, "no-change-needed\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(d.path().join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    symlink(&real, d.path().join(".sortie/status")).unwrap_or_else(|e| panic!("{e}"));
    let r = status_file::read(d.path());
    assert_eq!(r.outcome, None);
    assert!(r.warning.is_some());
    status_file::clear(d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(real.exists());
    assert!(std::fs::symlink_metadata(d.path().join(".sortie/status")).is_err());
}

#[test]
fn an_oversized_file_is_refused() {
    let d = ws();
    let mut body = b"blocked\n".to_vec();
    body.resize(usize::try_from(MAX_STATUS_BYTES).unwrap_or(0) + 1, b'a');
    write_status(d.path(), &body);
    let r = status_file::read(d.path());
    assert_eq!(r.outcome, None);
    assert!(r.warning.is_some_and(|w| w.contains("limit")));
}

#[test]
fn unknown_empty_and_binary_content_count_as_absent_with_a_warning() {
    for content in [
        &b"done\n"[..],
        b"BLOCKED",
        b"",
        b"  \n",
        b"blocked\0\n",
        b"\xff\xfe",
    ] {
        let d = ws();
        write_status(d.path(), content);
        let r = status_file::read(d.path());
        assert_eq!(r.outcome, None, "{content:?}");
        assert!(r.warning.is_some(), "{content:?}");
    }
}

#[test]
fn a_missing_file_is_silent_and_clear_is_idempotent() {
    let d = ws();
    assert_eq!(
        status_file::read(d.path()),
        status_file::StatusRead::default()
    );
    status_file::clear(d.path()).unwrap_or_else(|e| panic!("{e}"));
    write_status(d.path(), b"blocked\n");
    status_file::clear(d.path()).unwrap_or_else(|e| panic!("{e}"));
    status_file::clear(d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status_file::read(d.path()).outcome, None);
}

#[test]
fn the_state_file_round_trips_atomically() {
    let d = ws();
    let mut s = StateFile {
        turn_number: 1,
        max_turns: 5,
        attempt: Some(2),
        started_at: "2026-03-26T14:10:14.000Z".into(),
        input_tokens: 125,
        output_tokens: 50,
        total_tokens: 175,
        cache_read_tokens: 20,
        cache_write_tokens: 5,
    };
    state_file::write(d.path(), &s).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state_file::read(d.path()).ok(), Some(s.clone()));
    s.turn_number = 2;
    state_file::write(d.path(), &s).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        state_file::read(d.path()).map(|r| r.turn_number).ok(),
        Some(2)
    );
    let leftovers: Vec<_> = std::fs::read_dir(d.path().join(".sortie"))
        .map(|it| it.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("state.json")]);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join(".sortie/state.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    assert_eq!(json["cache_write_tokens"], 5);
    assert_eq!(json["attempt"], 2);
}

#[test]
fn the_state_file_refuses_a_symlinked_sortie_dir() {
    let d = ws();
    let elsewhere = ws();
    symlink(elsewhere.path(), d.path().join(".sortie")).unwrap_or_else(|e| panic!("{e}"));
    assert!(state_file::write(d.path(), &StateFile::default()).is_err());
    assert!(!elsewhere.path().join("state.json").exists());
}

#[test]
fn the_state_file_takes_the_run_usage() {
    let usage = sortie::agent::TokenUsage::from_uncached_input(100, 50, 20, 5);
    let s = StateFile::new(3, 10, None, 0, Some(&usage));
    assert_eq!(s.started_at, "1970-01-01T00:00:00.000Z");
    assert_eq!(
        (s.input_tokens, s.total_tokens, s.cache_write_tokens),
        (125, 175, 5)
    );
    let empty = StateFile::new(0, 10, Some(1), 0, None);
    assert_eq!(empty.total_tokens, 0);
}
