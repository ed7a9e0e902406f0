//! `tracker.handoff_evidence` through the real binary: every workspace is a real git
//! repository (the `after_create` hook runs `git init` and commits the scenario), and the
//! scripted agent commits, only edits a file, or does nothing. Under `strict` only a commit
//! (or a pull-request record) lets the handoff through; `observed` also takes an edit; `off`
//! (the default) hands off as before. A withheld handoff records a failed run with its
//! declaration and the plain-sentence error, leaves the tracker alone and retries; three in a
//! row park the issue (`handoff_absence`) with an attention item until a person removes the
//! label.

mod common;

use std::time::Duration;

use common::workflow::Project;
use common::{Daemon, FAKE_AGENT};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const WITHHELD_STRICT: &str = "Sortie withheld the handoff because the run showed no evidence of work: no new commit on the workspace's branch and no pull request record.";
const WITHHELD_OBSERVED: &str = "Sortie withheld the handoff because the run showed no evidence of work: no new commit, no changed file and no pull request record.";

/// A file-tracker workflow whose workspaces are git repositories; `policy` is the
/// `tracker.handoff_evidence` line (or none).
fn project(policy: Option<&str>, issues: &[(&str, &str)]) -> Project {
    let p = Project::new();
    let policy = policy
        .map(|v| format!("  handoff_evidence: {v}\n"))
        .unwrap_or_default();
    let wf = format!(
        r#"---
tracker:
  kind: file
  active_states: [To Do, In Progress]
  terminal_states: [Done]
  handoff_state: Review
  no_change_state: No Change
{policy}file:
  path: ./issues.json
polling:
  interval_ms: 200
workspace:
  root: {root}
hooks:
  after_create: |
    git init -q &&
    cp "$SORTIE_TEST_SCENARIOS/$SORTIE_ISSUE_IDENTIFIER.jsonl" .scenario &&
    printf 'start\n' > README &&
    git add README .scenario &&
    git -c user.name=t -c user.email=t@example.com commit -qm start
agent:
  kind: claude-code
  command: {agent}
  env: [FAKE_AGENT_*]
  max_turns: 1
  max_retry_backoff_ms: 1
server:
  port: {port}
---
Work on {{{{ .issue.identifier }}}}.
"#,
        root = p.path("ws").display(),
        agent = FAKE_AGENT,
        port = p.port(),
    );
    p.write("WORKFLOW.md", &wf);
    let list: Vec<Value> = issues
        .iter()
        .map(|(id, identifier)| {
            json!({"id": id, "identifier": identifier, "title": format!("Issue {identifier}"),
                   "state": "To Do", "labels": [], "priority": 1})
        })
        .collect();
    p.issues(Value::Array(list));
    p
}

/// A scenario: `work` steps, then the optional `.sortie/status` declaration, then the result.
fn scenario(p: &Project, identifier: &str, work: &[Value], declared: Option<&str>) {
    p.scenario(identifier, &script(work, declared));
}

fn script(work: &[Value], declared: Option<&str>) -> Vec<Value> {
    let mut lines = vec![json!({"init": {}})];
    lines.extend(work.iter().cloned());
    if let Some(d) = declared {
        lines.push(
            json!({"write_file": {"path": ".sortie/status", "content": format!("{d}\nMy statement.\n")}}),
        );
    }
    lines.push(json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 2}}));
    lines.push(json!({"result": {"subtype": "success", "text": "ok"}}));
    lines
}

fn commit() -> Value {
    json!({"sh": "echo work >> work.txt && git add work.txt && git -c user.name=a -c user.email=a@example.com commit -qm work"})
}

fn edit() -> Value {
    json!({"write_file": {"path": "work.txt", "content": "edited\n"}})
}

fn runs(d: &Daemon, identifier: &str) -> Vec<Value> {
    d.try_get(&format!("/api/v1/runs?issue={identifier}"))
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["runs"].as_array().cloned())
        .unwrap_or_default()
}

fn state_of(p: &Project, id: &str) -> String {
    p.issue_state(id)
}

fn labels_of(p: &Project, id: &str) -> Vec<String> {
    p.read_issues()
        .as_array()
        .and_then(|a| a.iter().find(|i| i["id"] == id).cloned())
        .and_then(|i| i["labels"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect()
}

fn parked<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["parked"]
        .as_array()?
        .iter()
        .find(|r| r["issue_identifier"] == identifier)
}

fn parked_item<'a>(s: &'a Value, identifier: &str) -> Option<&'a Value> {
    s["attention"]
        .as_array()?
        .iter()
        .find(|i| i["kind"] == "parked" && i["issue_identifier"] == identifier)
}

