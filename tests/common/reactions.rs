//! A project for pull-request reaction tests: a tracker and forge of one kind (GitHub unless
//! told: a fake server), the fake agent whose runs leave a pull-request record
//! (`.sortie/scm.json`) for PR #7 of the forge's repository, head `sha<turn>`, and a prompt
//! that shows the reaction context.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::daemon::Daemon;
use super::fake_github::{FakeGithub, TOKEN};
use super::{FAKE_AGENT, Setup};

pub const LABELS: &[&str] = &["backlog", "in-progress", "review", "done", "needs-human"];

/// The pull request every run records.
pub const PR: u64 = 7;

pub struct ReactionProject {
    pub setup: Setup,
    argv_log: PathBuf,
    env: Vec<(String, String)>,
}

/// The tracker and forge kind a project runs against, over a fake at `url`; the run's pull
/// request lives in `owner/repo`, and the tracker reads `project`.
pub struct Forge<'a> {
    pub kind: &'a str,
    pub url: &'a str,
    pub token: &'a str,
    pub project: &'a str,
    pub owner: &'a str,
    pub repo: &'a str,
}

impl ReactionProject {
    /// A GitHub project; `reactions_yaml` is the `reactions:` block's body (indented two
    /// spaces).
    pub fn new(fake: &FakeGithub, reactions_yaml: &str) -> ReactionProject {
        let forge = Forge {
            kind: "github",
            url: &fake.url,
            token: TOKEN,
            project: "owner/repo",
            owner: "owner",
            repo: "repo",
        };
        ReactionProject::on(&forge, reactions_yaml)
    }

    /// A project on `forge`; the token travels in `$<KIND>_TOKEN`.
    pub fn on(forge: &Forge, reactions_yaml: &str) -> ReactionProject {
        ReactionProject::with_workflow(
            &workflow(forge, reactions_yaml),
            forge,
            vec![(token_env(forge), forge.token.to_string())],
        )
    }

    /// A project running `workflow` (whose agent is [`FAKE_AGENT`] with the
    /// [`PROMPT`] template), the runs recording PR #7 of `forge`'s repository; `env` is added
    /// to the daemon's environment (the tokens the workflow names).
    pub fn with_workflow(
        workflow: &str,
        forge: &Forge,
        mut env: Vec<(String, String)>,
    ) -> ReactionProject {
        let setup = Setup::new(workflow, "[]");
        let dir = setup.path().to_path_buf();
        let scenario = write_scenario(&dir, forge);
        let argv_log = dir.join("argv.jsonl");
        let state_dir = dir.join("agent-state");
        std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("{e}"));
        let path = |p: &Path| p.display().to_string();
        env.extend([
            ("FAKE_AGENT_SCENARIO".to_string(), path(&scenario)),
            ("FAKE_AGENT_ARGV_LOG".to_string(), path(&argv_log)),
            ("FAKE_AGENT_STATE_DIR".to_string(), path(&state_dir)),
        ]);
        ReactionProject {
            setup,
            argv_log,
            env,
        }
    }

    pub fn start(&self) -> Daemon {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.setup.start(&env)
    }

    /// The prompt of every agent invocation so far, oldest first.
    pub fn prompts(&self) -> Vec<String> {
        std::fs::read_to_string(&self.argv_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["prompt"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

pub fn token_env(forge: &Forge) -> String {
    format!("{}_TOKEN", forge.kind.to_uppercase())
}

/// The prompt every reaction project renders: the issue, the CI failure and review comments.
pub const PROMPT: &str = "Work on {{ .issue.identifier }}.\n{{ if .ci_failure }}CI FAILING on {{ .ci_failure.ref }}: {{ .ci_failure.failing_count }} failing.{{ range .ci_failure.check_runs }} check={{ .name }}/{{ .conclusion }}{{ end }}\nLOG:\n{{ .ci_failure.log_excerpt }}\n{{ end }}{{ range .review_comments }}REVIEW {{ .id }} by {{ .reviewer }} on {{ .file }}:{{ .start_line }}: {{ .body }}\n{{ end }}";

pub fn workflow(forge: &Forge, reactions_yaml: &str) -> String {
    format!(
        "---\ntracker:\n  kind: {kind}\n  endpoint: {url}\n  api_key: ${env}\n  project: {project}\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\n{kind}:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\n  env: [FAKE_AGENT_*]\nreactions:\n{reactions_yaml}---\n{PROMPT}",
        kind = forge.kind,
        url = forge.url,
        env = token_env(forge),
        project = forge.project,
        agent = FAKE_AGENT,
    )
}

/// Each invocation N records head `sha<N>` for PR #7, then succeeds.
fn write_scenario(dir: &Path, forge: &Forge) -> PathBuf {
    let record = |sha: &str| {
        json!({"branch": "sortie/1", "sha": sha, "pr_number": PR, "owner": forge.owner,
            "repo": forge.repo})
        .to_string()
    };
    let mut lines: Vec<String> = (1..=8)
        .map(|n| {
            json!({"write_file": {"path": ".sortie/scm.json", "content": record(&format!("sha{n}"))}, "turn": n})
                .to_string()
        })
        .collect();
    lines.push(json!({"init": {}}).to_string());
    lines.push(
        json!({"assistant": {"text": "done", "input_tokens": 10, "output_tokens": 5}}).to_string(),
    );
    lines.push(json!({"result": {"subtype": "success", "text": "ok"}}).to_string());
    let path = dir.join("scenario.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// The row of `kind` in `pending_reactions`.
pub fn row(s: &Value, kind: &str) -> Option<Value> {
    s["pending_reactions"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == kind)
        .cloned()
}

/// `reaction_escalated` attention items.
pub fn escalation_items(s: &Value) -> usize {
    s["attention"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i["kind"] == "reaction_escalated")
                .count()
        })
        .unwrap_or(0)
}

/// Nothing of the issue is running or queued.
pub fn idle(s: &Value) -> bool {
    s["running"].as_array().is_some_and(|r| r.is_empty())
        && s["retrying"].as_array().is_some_and(|r| r.is_empty())
}

/// Auto-merge's course after the merge was sent: the issue reaches `done`, the branch is
/// deleted and no reaction is left; the merge was sent once (`merges` counts the requests) and
/// issue `1`'s outcome names PR #7 of `repository`, merged by auto-merge.
pub fn await_auto_merge_course(
    d: &Daemon,
    repository: &str,
    merges: impl Fn() -> usize,
    done: impl Fn() -> bool,
    branch_gone: impl Fn() -> bool,
) {
    let wait = std::time::Duration::from_secs(40);
    d.wait_until("the issue moved to done", wait, done);
    d.wait_until("the branch deleted", wait, branch_gone);
    let s = d.wait_state("no reaction left", wait, |s| {
        s["pending_reactions"]
            .as_array()
            .is_some_and(|r| r.is_empty())
    });
    assert_eq!(merges(), 1, "the merge is sent once: {s}");
    // The outcome is history: served once the writer has committed it.
    let mut issue = Value::Null;
    d.wait_until("the merged outcome on record", wait, || {
        issue = d.get("/api/v1/1").json();
        issue["history"]["issue_outcome"]["kind"] == "merged"
    });
    let outcome = &issue["history"]["issue_outcome"];
    assert_eq!(outcome["merge_path"], "auto_merge", "{issue}");
    assert_eq!(outcome["pull_request"]["number"], PR, "{issue}");
    assert_eq!(outcome["pull_request"]["repository"], repository, "{issue}");
}
