//! `sortie mcp-server`: the stdio MCP tool server an agent session starts beside itself.
//!
//! The session's `.sortie/mcp.json` (written by `agent::mcp_file`) starts it as
//! `sortie mcp-server --workflow <abs WORKFLOW.md>` with the session's variables in its
//! environment. It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout ([`protocol`],
//! [`server`]) and registers the tools its environment allows:
//!
//! | tool | registered when | reads |
//! |---|---|---|
//! | `tracker_api` | `tracker.project` is set and the tracker adapter builds | the tracker ([`tracker_api`]) |
//! | `sortie_status` | `SORTIE_WORKSPACE` | `.sortie/state.json` ([`status`]) |
//! | `workspace_history` | `SORTIE_DB_PATH` + `SORTIE_ISSUE_ID` and the database opens read-only | run rows ([`history`]) |
//! | `cost_budget` | `SORTIE_ISSUE_ID`, and the database opens or `SORTIE_API_URL` is set | run rows and the daemon's API ([`cost_budget`], [`live`]) |
//! | `notify_operator` | `SORTIE_API_URL` + `SORTIE_ISSUE_IDENTIFIER`, and a notification destination takes `operator_message` | posts to the daemon's API ([`notify_operator`]) |
//!
//! It never writes the database; what only the running daemon knows (the session now running)
//! it asks the daemon's HTTP API at `SORTIE_API_URL`.

pub mod cost_budget;
pub mod history;
pub mod live;
pub mod notify_operator;
pub mod protocol;
pub mod server;
pub mod status;
pub mod tool;
pub mod tracker_api;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::{LoadOptions, Workflow, load_workflow};
use crate::store::ReadConn;
use server::Server;
use tool::Tool;

/// Opens the database read-only, reading `workflow`'s rows (the single workflow's when
/// `None`), and checks that it answers.
fn open_db(path: &Path, workflow: Option<&str>) -> Result<ReadConn, crate::store::StoreError> {
    let mut conn = ReadConn::open(path)?;
    if let Some(name) = workflow {
        conn = conn.with_scope(crate::store::Scope::one(name));
    }
    conn.ping()?;
    Ok(conn)
}

/// The tools the workflow and environment allow, with one note per tool left out and why.
pub fn tools(
    wf: &Workflow,
    env: &BTreeMap<String, String>,
    clock: Arc<dyn Clock>,
) -> (Vec<Box<dyn Tool>>, Vec<String>) {
    let var = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut tools: Vec<Box<dyn Tool>> = Vec::new();
    let mut notes = Vec::new();

    match wf.config.tracker.project.as_deref().map(str::trim) {
        Some(project) if !project.is_empty() => {
            match crate::registry::build_tracker(&wf.config.tracker_settings(), clock.clone()) {
                Ok(tracker) => tools.push(Box::new(tracker_api::TrackerApiTool { tracker })),
                Err(e) => notes.push(format!("tracker_api: tracker not built: {e}")),
            }
        }
        _ => notes.push("tracker_api: tracker.project is not set".into()),
    }

    match var("SORTIE_WORKSPACE") {
        Some(ws) => tools.push(Box::new(status::StatusTool {
            workspace: PathBuf::from(ws),
            clock: clock.clone(),
        })),
        None => notes.push("sortie_status: SORTIE_WORKSPACE is not set".into()),
    }

    let issue_id = var("SORTIE_ISSUE_ID");
    let db_path = var("SORTIE_DB_PATH").map(PathBuf::from);
    let db = || match (&db_path, issue_id) {
        (Some(p), Some(_)) => {
            open_db(p, var("SORTIE_WORKFLOW")).map_err(|e| format!("database {}: {e}", p.display()))
        }
        (None, _) => Err("SORTIE_DB_PATH is not set".into()),
        (_, None) => Err("SORTIE_ISSUE_ID is not set".into()),
    };
    match db() {
        Ok(conn) => tools.push(Box::new(history::HistoryTool {
            issue_id: issue_id.unwrap_or_default().to_string(),
            db: conn,
        })),
        Err(e) => notes.push(format!("workspace_history: {e}")),
    }

    let api_url = var("SORTIE_API_URL");
    match issue_id {
        Some(id) => {
            let conn = db();
            if conn.is_err() && api_url.is_none() {
                notes.push("cost_budget: neither the database nor SORTIE_API_URL".into());
            } else {
                let a = &wf.config.agent;
                tools.push(Box::new(cost_budget::CostBudgetTool {
                    issue_id: id.to_string(),
                    issue_identifier: var("SORTIE_ISSUE_IDENTIFIER").unwrap_or(id).to_string(),
                    budgets: cost_budget::Budgets {
                        max_tokens: a.max_tokens,
                        max_cost_usd: a.max_cost_usd,
                        max_sessions: a.max_sessions,
                    },
                    db: conn.ok(),
                    daemon: api_url
                        .map(|u| live::DaemonApi::new(u, var("SORTIE_WORKFLOW"), clock.clone())),
                }));
            }
        }
        None => notes.push("cost_budget: SORTIE_ISSUE_ID is not set".into()),
    }
    notify_tool(wf, &var, clock, &mut tools, &mut notes);
    (tools, notes)
}

/// `notify_operator`, when a destination takes operator messages and the daemon is reachable.
fn notify_tool<'a>(
    wf: &Workflow,
    var: &impl Fn(&str) -> Option<&'a str>,
    clock: Arc<dyn Clock>,
    tools: &mut Vec<Box<dyn Tool>>,
    notes: &mut Vec<String>,
) {
    use crate::config::notifications::NotifyEvent;
    let wanted = wf
        .config
        .notifications
        .destinations
        .iter()
        .any(|d| d.events.contains(&NotifyEvent::OperatorMessage));
    match (
        wanted,
        var("SORTIE_API_URL"),
        var("SORTIE_ISSUE_IDENTIFIER"),
    ) {
        (false, ..) => {
            notes.push("notify_operator: no notification destination takes operator_message".into())
        }
        (true, Some(url), Some(identifier)) => {
            tools.push(Box::new(notify_operator::NotifyOperatorTool::new(
                url,
                identifier,
                var("SORTIE_WORKFLOW"),
                clock,
            )))
        }
        _ => notes
            .push("notify_operator: SORTIE_API_URL or SORTIE_ISSUE_IDENTIFIER is not set".into()),
    }
}

/// `sortie mcp-server --workflow <path>`: loads the workflow, serves stdin/stdout until stdin
/// ends; the process exit code (1 for a workflow that does not load or a broken stdout).
pub fn run(workflow: &Path) -> i32 {
    let load = LoadOptions::from_process(None);
    let wf = match load_workflow(workflow, &load) {
        Ok(wf) => wf,
        Err(e) => {
            eprintln!("sortie mcp-server: {e}");
            return 1;
        }
    };
    if let Some(key) = &wf.config.tracker.api_key {
        crate::mask::register_secret(key);
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (tools, notes) = tools(&wf, &load.env, clock);
    for n in notes {
        eprintln!("sortie mcp-server: tool not registered: {n}");
    }
    let server = Server::new(tools);
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    match server.serve(&mut stdin.lock(), &mut stdout.lock()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sortie mcp-server: {e}");
            1
        }
    }
}