/// Waits for `n` recorded runs of `identifier` and returns them, newest first.
fn wait_runs(d: &Daemon, identifier: &str, n: usize) -> Vec<Value> {
    d.wait_until(&format!("{n} runs of {identifier}"), WAIT, || {
        runs(d, identifier).len() >= n
    });
    runs(d, identifier)
}

#[test]
fn strict_hands_off_a_commit_withholds_the_rest_and_parks_at_the_ceiling() {
    let p = project(
        Some("strict"),
        &[
            ("1", "S-1"),
            ("2", "S-2"),
            ("3", "S-3"),
            ("4", "S-4"),
            ("5", "S-5"),
        ],
    );
    scenario(&p, "S-1", &[commit()], None);
    scenario(&p, "S-2", &[edit()], None);
    scenario(&p, "S-3", &[], Some("needs-human-review"));
    scenario(&p, "S-4", &[], Some("no-change-needed"));
    // A pull-request record the run wrote (an agent that pushed and opened one) is evidence.
    let record = json!({"branch": "fix", "sha": "abc", "pr_number": 7, "owner": "o", "repo": "r"});
    scenario(
        &p,
        "S-5",
        &[json!({"write_file": {"path": ".sortie/scm.json", "content": record.to_string()}})],
        Some("needs-human-review"),
    );
    let d = p.start();

    // A commit is evidence: the issue goes to the handoff state.
    d.wait_until("S-1 handed off", WAIT, || state_of(&p, "1") == "Review");
    let r = wait_runs(&d, "S-1", 1);
    assert_eq!(r[0]["status"], "succeeded", "{r:?}");
    assert_eq!(r[0]["error"], Value::Null);

    d.wait_until("S-5 handed off", WAIT, || state_of(&p, "5") == "Review");
    assert_eq!(wait_runs(&d, "S-5", 1)[0]["status"], "succeeded");

    // A no-change-needed declaration needs no evidence.
    d.wait_until("S-4 moved to No Change", WAIT, || {
        state_of(&p, "4") == "No Change"
    });

    // An edit alone is not evidence under strict: failed runs, no transition, then the park.
    let s = d.wait_state("S-2 parked", WAIT, |s| {
        parked(s, "S-2").is_some() && parked_item(s, "S-2").is_some()
    });
    let row = parked(&s, "S-2").unwrap_or(&Value::Null);
    assert_eq!(row["reason"], "handoff_absence", "{row}");
    assert_eq!(row["status_text"], "Parked: no evidence of work", "{row}");
    assert_eq!(row["label"], "needs-human");
    let item = parked_item(&s, "S-2").unwrap_or(&Value::Null);
    assert_eq!(item["evidence"]["reason"], "handoff_absence", "{item}");
    assert_eq!(item["reason_text"], "Parked: no evidence of work", "{item}");
    let r = runs(&d, "S-2");
    assert_eq!(r.len(), 3, "three withheld handoffs, then the park: {r:?}");
    for run in &r {
        assert_eq!(run["status"], "failed", "{run}");
        assert_eq!(run["error"], WITHHELD_STRICT, "{run}");
        assert_eq!(run["declared_outcome"], Value::Null, "{run}");
    }
    assert_eq!(
        state_of(&p, "2"),
        "To Do",
        "the tracker was not transitioned"
    );
    assert_eq!(labels_of(&p, "2"), ["needs-human"]);

    // A needs-human-review declaration without evidence: failed, the declaration kept.
    let s = d.wait_state("S-3 parked", WAIT, |s| parked(s, "S-3").is_some());
    let r = runs(&d, "S-3");
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(r[0]["status"], "failed");
    assert_eq!(r[0]["declared_outcome"], "needs-human-review", "{:?}", r[0]);
    assert_eq!(r[0]["error"], WITHHELD_STRICT);
    assert_eq!(state_of(&p, "3"), "To Do");
    assert_eq!(
        parked(&s, "S-3").map(|r| r["reason"].clone()),
        Some(json!("handoff_absence"))
    );
    // While parked nothing runs.
    assert_eq!(runs(&d, "S-2").len(), 3);

    // A person removes the label; the released issue runs again, now commits and hands off.
    std::fs::write(
        p.workspace("S-2").join(".scenario"),
        script(&[commit()], None)
            .iter()
            .map(|l| l.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap_or_else(|e| panic!("rescript: {e}"));
    let mut issues = p.read_issues();
    if let Some(arr) = issues.as_array_mut() {
        for i in arr.iter_mut().filter(|i| i["id"] == "2") {
            i["labels"] = json!([]);
        }
    }
    p.issues(issues);
    d.wait_until("S-2 handed off after the release", WAIT, || {
        state_of(&p, "2") == "Review"
    });
    let s = d.wait_state("S-2 no longer parked", WAIT, |s| {
        parked(s, "S-2").is_none() && parked_item(s, "S-2").is_none()
    });
    assert!(parked(&s, "S-3").is_some(), "S-3 stays parked");
    let r = runs(&d, "S-2");
    assert_eq!(r.len(), 4, "{r:?}");
    assert_eq!(r[0]["status"], "succeeded");
    d.stop();
    let log = p.log();
    assert!(
        log.contains("msg=\"issue parked\" issue_id=2 issue_identifier=S-2 reason=handoff_absence"),
        "{log}"
    );
}

#[test]
fn observed_takes_an_edit_and_withholds_a_run_that_did_nothing() {
    let p = project(Some("observed"), &[("1", "O-1"), ("2", "O-2")]);
    scenario(&p, "O-1", &[edit()], Some("needs-human-review"));
    scenario(&p, "O-2", &[], None);
    let d = p.start();
    d.wait_until("O-1 handed off", WAIT, || state_of(&p, "1") == "Review");
    let r = wait_runs(&d, "O-1", 1);
    assert_eq!(r[0]["status"], "succeeded");
    assert_eq!(r[0]["declared_outcome"], "needs-human-review");

    let r = wait_runs(&d, "O-2", 1);
    let first = r.last().cloned().unwrap_or(Value::Null);
    assert_eq!(first["status"], "failed", "{first}");
    assert_eq!(first["error"], WITHHELD_OBSERVED, "{first}");
    d.wait_state("O-2 parked", WAIT, |s| parked(s, "O-2").is_some());
    assert_eq!(state_of(&p, "2"), "To Do");
    d.stop();
    let log = p.log();
    assert!(
        log.contains("handoff withheld: the run shows no evidence of work"),
        "{log}"
    );
}

#[test]
fn without_the_key_a_run_that_did_nothing_hands_off_as_before() {
    let p = project(None, &[("1", "F-1")]);
    scenario(&p, "F-1", &[], None);
    let d = p.start();
    d.wait_until("F-1 handed off", WAIT, || state_of(&p, "1") == "Review");
    let r = wait_runs(&d, "F-1", 1);
    assert_eq!(r[0]["status"], "succeeded");
    assert_eq!(r.len(), 1);
    d.stop();
    assert!(!p.log().contains("workspace evidence"), "nothing was read");

    // `off` written out is the same, and a bad value is refused by validate.
    let p = project(Some("off"), &[("1", "F-1")]);
    scenario(&p, "F-1", &[], None);
    let d = p.start();
    d.wait_until("F-1 handed off", WAIT, || state_of(&p, "1") == "Review");
    d.stop();
    let p = project(Some("sometimes"), &[("1", "F-1")]);
    let out = common::sortie_command()
        .arg("validate")
        .arg(p.workflow())
        .output()
        .unwrap_or_else(|e| panic!("validate: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "tracker.handoff_evidence: must be one of observed, strict, off; got \"sometimes\""
        ),
        "{stderr}"
    );
    // An accepted value is no longer named as unsupported.
    let p = project(Some("strict"), &[("1", "F-1")]);
    let out = common::sortie_command()
        .arg("validate")
        .arg(p.workflow())
        .output()
        .unwrap_or_else(|e| panic!("validate: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("handoff_evidence"), "{stderr}");
}

/// On an SSH worker the workspace is read on the host: a commit there hands off, a run that did
/// nothing is withheld.
#[test]
fn on_an_ssh_worker_the_workspace_is_read_on_the_host() {
    let Some(sshd) = common::sshd::Sshd::start_or_skip() else {
        return;
    };
    let p = project(Some("strict"), &[("1", "H-1"), ("2", "H-2")]);
    scenario(&p, "H-1", &[commit()], Some("needs-human-review"));
    scenario(&p, "H-2", &[], Some("needs-human-review"));
    // The hooks and the agent run on the host, where sortie's environment is not forwarded.
    let wf = std::fs::read_to_string(p.workflow()).unwrap_or_else(|e| panic!("workflow: {e}"));
    let scenarios = p.path("scenarios");
    let wf = wf
        .replace(
            "\"$SORTIE_TEST_SCENARIOS/",
            &format!("\"{}/", scenarios.display()),
        )
        .replace(
            &format!("  command: {FAKE_AGENT}\n"),
            &format!("  command: env FAKE_AGENT_SCENARIO=.scenario {FAKE_AGENT}\n"),
        )
        .replace(
            "server:\n",
            &format!(
                "worker:\n  ssh_hosts: [{}]\n  ssh_config_file: {}\nserver:\n",
                common::sshd::HOST_ALIAS,
                sshd.client_config.display()
            ),
        );
    p.write("WORKFLOW.md", &wf);
    let d = p.start();
    d.wait_until("H-1 handed off", WAIT, || state_of(&p, "1") == "Review");
    let r = wait_runs(&d, "H-1", 1);
    assert_eq!(r[0]["status"], "succeeded", "{r:?}");
    assert_eq!(r[0]["ssh_host"], common::sshd::HOST_ALIAS, "{r:?}");
    let r = wait_runs(&d, "H-2", 1);
    let first = r.last().cloned().unwrap_or(Value::Null);
    assert_eq!(first["status"], "failed", "{first}");
    assert_eq!(first["error"], WITHHELD_STRICT, "{first}");
    assert_eq!(first["declared_outcome"], "needs-human-review");
    assert_eq!(state_of(&p, "2"), "To Do");
    d.stop();
    assert!(
        p.log().contains(
            "msg=\"workspace evidence read\" issue_id=1 issue_identifier=H-1 new_commits=1"
        ),
        "{}",
        p.log()
    );
}

/// The count of withheld handoffs in a row survives a restart: two withheld runs, a run the
/// shutdown stops (which leaves the count as it is), then after the restart one more withheld
/// run reaches the ceiling and parks the issue.
#[test]
fn the_withheld_count_survives_a_restart() {
    let p = project(Some("strict"), &[("1", "R-1")]);
    // The third invocation waits (for a file nobody writes) until the shutdown stops it. Both
    // files live in the markers directory, which a sandboxed agent may write too.
    let count = p.path("markers/invocations");
    let gate = p.path("markers/never");
    let wait_third = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'; if [ $n -eq 3 ]; then while [ ! -e '{g}' ]; do sleep 0.05; done; fi",
        c = count.display(),
        g = gate.display(),
    );
    scenario(&p, "R-1", &[json!({ "sh": wait_third })], None);
    let d = p.start();
    let withheld = |d: &Daemon| {
        runs(d, "R-1")
            .iter()
            .filter(|r| r["error"] == WITHHELD_STRICT)
            .count()
    };
    d.wait_until("two withheld runs", WAIT, || withheld(&d) >= 2);
    d.wait_until("the third invocation", WAIT, || {
        std::fs::read_to_string(&count).is_ok_and(|s| s.trim() == "3")
    });
    d.wait_until("the count on record", WAIT, || {
        p.db_i64("SELECT withheld_in_a_row FROM handoff_absence WHERE issue_id = '1'") == 2
    });
    let s = d.state();
    assert!(parked(&s, "R-1").is_none(), "{s}");
    d.stop();

    // After the restart one more withheld handoff is the third in a row.
    let d = p.start();
    let s = d.wait_state("R-1 parked", WAIT, |s| parked(s, "R-1").is_some());
    assert_eq!(
        parked(&s, "R-1").map(|r| r["reason"].clone()),
        Some(json!("handoff_absence"))
    );
    assert_eq!(withheld(&d), 3, "{:?}", runs(&d, "R-1"));
    d.wait_until("the count reset by the park", WAIT, || {
        p.db_i64("SELECT COUNT(*) FROM handoff_absence") == 0
    });
    d.stop();
}

/// A withheld count ends with the claim: an issue moved to a terminal state while its next run
/// is out is stopped and released, and its stored count is removed with it.
#[test]
fn the_withheld_count_ends_when_the_issue_ends_abnormally() {
    let p = project(Some("strict"), &[("1", "R-1")]);
    // The second invocation waits (for a file nobody writes) until it is stopped.
    let count = p.path("markers/invocations");
    let gate = p.path("markers/never");
    let wait_second = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'; if [ $n -eq 2 ]; then while [ ! -e '{g}' ]; do sleep 0.05; done; fi",
        c = count.display(),
        g = gate.display(),
    );
    scenario(&p, "R-1", &[json!({ "sh": wait_second })], None);
    let d = p.start();
    d.wait_until("the second invocation", WAIT, || {
        std::fs::read_to_string(&count).is_ok_and(|s| s.trim() == "2")
    });
    d.wait_until("the count on record", WAIT, || {
        p.db_i64("SELECT withheld_in_a_row FROM handoff_absence WHERE issue_id = '1'") == 1
    });
    p.set_issue_state("1", "Done");
    d.wait_state("R-1 released", WAIT, |s| {
        s["active"].as_array().is_some_and(|a| a.is_empty())
    });
    d.wait_until("the count removed", WAIT, || {
        p.db_i64("SELECT COUNT(*) FROM handoff_absence") == 0
    });
    d.stop();
}
