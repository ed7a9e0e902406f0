//! Generated mutations of a valid WORKFLOW.md: truncations, wrong types for each key, bad YAML,
//! bad templates, encodings and special files. Each runs through `validate` in-process (a panic
//! fails the test), a sample also through the real binary with a timeout (exit 101, "panicked"
//! or a hang fail the test). Every rejection must be explained: each error message
//! - names a key of the configuration (a key of the base front matter, or its check is
//!   `config.<key>`), or
//! - names a line (`line N`), or
//! - names the file problem (not found, not a regular file, permission, size, encoding, missing
//!   front matter).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Project;
use sortie::cli::validate::{Report, validate};
use sortie::config::LoadOptions;

const FILE_PROBLEMS: &[&str] = &[
    "workflow file not found",
    "not a regular file",
    "permission denied",
    "too large",
    "NUL byte",
    "UTF-16",
    "no front matter found",
    "Too many levels of symbolic links",
];

/// The keys of the base front matter (every `key:` left of a colon).
fn known_keys(text: &str) -> Vec<String> {
    let mut keys: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            let (k, _) = t.split_once(':')?;
            (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .then(|| k.to_string())
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

fn names_line(msg: &str) -> bool {
    msg.match_indices("line ").any(|(i, _)| {
        msg[i + 5..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// Whether `message` (under `check`) fails to explain itself. The temporary directory's path
/// is removed first so a key cannot match by accident inside it.
fn unexplained(check: &str, message: &str, keys: &[String]) -> bool {
    let tmp = std::env::temp_dir().display().to_string();
    let message = &message
        .split(' ')
        .filter(|w| !w.contains(tmp.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    let names_key = check.starts_with("config.")
        || check.starts_with("workspace.")
        || check == "tracker_adapter"
        || check == "agent_adapter"
        || keys.iter().any(|k| message.contains(k.as_str()));
    !(names_key || names_line(message) || FILE_PROBLEMS.iter().any(|p| message.contains(p)))
}

fn check_report(what: &str, report: &Report, keys: &[String]) -> Result<(), String> {
    for d in &report.errors {
        if unexplained(&d.check, &d.message, keys) {
            return Err(format!(
                "{what}: error names no key, line or file problem: {}: {}",
                d.check, d.message
            ));
        }
    }
    Ok(())
}

fn base() -> (Project, String) {
    let p = Project::new();
    p.issues(serde_json::json!([]));
    p.fake_agent_workflow("  max_concurrent_agents: 2", "");
    let text = std::fs::read_to_string(p.workflow()).expect("read workflow");
    (p, text)
}

/// Every mutation of the base text, with a label.
fn text_mutations(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    // Truncations at ~120 offsets (char boundaries).
    let step = (text.len() / 120).max(1);
    for cut in (0..text.len()).step_by(step) {
        if text.is_char_boundary(cut) {
            out.push((
                format!("truncated at {cut}"),
                text.as_bytes()[..cut].to_vec(),
            ));
        }
    }
    // Wrong types: each `key: value` line with every other kind of value.
    let lines: Vec<&str> = text.lines().collect();
    let closing = lines.iter().rposition(|l| *l == "---").unwrap_or(0);
    for (i, line) in lines.iter().enumerate().take(closing).skip(1) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if v.trim().is_empty() || v.trim() == "|" {
            continue;
        }
        for bad in [
            "[1, 2]",
            "{a: 1}",
            "-5",
            "0",
            "\"x\"",
            "true",
            "~",
            "1.5",
            "99999999999999999999",
        ] {
            let mut l = lines.clone();
            let replaced = format!("{k}: {bad}");
            l[i] = &replaced;
            out.push((
                format!("line {} {k} = {bad}", i + 1),
                (l.join("\n") + "\n").into_bytes(),
            ));
        }
    }
    // Bad YAML.
    for (label, from, to) in [
        (
            "unclosed flow list",
            "active_states: [To Do, In Progress]",
            "active_states: [To Do",
        ),
        ("tab indent", "  kind: file", "\tkind: file"),
        ("duplicate key", "polling:", "polling: {}\npolling:"),
        ("stray colon", "file:", "file: : :"),
        ("no closing delimiter", "\n---\n", "\n"),
        ("anchor loop", "polling:", "x: &a [*a]\npolling:"),
        ("non-map front matter", "tracker:", "- tracker:"),
    ] {
        out.push((label.to_string(), text.replacen(from, to, 1).into_bytes()));
    }
    // Bad templates.
    let end = text.rfind("---\n").map(|i| i + 4).unwrap_or(text.len());
    for body in [
        "{{ .issue.titel }}",
        "{{ template \"x\" }}",
        "{{ $y }}",
        "{{ if .issue.title }}",
        "{{ end }}",
        "{{ .issue.title",
        "{{ nosuchfn 1 }}",
        "{{ range .issue.labels }}{{ .x }}{{ end }}",
        "{{ .attempt.x }}",
        "{{ define \"prompt\" }}x{{ end }}",
        "{{ index .issue.labels 5 }}",
        "{{/* unterminated",
        "{{ .issue.parent.nope }}",
    ] {
        out.push((
            format!("template {body}"),
            format!("{}{body}\n", &text[..end]).into_bytes(),
        ));
    }
    // Encodings.
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(text.as_bytes());
    out.push(("UTF-8 BOM".into(), bom));
    for (label, le, bom) in [
        ("UTF-16 LE", true, true),
        ("UTF-16 BE", false, true),
        ("UTF-16 LE no BOM", true, false),
    ] {
        let mut b = if bom {
            if le {
                vec![0xFF, 0xFE]
            } else {
                vec![0xFE, 0xFF]
            }
        } else {
            Vec::new()
        };
        for u in text.encode_utf16() {
            b.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        out.push((label.into(), b));
    }
    let mut odd = vec![0xFF, 0xFE];
    odd.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    odd.pop();
    out.push(("UTF-16 odd length".into(), odd));
    out.push(("CR-only".into(), text.replace('\n', "\r").into_bytes()));
    out.push(("CRLF".into(), text.replace('\n', "\r\n").into_bytes()));
    out.push((
        "leading blank line".into(),
        format!("\n{text}").into_bytes(),
    ));
    out.push(("invalid UTF-8".into(), {
        let mut b = text.as_bytes().to_vec();
        b.insert(10, 0xC3);
        b
    }));
    for at in [0, 4, 30, text.len() / 2, text.len() - 1] {
        let mut b = text.as_bytes().to_vec();
        b.insert(at, 0);
        out.push((format!("NUL at {at}"), b));
    }
    out.push(("empty".into(), Vec::new()));
    out.push(("only delimiters".into(), b"---\n---\n".to_vec()));
    out
}

fn opts(p: &Project) -> LoadOptions {
    LoadOptions {
        cwd: p.dir.path().to_path_buf(),
        home: Some(p.dir.path().to_path_buf()),
        ..LoadOptions::default()
    }
}

/// Runs `sortie validate WORKFLOW.md` with a 10 s deadline: (exit code, stderr).
fn validate_binary(dir: &Path) -> Result<(i32, String), String> {
    let mut child = common::sortie_command()
        .current_dir(dir)
        .args(["validate", "WORKFLOW.md"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("hung (killed after 10 s)".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn check_binary(what: &str, dir: &Path, keys: &[String]) -> Result<(), String> {
    let (code, stderr) = validate_binary(dir).map_err(|e| format!("{what}: {e}"))?;
    if code == 101 || stderr.contains("panicked") {
        return Err(format!("{what}: panic (exit {code}): {stderr}"));
    }
    if code != 0 {
        for line in stderr.lines().filter(|l| l.starts_with("error: ")) {
            let rest = &line["error: ".len()..];
            let (check, message) = rest.split_once(": ").unwrap_or(("", rest));
            if unexplained(check, message, keys) {
                return Err(format!("{what}: unexplained error: {line}"));
            }
        }
        if !stderr.lines().any(|l| l.starts_with("error: ")) {
            return Err(format!(
                "{what}: exit {code} without an error line: {stderr}"
            ));
        }
    }
    Ok(())
}

#[test]
fn mutations_never_panic_hang_or_fail_without_naming_a_key_line_or_file_problem() {
    let (p, text) = base();
    let keys = known_keys(&text[..text.rfind("---\n").unwrap_or(text.len())]);
    let mutations = text_mutations(&text);
    assert!(mutations.len() > 200, "{}", mutations.len());
    let mut failures = Vec::new();
    let mut rejected = 0;
    for (i, (label, bytes)) in mutations.iter().enumerate() {
        std::fs::write(p.workflow(), bytes).expect("write mutation");
        let o = opts(&p);
        let result = std::panic::catch_unwind(|| validate(&p.workflow(), &o));
        match result {
            Err(_) => failures.push(format!("{label}: validate panicked")),
            Ok(report) => {
                if !report.errors.is_empty() {
                    rejected += 1;
                }
                if let Err(e) = check_report(label, &report, &keys) {
                    failures.push(e);
                }
            }
        }
        // Every 15th mutation also through the real binary.
        if i % 15 == 0
            && let Err(e) = check_binary(label, p.dir.path(), &keys)
        {
            failures.push(e);
        }
    }
    assert!(rejected > 50, "too few rejections: {rejected}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn special_files_are_refused_through_the_binary_without_hanging() {
    let (p, text) = base();
    let keys = known_keys(&text);
    let wf = p.workflow();
    let mut failures = Vec::new();
    let mut expect_error = |what: &str, needle: &str| {
        match validate_binary(p.dir.path()) {
            Err(e) => failures.push(format!("{what}: {e}")),
            Ok((code, stderr)) => {
                if code != 1 || !stderr.contains(needle) {
                    failures.push(format!(
                        "{what}: exit {code}, want 1 and {needle:?}: {stderr}"
                    ));
                }
            }
        }
        if let Err(e) = check_binary(what, p.dir.path(), &keys) {
            failures.push(e);
        }
    };

    std::fs::remove_file(&wf).expect("rm");
    let status = Command::new("mkfifo").arg(&wf).status().expect("mkfifo");
    assert!(status.success());
    expect_error("FIFO", "a FIFO");
    std::fs::remove_file(&wf).expect("rm fifo");

    std::fs::create_dir(&wf).expect("mkdir");
    expect_error("directory", "a directory");
    std::fs::remove_dir(&wf).expect("rmdir");

    std::os::unix::fs::symlink("WORKFLOW.md", &wf).expect("symlink loop");
    expect_error("symlink loop", "cannot read workflow file");
    std::fs::remove_file(&wf).expect("rm link");

    std::os::unix::fs::symlink("/dev/null", &wf).expect("symlink to /dev/null");
    expect_error("character device", "a character device");
    std::fs::remove_file(&wf).expect("rm link");

    expect_error("missing", "workflow file not found");

    std::fs::write(&wf, &text).expect("write");
    std::fs::set_permissions(&wf, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read(&wf).is_err() {
        expect_error("unreadable", "permission denied");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
