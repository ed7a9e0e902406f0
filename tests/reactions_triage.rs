//! Triage runs through the real binary, the fake GitHub forge and the fake agent: with
//! `triage: true`, a fix a reaction would dispatch first goes to a triage turn of the agent,
//! whose prompt starts with `SORTIE TRIAGE` and which writes `.sortie/triage.json`.
//! `act` dispatches the fix, `ignore` dispatches nothing (bot review: `handled`, which survives
//! a restart), `escalate` begins a standing escalation with trigger `triage`, and a triage
//! turn that times out asks a person the same way.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use common::fake_github::{self, FakeGithub, check_run_json, review_comment_json, review_json};
use common::reactions::{LABELS, PR, ReactionProject, escalation_items, idle, row};

const WAIT: Duration = Duration::from_secs(40);
const MARKER: &str = "SORTIE TRIAGE";

/// Puts `steps` (each limited to triage turns) before the project's scenario.
fn triage_steps(p: &ReactionProject, steps: &[serde_json::Value]) {
    let path = p.setup.path().join("scenario.jsonl");
    let rest = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut lines: Vec<String> = steps
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s["prompt_contains"] = MARKER.into();
            s.to_string()
        })
        .collect();
    lines.push(rest);
    std::fs::write(&path, lines.join("\n")).unwrap_or_else(|e| panic!("{e}"));
}

fn verdict(word: &str) -> serde_json::Value {
    json!({"write_file": {"path": ".sortie/triage.json",
        "content": json!({"verdict": word, "reason": "checked by the test"}).to_string()}})
}

fn triage_prompts(p: &ReactionProject) -> Vec<String> {
    p.prompts()
        .into_iter()
        .filter(|x| x.starts_with(MARKER))
        .collect()
}

fn fix_prompts(p: &ReactionProject) -> Vec<String> {
    p.prompts()
        .into_iter()
        .filter(|x| !x.starts_with(MARKER))
        .collect()
}

fn failing(fake: &FakeGithub, sha: &str) {
    fake.with_state(|s| {
        s.set_check_runs(
            sha,
            vec![check_run_json(11, "Test", "completed", Some("failure"))],
        );
        s.set_job_log(11, "error: test_export failed\n");
    });
}

/// In the fake agent's state directory, which a sandboxed run (`SORTIE_TEST_SANDBOX`) can see.
fn release_file(p: &ReactionProject) -> PathBuf {
    p.setup.path().join("agent-state").join("release-triage")
}

fn touch(path: &Path) {
    std::fs::write(path, "go").unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn act_waits_on_the_triage_then_dispatches_the_fix() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let p = ReactionProject::new(
        &fake,
        "  ci_failure:\n    provider: github\n    max_retries: 2\n    triage: true\n",
    );
    let release = release_file(&p);
    triage_steps(
        &p,
        &[
            json!({"wait_file": release.display().to_string()}),
            verdict("act"),
        ],
    );
    let d = p.start();

    // The failing check starts a triage run, and the reaction waits on it.
    let s = d.wait_state("the ci row waiting on triage", WAIT, |s| {
        row(s, "ci").is_some_and(|r| r["wait"] == "triage")
    });
    let ci = row(&s, "ci").unwrap_or_default();
    assert!(
        ci["status_text_full"]
            .as_str()
            .unwrap_or_default()
            .contains("it waits on its triage command"),
        "{ci}"
    );
    assert_eq!(ci["used_attempts"], 0, "{ci}");
    d.wait_until("the triage turn", WAIT, || triage_prompts(&p).len() == 1);
    let triage = &triage_prompts(&p)[0];
    assert!(triage.contains("CI is failing on sha1"), "{triage}");
    assert!(triage.contains("check Test: completed failure"), "{triage}");
    assert!(triage.contains(".sortie/triage.json"), "{triage}");
    assert_eq!(fix_prompts(&p).len(), 1, "no fix before the verdict");

    // act: the fix is dispatched with the CI context, once.
    touch(&release);
    d.wait_until("the CI-fix run", WAIT, || fix_prompts(&p).len() >= 2);
    let fix = &fix_prompts(&p)[1];
    assert!(fix.contains("CI FAILING on sha1: 1 failing."), "{fix}");
    let s = d.wait_state("the fix handed off", WAIT, |s| {
        idle(s) && row(s, "ci").is_some_and(|r| r["used_attempts"] == 1)
    });
    let ci = row(&s, "ci").unwrap_or_default();
    assert!(ci["escalated_at"].is_null(), "{ci}");
    d.wait_until("the verdict logged", WAIT, || {
        d.log_text().contains("reaction triage verdict")
    });
    let log = d.log_text();
    assert!(log.contains("verdict=act"), "{log}");

    // The same failing head is not triaged or fixed again.
    let reads = fake
        .requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
        .len();
    d.wait_until("two more CI reads", WAIT, || {
        fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
            .len()
            >= reads + 2
    });
    assert_eq!(triage_prompts(&p).len(), 1);
    assert_eq!(fix_prompts(&p).len(), 2);
}

