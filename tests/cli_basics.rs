//! Help, version and argument errors through the real binary.

mod common;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = common::sortie_command()
        .args(args)
        .output()
        .expect("run sortie");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_is_on_stdout_with_exit_0_everywhere() {
    for args in [
        vec!["--help"],
        vec!["-help"],
        vec!["validate", "--help"],
        vec!["demo", "--help"],
    ] {
        let (code, stdout, _) = run(&args);
        assert_eq!(code, 0, "{args:?}");
        assert!(stdout.contains("Usage:"), "{args:?}: {stdout}");
    }
    let (_, stdout, _) = run(&["--help"]);
    for flag in [
        "--port",
        "--host",
        "--log-level",
        "--log-format",
        "--env-file",
        "--dry-run",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from help");
    }
}

#[test]
fn version_spellings() {
    let (code, stdout, _) = run(&["version"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with(&format!("sortie {}", env!("CARGO_PKG_VERSION"))));
    assert_eq!(run(&["--version"]).1, stdout);
    assert_eq!(run(&["-V"]).1, stdout);
    let (code, bare, _) = run(&["-dumpversion"]);
    assert_eq!(code, 0);
    assert_eq!(bare.trim(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn unknown_flags_and_missing_workflow_exit_1_on_stderr() {
    let (code, stdout, stderr) = run(&["--bogus"]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(stderr.starts_with("sortie: "), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let out = common::sortie_command()
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("workflow file not found"), "{stderr}");
    assert!(stderr.contains("WORKFLOW.md"), "{stderr}");
}
