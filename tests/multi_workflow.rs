//! Several workflows under one daemon, through the real binary: three workflows (the file
//! tracker, a fake GitHub, a fake Jira) in one folder with a `sortie.yaml` capping agents at
//! 2 across them while each workflow's own cap is 2 too.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Daemon, fake_github, fake_jira};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
/// Issues per workflow.
const ISSUES: u64 = 3;

/// Every session runs a few turns of the mock agent (about a second), so sessions of
/// different workflows overlap unless the cap keeps them apart.
fn agent_block() -> &'static str {
    "agent:\n  kind: mock\n  max_concurrent_agents: 2\n  max_turns: 3\n  max_retry_backoff_ms: 1000\nmock:\n  model_name: mock-model\n  turn_delay_ms: 300\n"
}

fn file_workflow() -> String {
    format!(
        "---\ntracker:\n  kind: file\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Review\nfile:\n  path: ./issues.json\npolling:\n  interval_ms: 300\nworkspace:\n  root: ./ws-local\n{}---\nWork on {{{{ .issue.identifier }}}}.\n",
        agent_block()
    )
}

fn github_workflow(url: &str) -> String {
    format!(
        "---\nname: gh\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\ngithub:\n  timeout_ms: 5000\npolling:\n  interval_ms: 300\nworkspace:\n  root: ./ws-gh\n{}---\nWork on {{{{ .issue.identifier }}}}.\n",
        agent_block()
    )
}

fn jira_workflow(url: &str) -> String {
    format!(
        "---\ntracker:\n  kind: jira\n  endpoint: {url}\n  api_key: $JIRA_API_TOKEN\n  project: PROJ\n  active_states: [To Do, In Progress]\n  terminal_states: [Done]\n  in_progress_state: In Progress\n  handoff_state: Human Review\njira:\n  timeout_ms: 5000\npolling:\n  interval_ms: 300\nworkspace:\n  root: ./ws-jira\n{}---\nWork on {{{{ .issue.identifier }}}}.\n",
        agent_block()
    )
}

fn local_issues(n: u64) -> String {
    let items: Vec<Value> = (1..=n)
        .map(|i| {
            serde_json::json!({
                "id": format!("{i}"), "identifier": format!("LOC-{i}"), "title": format!("Local {i}"),
                "state": "To Do", "priority": 1,
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            })
        })
        .collect();
    serde_json::to_string_pretty(&items).unwrap_or_default()
}

struct Three {
    dir: tempfile::TempDir,
    github: fake_github::FakeGithub,
    jira: fake_jira::FakeJira,
}