#[test]
fn ignore_answers_bot_review_handled_and_survives_a_restart() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.add_review(PR, review_json(200, "COMMENTED", "", "lint-bot", true));
        s.add_review_comment(
            PR,
            200,
            review_comment_json(
                3001,
                "src/export.rs",
                Some(4),
                Some(4),
                Some(2),
                "unused import",
                "lint-bot",
                true,
            ),
        );
    });
    let p = ReactionProject::new(
        &fake,
        "  bot_review:\n    provider: github\n    bot_usernames: [lint-bot]\n    poll_interval_ms: 1000\n    max_continuation_turns: 3\n    triage: true\n",
    );
    triage_steps(&p, &[verdict("ignore")]);
    let d = p.start();

    let s = d.wait_state("the bot review handled", WAIT, |s| {
        row(s, "bot-review").is_some_and(|r| r["last_check"]["handled"] == true)
    });
    let r = row(&s, "bot-review").unwrap_or_default();
    assert_eq!(
        r["status_text"],
        format!("Bot review of #{PR} handled"),
        "{r}"
    );
    assert_eq!(r["wait"], "poll_interval", "{r}");
    assert_eq!(r["used_attempts"], 0, "{r}");
    let triage = &triage_prompts(&p)[0];
    assert!(
        triage.contains("3001 by lint-bot on src/export.rs:4: unused import"),
        "{triage}"
    );

    // More checks of the same comment set start nothing.
    let reads = || {
        fake.requests("GET", &format!("/repos/owner/repo/pulls/{PR}/reviews"))
            .len()
    };
    let before = reads();
    d.wait_until("two more checks", WAIT, || reads() >= before + 2);
    assert_eq!(triage_prompts(&p).len(), 1);
    assert_eq!(fix_prompts(&p).len(), 1, "no bot-review fix run");

    // After a restart the answer comes back with the first check: no new triage.
    drop(d);
    let d = p.start();
    let s = d.wait_state("handled after the restart", WAIT, |s| {
        row(s, "bot-review").is_some_and(|r| r["last_check"]["handled"] == true)
    });
    let r = row(&s, "bot-review").unwrap_or_default();
    assert_eq!(
        r["status_text"],
        format!("Bot review of #{PR} handled"),
        "{r}"
    );
    assert_eq!(triage_prompts(&p).len(), 1, "the answer was kept");
    assert_eq!(fix_prompts(&p).len(), 1);

    // A new comment set is not handled until triaged again.
    fake.with_state(|s| {
        s.add_review_comment(
            PR,
            200,
            review_comment_json(
                3002,
                "src/export.rs",
                Some(9),
                Some(9),
                Some(3),
                "dead code",
                "lint-bot",
                true,
            ),
        )
    });
    d.wait_until("the second triage", WAIT, || triage_prompts(&p).len() == 2);
    d.wait_state("the new set handled", WAIT, |s| {
        row(s, "bot-review").is_some_and(|r| r["last_check"]["handled"] == true)
    });
    assert_eq!(fix_prompts(&p).len(), 1);
}

