//! A project for pull-request reaction tests: a GitHub tracker and forge (the fake), the fake
//! agent whose runs leave a pull-request record (`.sortie/scm.json`) for PR #7 of
//! `owner/repo`, head `sha<turn>`, and a prompt that shows the reaction context.

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

impl ReactionProject {
    /// `reactions_yaml` is the `reactions:` block's body (indented two spaces).
    pub fn new(fake: &FakeGithub, reactions_yaml: &str) -> ReactionProject {
        let setup = Setup::new(&workflow(fake, reactions_yaml), "[]");
        let dir = setup.path().to_path_buf();
        let scenario = write_scenario(&dir);
        let argv_log = dir.join("argv.jsonl");
        let state_dir = dir.join("agent-state");
        std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("{e}"));
        let path = |p: &Path| p.display().to_string();
        let env = vec![
            ("GITHUB_TOKEN".to_string(), TOKEN.to_string()),
            ("FAKE_AGENT_SCENARIO".to_string(), path(&scenario)),
            ("FAKE_AGENT_ARGV_LOG".to_string(), path(&argv_log)),
            ("FAKE_AGENT_STATE_DIR".to_string(), path(&state_dir)),
        ];
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

fn workflow(fake: &FakeGithub, reactions_yaml: &str) -> String {
    format!(
        "---\ntracker:\n  kind: github\n  endpoint: {url}\n  api_key: $GITHUB_TOKEN\n  project: owner/repo\n  active_states: [backlog, in-progress]\n  terminal_states: [done]\n  in_progress_state: in-progress\n  handoff_state: review\ngithub:\n  retry_base_ms: 10\n  timeout_ms: 2000\npolling:\n  interval_ms: 200\nworkspace:\n  root: ./ws\nagent:\n  kind: claude-code\n  command: {agent}\n  max_turns: 1\nreactions:\n{reactions_yaml}---\nWork on {{{{ .issue.identifier }}}}.\n{{{{ if .ci_failure }}}}CI FAILING on {{{{ .ci_failure.ref }}}}: {{{{ .ci_failure.failing_count }}}} failing.{{{{ range .ci_failure.check_runs }}}} check={{{{ .name }}}}/{{{{ .conclusion }}}}{{{{ end }}}}\nLOG:\n{{{{ .ci_failure.log_excerpt }}}}\n{{{{ end }}}}{{{{ range .review_comments }}}}REVIEW {{{{ .id }}}} by {{{{ .reviewer }}}} on {{{{ .file }}}}:{{{{ .start_line }}}}: {{{{ .body }}}}\n{{{{ end }}}}",
        url = fake.url,
        agent = FAKE_AGENT,
    )
}

/// Each invocation N records head `sha<N>` for PR #7, then succeeds.
fn write_scenario(dir: &Path) -> PathBuf {
    let record = |sha: &str| {
        json!({"branch": "sortie/1", "sha": sha, "pr_number": PR, "owner": "owner", "repo": "repo"})
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