fn three(shared: &str) -> Three {
    let github = fake_github::start(&["backlog", "in-progress", "review", "done"]);
    github.with_state(|s| {
        for i in 1..=ISSUES {
            s.add_issue(i, &format!("Hub {i}"), &["backlog"], false);
        }
    });
    let jira = fake_jira::start();
    jira.with_state(|s| {
        for i in 1..=ISSUES {
            s.add_issue(i, &format!("Jira {i}"), "To Do");
        }
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    write("local.md", &file_workflow());
    write("hub.md", &github_workflow(&github.url));
    write("jira.md", &jira_workflow(&jira.url));
    write("issues.json", &local_issues(ISSUES));
    write("README.md", "# not a workflow\n");
    write("sortie.yaml", shared);
    Three { dir, github, jira }
}

fn start(dir: &Path) -> Daemon {
    let log = dir.join("sortie.log");
    common::daemon::spawn(&log, None, |port| {
        let mut cmd = common::sortie_command();
        cmd.arg("--port")
            .arg(port.to_string())
            .arg("--workflows")
            .arg(dir)
            .current_dir(dir)
            .env("GITHUB_TOKEN", fake_github::TOKEN)
            .env("JIRA_API_TOKEN", fake_jira::api_key());
        cmd
    })
}

/// Every run of `workflow`: (issue identifier, started ms, completed ms).
fn runs(d: &Daemon, workflow: &str) -> Vec<(String, i64, i64)> {
    let Some(body) = d.get_ok(&format!("/api/v1/runs?workflow={workflow}&limit=200")) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    let ms = |s: &Value| {
        s.as_str()
            .and_then(chrono_ms)
            .unwrap_or_else(|| panic!("not a time: {s}"))
    };
    v["runs"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["issue_identifier"].as_str().unwrap_or("").to_string(),
                        ms(&r["started_at"]),
                        ms(&r["completed_at"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Milliseconds since the epoch of an RFC 3339 UTC time with milliseconds
/// (`2026-12-05T03:54:13.120Z`).
fn chrono_ms(t: &str) -> Option<i64> {
    let b = t.as_bytes();
    if b.len() < 24 || b[23] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| t.get(r).and_then(|s| s.parse::<i64>().ok());
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, s, ms) = (n(11..13)?, n(14..16)?, n(17..19)?, n(20..23)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms)
}

/// The most sessions that ran at once, from the runs' intervals.
fn max_overlap(all: &[(String, i64, i64)]) -> usize {
    let mut edges: Vec<(i64, i32)> = all
        .iter()
        .flat_map(|(_, a, b)| [(*a, 1), (*b, -1)])
        .collect();
    // An end at the same millisecond as a start comes first: the slot was given back.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

fn workflows(d: &Daemon) -> Value {
    d.get("/api/v1/workflows").json()
}

#[test]
fn three_workflows_share_a_cap_of_two_and_each_gets_work() {
    let t = three("max_concurrent_agents: 2\n");
    let d = start(t.dir.path());
    let names: Vec<String> = workflows(&d)["workflows"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|w| w["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    // File stems, and the front matter's `name:` where there is one; the README is no workflow.
    assert_eq!(names, ["gh", "jira", "local"]);
    d.wait_until("every issue of every workflow ran", WAIT, || {
        names.iter().all(|n| runs(&d, n).len() >= ISSUES as usize)
    });
    // A run's recorded interval lies within the time its slot was held (taken before the
    // dispatch, given back after the exit is applied), so overlapping runs bound the slots.
    let all: Vec<(String, i64, i64)> = names.iter().flat_map(|n| runs(&d, n)).collect();
    assert_eq!(all.len(), 3 * ISSUES as usize, "{all:?}");
    assert!(max_overlap(&all) <= 2, "more than 2 at once: {all:?}");
    // The fair share: a workflow waiting for its first slot gets one of the next two that
    // free up, never after another workflow's whole backlog.
    for n in &names {
        let first = runs(&d, n).iter().map(|r| r.1).min().unwrap_or(i64::MAX);
        let ended_before = all.iter().filter(|r| r.2 <= first).count();
        assert!(
            ended_before <= 2,
            "{n} started only after {ended_before} sessions had ended: {all:?}"
        );
    }
    // The trackers saw their own issues handed off.
    assert!(
        (1..=ISSUES).all(|i| t.github.with_state(|g| g.labels(i)) == ["review"]),
        "github labels"
    );
    let _ = &t.jira;
    // Each workflow's answers are its own.
    let r = d.get("/api/v1/runs");
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "workflow_required");
    // The state across every workflow: each row says whose it is.
    let all = d.get("/api/v1/state").json();
    let held: Vec<&str> = all["held"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["workflow"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        all["held"]
            .as_array()
            .is_some_and(|a| a.len() == held.len()),
        "{all}"
    );
    let kinds: Vec<&str> = all["workflows"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w["config"]["tracker"]["kind"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(kinds, ["github", "jira", "file"], "{all}");
    assert_eq!(all["counts"]["running"], 0, "{all}");
    let r = d.get("/api/v1/state?workflow=nope");
    assert_eq!(r.status, 404, "{}", r.body);
    let s = d.get("/api/v1/state?workflow=jira").json();
    assert_eq!(s["config"]["tracker"]["kind"], "jira", "{s}");
    let metrics = d.get("/metrics").body;
    for n in &names {
        assert!(
            metrics.contains(&format!(
                "sortie_dispatches_total{{workflow=\"{n}\",outcome=\"success\"}}"
            )),
            "{n} in metrics:\n{metrics}"
        );
    }
    // Every record about an issue names the workflow it belongs to.
    let log = d.log_text();
    let issue_lines: Vec<&str> = log.lines().filter(|l| l.contains(" issue_id=")).collect();
    assert!(!issue_lines.is_empty(), "{log}");
    let unnamed: Vec<&&str> = issue_lines
        .iter()
        .filter(|l| !names.iter().any(|n| l.contains(&format!(" workflow={n}"))))
        .collect();
    assert!(
        unnamed.is_empty(),
        "records without their workflow: {unnamed:#?}"
    );
}

#[test]
fn a_broken_reload_of_one_workflow_leaves_the_others_dispatching() {
    let t = three("max_concurrent_agents: 4\n");
    let d = start(t.dir.path());
    d.wait_until("the first issues ran", WAIT, || {
        ["gh", "jira", "local"]
            .iter()
            .all(|n| !runs(&d, n).is_empty())
    });
    std::fs::write(
        t.dir.path().join("hub.md"),
        "---\ntracker: [not, a, map\n---\nbroken\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    d.wait_until("the broken reload reported", WAIT, || {
        workflows(&d)["workflows"]
            .as_array()
            .and_then(|a| a.iter().find(|w| w["name"] == "gh").cloned())
            .is_some_and(|w| w["status"] == "degraded")
    });
    // New work for the other two is still picked up.
    std::fs::write(t.dir.path().join("issues.json"), local_issues(ISSUES + 2))
        .unwrap_or_else(|e| panic!("{e}"));
    t.jira.with_state(|s| {
        s.add_issue(ISSUES + 1, "Jira new", "To Do");
    });
    d.wait_until("the new issues of the healthy workflows ran", WAIT, || {
        runs(&d, "local").len() >= (ISSUES + 2) as usize && runs(&d, "jira").len() > ISSUES as usize
    });
    let rows = workflows(&d);
    for n in ["jira", "local"] {
        let row = rows["workflows"]
            .as_array()
            .and_then(|a| a.iter().find(|w| w["name"] == n).cloned())
            .unwrap_or_default();
        assert_eq!(row["status"], "ok", "{n}: {row}");
    }
}

/// The daemon-wide daily ceiling: every session costs $1.20 (3 turns of 400k input tokens at
/// $1 per million), the ceiling is $2, so after two or three sessions of any workflows every
/// workflow's remaining issues are held for it.
#[test]
fn a_spend_ceiling_reached_across_workflows_holds_all_three() {
    let t = three("max_concurrent_agents: 2\nmax_daily_cost_usd: 2\n");
    for f in ["local.md", "hub.md", "jira.md"] {
        let path = t.dir.path().join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let text = text.replacen(
            "mock:\n  model_name: mock-model\n",
            "mock:\n  model_name: mock-model\n  input_tokens_per_turn: 400000\ntoken_rates:\n  mock: {input_per_mtok: 1, output_per_mtok: 1}\n",
            1,
        );
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    }
    let d = start(t.dir.path());
    let names = ["gh", "jira", "local"];
    d.wait_until("every workflow held by the shared ceiling", WAIT, || {
        names.iter().all(|n| {
            d.get_ok(&format!("/api/v1/state?workflow={n}"))
                .and_then(|b| serde_json::from_str::<Value>(&b).ok())
                .is_some_and(|s| {
                    s["held"].as_array().is_some_and(|h| {
                        !h.is_empty()
                            && h.iter()
                                .all(|r| r["hold"]["reason"] == "daily_spend_ceiling")
                    })
                })
        })
    });
    let ran: usize = names.iter().map(|n| runs(&d, n).len()).sum();
    assert!(
        (2..=4).contains(&ran),
        "{ran} sessions ran under a $2 ceiling at $1.20 each"
    );
}

/// A database one workflow used alone: served next to another workflow, the workflow whose
/// file it was keeps its history (its runs are listed under its name).
#[test]
fn the_history_of_a_single_workflow_goes_to_that_workflow() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("WORKFLOW.md"), file_workflow())
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("issues.json"), local_issues(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("single.log");
    let d = common::daemon::spawn(&log, None, |port| {
        let mut cmd = common::sortie_command();
        cmd.arg("--port")
            .arg(port.to_string())
            .arg(dir.path().join("WORKFLOW.md"))
            .current_dir(dir.path());
        cmd
    });
    d.wait_until("the single workflow's run", WAIT, || {
        d.get_ok("/api/v1/runs")
            .is_some_and(|b| b.contains("\"LOC-1\""))
    });
    assert_eq!(d.stop(), Some(0));
    let other = file_workflow()
        .replace("./issues.json", "./other.json")
        .replace("./ws-local", "./ws-other");
    std::fs::write(dir.path().join("other.md"), other).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("other.json"), "[]").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("sortie.yaml"),
        format!("db_path: {}\n", dir.path().join(".sortie.db").display()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = start(dir.path());
    let kept = runs(&d, "WORKFLOW");
    assert_eq!(kept.len(), 1, "{kept:?}\n{}", d.log_text());
    assert_eq!(kept[0].0, "LOC-1");
    assert!(runs(&d, "other").is_empty());
    assert!(
        d.log_text()
            .contains("history of the single workflow adopted"),
        "{}",
        d.log_text()
    );
}

/// A file workflow of its own issues file and workspace root.
fn own_file_workflow(dir: &Path, name: &str, issues: u64) {
    let text = file_workflow()
        .replace("./issues.json", &format!("./{name}.json"))
        .replace("./ws-local", &format!("./ws-{name}"));
    let list = local_issues(issues).replace("LOC-", &format!("{}-", name.to_uppercase()));
    std::fs::write(dir.join(format!("{name}.json")), list).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join(format!("{name}.md")), text).unwrap_or_else(|e| panic!("{e}"));
}

fn row(d: &Daemon, name: &str) -> Option<Value> {
    workflows(d)["workflows"]
        .as_array()
        .and_then(|a| a.iter().find(|w| w["name"] == name).cloned())
}

/// The `--workflows` folder while the daemon runs: a file added is started, one that does
/// not load is listed and started once fixed, one removed is drained and no longer served.
#[test]
fn workflow_files_added_and_removed_while_running_start_and_drain() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    own_file_workflow(dir.path(), "one", 1);
    own_file_workflow(dir.path(), "two", 1);
    let d = start(dir.path());
    d.wait_until("both workflows ran their issue", WAIT, || {
        runs(&d, "one").len() == 1 && runs(&d, "two").len() == 1
    });
    own_file_workflow(dir.path(), "three", 2);
    d.wait_until("the added workflow's issues ran", WAIT, || {
        runs(&d, "three").len() == 2
    });
    std::fs::write(dir.path().join("four.md"), "---\ntracker:\n  kind: nosuch\n  active_states: [To Do]\n  terminal_states: [Done]\n---\nx\n")
        .unwrap_or_else(|e| panic!("{e}"));
    d.wait_until("the broken file listed", WAIT, || {
        row(&d, "four").is_some_and(|r| r["status"] == "not_loaded")
    });
    own_file_workflow(dir.path(), "four", 1);
    d.wait_until("the fixed file started", WAIT, || {
        row(&d, "four").is_some_and(|r| r["status"] == "ok") && runs(&d, "four").len() == 1
    });
    std::fs::remove_file(dir.path().join("one.md")).unwrap_or_else(|e| panic!("{e}"));
    d.wait_until("the removed workflow drained", WAIT, || {
        row(&d, "one").is_none()
    });
    let r = d.get("/api/v1/state?workflow=one");
    assert_eq!(r.status, 404, "{}", r.body);
    // The others go on: new work for two is picked up.
    std::fs::write(
        dir.path().join("two.json"),
        local_issues(2).replace("LOC-", "TWO-"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // (The rewrite puts TWO-1 back in To Do too, so it may run again.)
    d.wait_until("two's new issue ran", WAIT, || {
        runs(&d, "two").iter().any(|r| r.0 == "TWO-2")
    });
    assert!(
        d.log_text().contains("workflow drained and removed"),
        "{}",
        d.log_text()
    );
}

#[test]
fn two_workflows_with_one_name_are_refused_with_both_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let text = file_workflow().replacen("---\n", "---\nname: same\n", 1);
    for f in ["a.md", "b.md"] {
        std::fs::write(dir.path().join(f), &text).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(dir.path().join("issues.json"), local_issues(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = common::sortie_command()
        .arg("--port")
        .arg("0")
        .arg("--workflows")
        .arg(dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("two workflows are named \"same\"")
            && stderr.contains("a.md")
            && stderr.contains("b.md"),
        "{stderr}"
    );
}

#[test]
fn a_workflow_that_does_not_load_is_listed_and_the_others_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("good.md"), file_workflow()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("bad.md"),
        "---\ntracker:\n  kind: nosuch\n  active_states: [To Do]\n  terminal_states: [Done]\n---\nx\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("issues.json"), local_issues(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let d = start(dir.path());
    d.wait_until("the good workflow's issue ran", WAIT, || {
        !runs(&d, "good").is_empty()
    });
    let rows = workflows(&d);
    let bad = rows["workflows"]
        .as_array()
        .and_then(|a| a.iter().find(|w| w["name"] == "bad").cloned())
        .unwrap_or_default();
    assert_eq!(bad["status"], "not_loaded", "{rows}");
    assert!(
        bad["problems"][0]
            .as_str()
            .is_some_and(|p| p.contains("nosuch")),
        "{bad}"
    );
    let r = d.get("/api/v1/state?workflow=bad");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "workflow_not_loaded");
}

#[test]
fn times_read_back() {
    assert_eq!(chrono_ms("1970-01-01T00:00:01.500Z"), Some(1500));
    assert_eq!(chrono_ms("2000-03-01T00:00:00.000Z"), Some(951_868_800_000));
    assert_eq!(
        max_overlap(&[
            ("a".into(), 0, 10),
            ("b".into(), 5, 15),
            ("c".into(), 10, 20)
        ]),
        2
    );
}

#[test]
fn a_dry_run_over_a_folder_reports_each_workflow_and_the_one_that_did_not_load() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    own_file_workflow(dir.path(), "alpha", 2);
    own_file_workflow(dir.path(), "beta", 1);
    std::fs::write(dir.path().join("broken.md"), "---\ntracker: [\n---\nx\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let out = common::sortie_command()
        .arg("--dry-run")
        .arg("--workflows")
        .arg(dir.path())
        .current_dir(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The broken file is reported, so the run says it is not all well.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let alpha = stdout.find("== workflow alpha (");
    let beta = stdout.find("== workflow beta (");
    assert!(alpha.is_some() && beta > alpha, "{stdout}");
    assert!(
        stdout.contains("ALPHA-1") && stdout.contains("ALPHA-2") && stdout.contains("BETA-1"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("dry run complete:").count(), 2, "{stdout}");
    assert!(
        stdout.contains("== workflow broken (") && stdout.contains("not loaded:"),
        "{stdout}"
    );
    // A dry run starts nothing: no database, no issue workspace.
    assert!(!dir.path().join(".sortie.db").exists());
    assert!(!dir.path().join("ws-alpha/ALPHA-1").exists());
}