#[test]
fn escalate_asks_a_person_and_stands_while_the_conflict_does() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.set_mergeable(PR, Some(false), "dirty");
    });
    let p = ReactionProject::new(
        &fake,
        "  merge_conflicts:\n    provider: github\n    max_retries: 2\n    poll_interval_ms: 1000\n    triage: true\n    escalation: label\n    escalation_label: needs-human\n",
    );
    triage_steps(&p, &[verdict("escalate")]);
    let d = p.start();

    d.wait_until("the escalation label", WAIT, || {
        fake.with_state(|s| s.labels(1).contains(&"needs-human".to_string()))
    });
    let s = d.wait_state("the escalation item", WAIT, |s| escalation_items(s) == 1);
    let r = row(&s, "merge-conflict").unwrap_or_default();
    assert_eq!(r["escalation_trigger"], "triage", "{r}");
    assert_eq!(r["used_attempts"], 0, "{r}");
    let item = s["attention"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["kind"] == "reaction_escalated")
        .cloned()
        .unwrap_or_default();
    assert!(
        item.to_string()
            .contains("because its triage command asked for a person"),
        "{item}"
    );
    let triage = &triage_prompts(&p)[0];
    assert!(triage.contains("merge conflicts"), "{triage}");
    let escalated_at = r["escalated_at"].clone();

    // The escalation stands across checks of the same conflict: no new triage, no rebase run.
    let reads = || {
        fake.requests("GET", &format!("/repos/owner/repo/pulls/{PR}"))
            .len()
    };
    let before = reads();
    d.wait_until("two more checks", WAIT, || reads() >= before + 2);
    let s = d.state();
    let r = row(&s, "merge-conflict").unwrap_or_default();
    assert_eq!(r["escalated_at"], escalated_at, "{r}");
    assert_eq!(triage_prompts(&p).len(), 1);
    assert_eq!(fix_prompts(&p).len(), 1, "no rebase run");

    // The conflict resolved ends it.
    fake.with_state(|s| s.set_mergeable(PR, Some(true), "clean"));
    let s = d.wait_state("the escalation ended", WAIT, |s| escalation_items(s) == 0);
    let r = row(&s, "merge-conflict").unwrap_or_default();
    assert!(r["escalated_at"].is_null(), "{r}");
}

#[test]
fn a_triage_turn_past_its_deadline_asks_a_person() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
        s.add_review(
            PR,
            review_json(100, "CHANGES_REQUESTED", "", "alice", false),
        );
        s.add_review_comment(
            PR,
            100,
            review_comment_json(
                1001,
                "src/export.rs",
                Some(10),
                Some(12),
                Some(5),
                "please fix",
                "alice",
                false,
            ),
        );
    });
    let p = ReactionProject::new(
        &fake,
        "  review_comments:\n    provider: github\n    debounce_ms: 0\n    max_continuation_turns: 2\n    triage: true\n    escalation: comment\n",
    );
    let workflow = p.setup.path().join("WORKFLOW.md");
    let text = std::fs::read_to_string(&workflow).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &workflow,
        text.replace(
            "  max_turns: 1\n",
            "  max_turns: 1\n  turn_timeout_ms: 3000\n",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    triage_steps(&p, &[json!({"hang": true})]);
    let d = p.start();

    let s = d.wait_state("the escalation", WAIT, |s| escalation_items(s) == 1);
    let r = row(&s, "review").unwrap_or_default();
    assert_eq!(r["escalation_trigger"], "triage", "{r}");
    assert_eq!(triage_prompts(&p).len(), 1);
    assert_eq!(fix_prompts(&p).len(), 1, "no review-fix run");
    let log = d.log_text();
    assert!(
        log.contains("reaction triage failed; asking a person"),
        "{log}"
    );
    d.wait_until("the escalation comment", WAIT, || {
        !fake
            .requests("POST", "/repos/owner/repo/issues/1/comments")
            .is_empty()
    });
}

