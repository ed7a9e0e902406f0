//! The tracker label-capability check through `sortie validate` and the daemon's startup: a
//! workflow whose labels the selected tracker cannot carry (a stage label with a space on
//! Jira, which refuses such labels) is refused with the setting named, the same workflow on a
//! tracker that takes it is clean, and labels a tracker will not create (Gitea) are named in a
//! warning so a person creates them first.

mod common;

use serde_json::Value;

const AGENT: &str = "agent: {kind: mock}\n";

fn stages(first: &str) -> String {
    format!(
        "dispatch:\n  rules:\n    - name: implement\n      stage: {first}\n      next: review\n    - name: review\n      stage: stage-review\n"
    )
}

fn doc(tracker: &str, extra: &str) -> String {
    format!("---\n{tracker}{AGENT}{extra}---\nWork on {{{{ .issue.identifier }}}}\n")
}

const JIRA: &str = "tracker:\n  kind: jira\n  endpoint: https://acme.atlassian.net\n  api_key: me@acme.test:tok-123\n  project: PROJ\n  active_states: [To Do]\n  terminal_states: [Done]\n  handoff_state: Review\n";
const GITHUB: &str = "tracker:\n  kind: github\n  handoff_state: human-review\n  api_key: tok-123\n  project: acme/app\n  endpoint: http://127.0.0.1:9/api\n";
const GITEA: &str = "tracker:\n  kind: gitea\n  api_key: tok-123\n  project: acme/app\n  endpoint: http://127.0.0.1:9\n";

/// `sortie validate --format json`: exit code and the document.
fn validate(workflow: &str) -> (i32, Value) {
    let setup = common::Setup::new(workflow, "[]");
    let out = common::sortie_command()
        .current_dir(setup.path())
        .args(["validate", "--format", "json", "WORKFLOW.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (out.status.code().unwrap_or(-1), v)
}

fn with_check(v: &Value, list: &str) -> Vec<Value> {
    v[list]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["check"] == "tracker.labels")
        .cloned()
        .collect()
}

#[test]
fn a_label_the_tracker_refuses_is_a_validation_error_naming_the_setting() {
    let (code, v) = validate(&doc(JIRA, &stages("needs implementing")));
    assert_eq!(code, 1, "{v}");
    let errors = with_check(&v, "errors");
    assert_eq!(errors.len(), 1, "{v}");
    let message = errors[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("dispatch.rules[0].stage")
            && message.contains("\"needs implementing\"")
            && message.contains("\"jira\"")
            && message.contains("white space"),
        "{message}"
    );

    // The same stage labels without a space, and the spaced one on a tracker that takes it.
    let (code, v) = validate(&doc(JIRA, &stages("stage-implement")));
    assert_eq!(with_check(&v, "errors"), Vec::<Value>::new(), "{v}");
    assert_eq!(code, 0, "{v}");
    let (code, v) = validate(&doc(GITHUB, &stages("needs implementing")));
    assert_eq!(with_check(&v, "errors"), Vec::<Value>::new(), "{v}");
    assert_eq!(with_check(&v, "warnings"), Vec::<Value>::new(), "{v}");
    assert_eq!(code, 0, "{v}");
}

#[test]
fn labels_a_tracker_does_not_create_are_named_in_a_warning() {
    let reactions = "reactions:\n  ci_failure:\n    provider: gitea\n    escalation: label\n    escalation_label: needs-human\n";
    let (code, v) = validate(&doc(GITEA, reactions));
    assert_eq!(code, 0, "{v}");
    let warnings = with_check(&v, "warnings");
    assert_eq!(warnings.len(), 1, "{v}");
    let text = warnings[0].to_string();
    assert!(
        text.contains("reactions.ci_failure.escalation_label")
            && text.contains("needs-human")
            && text.contains("does not create labels"),
        "{text}"
    );
    // GitHub creates a missing label on first use: nothing to say.
    let github = reactions.replace("gitea", "github");
    let (_, v) = validate(&doc(GITHUB, &github));
    assert_eq!(with_check(&v, "warnings"), Vec::<Value>::new(), "{v}");
}

#[test]
fn the_daemon_refuses_to_start_a_workflow_whose_labels_the_tracker_refuses() {
    let setup = common::Setup::new(&doc(JIRA, &stages("needs implementing")), "[]");
    let mut child = common::sortie_command()
        .current_dir(setup.path())
        .args(["--port", "0", "WORKFLOW.md"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A daemon that started anyway would run on: it is killed at the deadline and fails below.
    let exited = common::poll(std::time::Duration::from_secs(20), common::POLL, || {
        child.try_wait().ok().flatten()
    });
    if exited.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("white space") && text.contains("dispatch.rules[0].stage"),
        "{text}"
    );
}
