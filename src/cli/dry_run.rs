//! `sortie --dry-run`: one read-only poll. Loads and validates the workflow, queries the
//! tracker once, and prints what a tick would dispatch (dispatch order, workspace path, the
//! rendered first-turn prompt). Starts no agent, opens no database, binds no port, writes
//! nothing to the tracker.

use std::io::Write;
use std::sync::Arc;

use crate::config::Workflow;
use crate::domain::Issue;
use crate::orchestrator::adapters;
use crate::orchestrator::dispatch_pass::{
    Decision, HoldReason, LiveClaims, PassInput, SlotScope, plan, probe_workspace_locks,
    sort_candidates,
};
use crate::prompt::PromptTemplate;
use crate::workspace::WorkspaceManager;

/// Runs the dry run and writes the report to `out`; returns the exit code.
pub fn run(wf: &Workflow, template: &PromptTemplate, out: &mut dyn Write) -> i32 {
    let tracker = match adapters::build_tracker(wf, Arc::new(crate::clock::SystemClock)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sortie: {e}");
            return 1;
        }
    };
    let mut candidates = match tracker.fetch_candidate_issues() {
        Ok(c) => c,
        Err(e) => {
            log::error!(error:% = e; "failed to fetch candidate issues");
            eprintln!("sortie: {e}");
            return 1;
        }
    };
    sort_candidates(&mut candidates);
    let cfg = &wf.config;
    let mut input = PassInput::new(cfg, LiveClaims::default());
    let workspaces = adapters::workspace_manager(wf);
    // A workspace a running sortie holds shows as held, as a tick would see it.
    probe_workspace_locks(&candidates, &mut input, |i| workspaces.lock_holder(i));
    // Unread blocker lists are read as a tick reads them: lazily, within the pass's budget.
    let mut read = crate::orchestrator::dispatch_pass::tracker_reader(tracker.as_ref());
    let decisions = plan(&candidates, &input, &mut read);
    let max_turns = cfg.agent.max_turns.max(1);
    let mut would = 0usize;
    let mut render_failures = 0usize;
    let _ = writeln!(
        out,
        "dry run: {} candidate(s) from tracker {:?}; max_concurrent_agents={}",
        candidates.len(),
        cfg.tracker.kind,
        cfg.agent.max_concurrent_agents
    );
    for (issue, decision) in candidates.iter().zip(&decisions) {
        log::info!(
            issue_id:% = issue.id,
            issue_identifier:% = issue.identifier,
            state:% = issue.state,
            would_dispatch:% = matches!(decision, Decision::Dispatch);
            "dry-run: candidate"
        );
        match decision {
            Decision::Dispatch => {
                would += 1;
                let rendered = print_dispatch(out, &workspaces, template, issue, would, max_turns);
                if !rendered {
                    render_failures += 1;
                }
            }
            Decision::Held(reason) => {
                let _ = writeln!(out, "\n-- held {}: {}", issue.identifier, hold_text(reason));
            }
            Decision::Skip(why) => {
                let _ = writeln!(out, "\n-- skipped {}: {}", issue.identifier, why);
            }
        }
    }
    let _ = writeln!(out, "\ndry run complete: would_dispatch={would}");
    log::info!(
        candidates_fetched:% = candidates.len(),
        would_dispatch:% = would,
        ineligible:% = candidates.len() - would,
        max_concurrent_agents:% = cfg.agent.max_concurrent_agents;
        "dry-run: complete"
    );
    if render_failures > 0 {
        let _ = writeln!(
            out,
            "dry run failed: the prompt did not render for {render_failures} candidate(s)"
        );
        return 1;
    }
    0
}

/// Writes the `n`th dispatch of the report: the issue, its workspace path and its rendered
/// first-turn prompt; returns whether the prompt rendered.
fn print_dispatch(
    out: &mut dyn Write,
    workspaces: &WorkspaceManager,
    template: &PromptTemplate,
    issue: &Issue,
    n: usize,
    max_turns: u32,
) -> bool {
    let mut rendered = true;
    let ws = workspaces
        .path_for(&issue.identifier)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|e| format!("(invalid: {e})"));
    let prompt = crate::prompt::build_turn_prompt(template, issue, Some(0), 1, max_turns)
        .unwrap_or_else(|e| {
            rendered = false;
            eprintln!(
                "sortie: prompt for {} does not render: {}",
                issue.identifier,
                crate::mask::mask(&e.to_string())
            );
            format!("(prompt render failed: {e})")
        });
    let _ = writeln!(
        out,
        "\n== {}. dispatch {} \"{}\" (state {:?}, priority {})",
        n,
        issue.identifier,
        crate::mask::mask(&issue.title),
        issue.state,
        issue
            .priority
            .map(|p| p.to_string())
            .unwrap_or_else(|| "none".into())
    );
    let _ = writeln!(out, "workspace: {ws}");
    let _ = writeln!(out, "prompt:\n{}", crate::mask::mask(&prompt));
    rendered
}

fn hold_text(reason: &HoldReason) -> String {
    match reason {
        HoldReason::BlockedBy(b) => format!(
            "blocked by {}",
            b.iter()
                .map(|r| {
                    let state = if r.state.is_empty() {
                        "no state"
                    } else {
                        r.state.as_str()
                    };
                    format!("{} ({state})", r.identifier)
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        HoldReason::AgentSlotsFull { scope, used, limit } => match scope {
            SlotScope::Global => format!("all {limit} agent slots taken ({used} used)"),
            SlotScope::State(s) => format!("agent slots of state {s:?} taken ({used}/{limit})"),
            SlotScope::Daemon => {
                format!("the daemon's {limit} shared agent slots taken ({used} used)")
            }
        },
        HoldReason::WorkspaceLocked { holder_pid } => match holder_pid {
            Some(pid) => format!("workspace locked by pid {pid}"),
            None => "workspace locked by another process".to_string(),
        },
        HoldReason::IdentifierInUse { by_issue_id } => {
            format!("identifier in use by issue {by_issue_id}")
        }
        HoldReason::UsageLimit { agent_kind, .. } => {
            format!("{agent_kind} usage limit not reset")
        }
        HoldReason::AgentAuthFailed { agent_kind } => format!("{agent_kind} not logged in"),
        HoldReason::SpendCeiling { window, .. } => format!("{window} spend ceiling reached"),
        HoldReason::BlockersUnresolved => "blockers could not be read".to_string(),
        HoldReason::BlockersNotRead => "blockers not read in this pass".to_string(),
        HoldReason::BlockersIncomplete => "blocker list incomplete".to_string(),
        HoldReason::ParkCommentsUnread => "comments of the released park unread".to_string(),
        HoldReason::SshHostsFull => "every SSH host at its session limit".to_string(),
        HoldReason::FailureHeld { cause, runs } => {
            format!("held after {runs} failed run(s) with {cause}")
        }
        HoldReason::Feature(h) => h.dry_run_text.clone(),
    }
}