/// A triage run is a run in history with the tokens it spent, counted against the issue's
/// token budget: the first run's 15 tokens leave room under `max_tokens: 20`, the triage
/// turn's 15 more do not, so the fix its `act` asks for is held at the budget.
#[test]
fn a_triage_runs_tokens_count_against_the_token_budget() {
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let p = ReactionProject::new(
        &fake,
        "  ci_failure:\n    provider: github\n    max_retries: 2\n    triage: true\n",
    );
    let workflow = p.setup.path().join("WORKFLOW.md");
    let text = std::fs::read_to_string(&workflow).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &workflow,
        text.replace("  max_turns: 1\n", "  max_turns: 1\n  max_tokens: 20\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    triage_steps(&p, &[verdict("act")]);
    let d = p.start();

    // The hold is logged when the fix is refused; the issue waits in the handoff state, so the
    // next poll tick does not list it among the budget holds.
    d.wait_until("the fix held at the token budget", WAIT, || {
        d.log_text().lines().any(|l| {
            l.contains("effort budget exhausted, blocking re-dispatch")
                && l.contains("reason=token_budget")
        })
    });
    let reads = || {
        fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
            .len()
    };
    let before = reads();
    d.wait_until("two more CI reads", WAIT, || reads() >= before + 2);
    assert_eq!(triage_prompts(&p).len(), 1);
    assert_eq!(fix_prompts(&p).len(), 1, "no fix past the budget");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let triage = runs["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["reaction_kind"] == "ci" && r["status"] == "succeeded")
        .cloned()
        .unwrap_or_default();
    assert_eq!(triage["tokens"]["total_tokens"], 15, "{runs}");
    assert_eq!(triage["reaction_config_key"], "ci_failure", "{triage}");
}

/// With SSH workers the triage turn runs on the host the issue's runs use, in the remote
/// workspace, and its verdict is read there: the agent's environment is the host's (ssh sets
/// `SSH_CONNECTION`), and the triage run is recorded with its `ssh_host`.
#[test]
fn on_an_ssh_worker_the_triage_runs_on_the_host() {
    let Some(sshd) = common::sshd::Sshd::start_or_skip() else {
        return;
    };
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let p = ReactionProject::new(
        &fake,
        "  ci_failure:\n    provider: github\n    max_retries: 2\n    triage: true\n",
    );
    let dir = p.setup.path().to_path_buf();
    let env_log = dir.join("env.jsonl");
    // Sortie's environment does not reach the host: the command carries the fake's settings.
    let workflow = dir.join("WORKFLOW.md");
    let text = std::fs::read_to_string(&workflow).unwrap_or_else(|e| panic!("{e}"));
    let command = format!(
        "  command: env FAKE_AGENT_SCENARIO={s} FAKE_AGENT_ARGV_LOG={a} FAKE_AGENT_STATE_DIR={st} FAKE_AGENT_ENV_LOG={e} {agent}\n",
        s = dir.join("scenario.jsonl").display(),
        a = dir.join("argv.jsonl").display(),
        st = dir.join("agent-state").display(),
        e = env_log.display(),
        agent = common::FAKE_AGENT,
    );
    let text = text
        .replace(&format!("  command: {}\n", common::FAKE_AGENT), &command)
        .replace(
            "polling:\n",
            &format!(
                "worker:\n  ssh_hosts: [{}]\n  ssh_config_file: {}\npolling:\n",
                common::sshd::HOST_ALIAS,
                sshd.client_config.display()
            ),
        );
    std::fs::write(&workflow, text).unwrap_or_else(|e| panic!("{e}"));
    triage_steps(&p, &[verdict("act")]);
    let d = p.start();

    d.wait_until("the CI-fix run", WAIT, || fix_prompts(&p).len() >= 2);
    let prompts = p.prompts();
    let at = prompts
        .iter()
        .position(|x| x.starts_with(MARKER))
        .unwrap_or_else(|| panic!("no triage turn: {prompts:?}"));
    let envs: Vec<serde_json::Value> = std::fs::read_to_string(&env_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let triage_env = envs.get(at).cloned().unwrap_or_default();
    assert!(
        triage_env.to_string().contains("SSH_CONNECTION"),
        "the triage agent ran on the host: {triage_env}"
    );
    let mut triage = serde_json::Value::Null;
    d.wait_until("the triage run recorded", WAIT, || {
        let runs = d.get("/api/v1/runs?limit=50").json();
        triage = runs["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| {
                r["reaction_kind"] == "ci"
                    && r["dispatch_id"].is_null()
                    && r["status"] != "ci_failed"
            })
            .cloned()
            .unwrap_or_default();
        !triage.is_null()
    });
    assert_eq!(triage["ssh_host"], common::sshd::HOST_ALIAS, "{triage}");
    assert_eq!(triage["status"], "succeeded", "{triage}");
}

/// Waits until the UTC day has at least two minutes left, so a daily window cannot turn
/// while the test runs.
fn away_from_midnight() {
    use sortie::clock::{Clock, SystemClock};
    const DAY_MS: i64 = 86_400_000;
    let left = |now: i64| DAY_MS - now.rem_euclid(DAY_MS);
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while left(SystemClock.now_ms()) < 120_000 {
        assert!(std::time::Instant::now() < deadline, "the day never turned");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A triage run is priced like any run (under the rates for the model it used) and counts
/// against the spend ceiling: its spend alone reaches the daily ceiling, so the fix its `act`
/// asks for waits for the window instead of starting.
#[test]
fn triage_spend_is_priced_and_a_spend_ceiling_holds_after_it() {
    away_from_midnight();
    let fake = fake_github::start(LABELS);
    fake.with_state(|s| {
        s.add_issue(1, "Add the export button", &["backlog"], false);
        s.add_pull(PR, "sortie/1", "sha1");
    });
    failing(&fake, "sha1");
    let forge = common::reactions::Forge {
        kind: "github",
        url: &fake.url,
        token: fake_github::TOKEN,
        project: "owner/repo",
        owner: "owner",
        repo: "repo",
    };
    // A dollar per million tokens: the coding run's 15 tokens are far below the ceiling, the
    // triage turn's million input tokens are above it.
    let wf = common::reactions::workflow(
        &forge,
        "  ci_failure:\n    provider: github\n    max_retries: 2\n    triage: true\n",
    )
    .replace(
        "  max_turns: 1\n",
        "  max_turns: 1\n  max_daily_cost_usd: 0.5\n",
    )
    .replace(
        "reactions:\n",
        "token_rates:\n  claude-code: {input_per_mtok: 1, output_per_mtok: 1}\nreactions:\n",
    );
    let p = ReactionProject::with_workflow(
        &wf,
        &forge,
        vec![(
            common::reactions::token_env(&forge),
            fake_github::TOKEN.to_string(),
        )],
    );
    triage_steps(
        &p,
        &[
            json!({"assistant": {"text": "looked", "input_tokens": 1_000_000, "output_tokens": 0}}),
            verdict("act"),
        ],
    );
    let d = p.start();

    let s = d.wait_state("the daily ceiling reached by the triage", WAIT, |s| {
        s["spend_ceiling"]["daily"]["holds_dispatch"] == true
    });
    assert_eq!(triage_prompts(&p).len(), 1, "{s}");
    let runs = d.get("/api/v1/runs?limit=50").json();
    let triage_run = runs["runs"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|x| {
                    x["reaction_kind"] == "ci"
                        && x["dispatch_id"].is_null()
                        && x["status"] == "succeeded"
                })
                .cloned()
        })
        .unwrap_or_default();
    assert_eq!(triage_run["cost_status"], "estimated", "{runs}");
    let usd = triage_run["estimated_cost_usd"]
        .as_f64()
        .unwrap_or_default();
    assert!((1.0..1.01).contains(&usd), "{triage_run}");

    // The fix the verdict asks for waits for the window: several checks later no fix ran.
    let reads = || {
        fake.requests("GET", "/repos/owner/repo/commits/sha1/check-runs")
            .len()
    };
    let before = reads();
    d.wait_until("two more CI reads", WAIT, || reads() >= before + 2);
    let s = d.state();
    assert_eq!(fix_prompts(&p).len(), 1, "no fix past the ceiling: {s}");
    assert!(s["running"].as_array().is_some_and(|r| r.is_empty()), "{s}");
}
