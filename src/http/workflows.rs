//! The workflows one server answers for. With one workflow every route answers for it, as
//! it always has (`?workflow=` is not read). With several, each workflow has its own
//! [`AppState`] (its orchestrator, its scope of the database, its cached state document) and
//! the routes that answer for one workflow name it with `?workflow=NAME` (the parameter is
//! taken off before the route's own parameters are read); `GET /api/v1/workflows` lists them
//! with their health; the probes, `/metrics`, the dashboard and the OpenAPI document answer
//! for the daemon.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::AppState;
use super::respond::{ApiError, JsonReply};

/// The query parameter naming a workflow.
pub const PARAM: &str = "workflow";

/// One workflow the server answers for.
pub struct ServedWorkflow {
    pub name: String,
    /// Its file, as the daemon loaded it.
    pub path: String,
    pub orch: crate::orchestrator::OrchestratorHandle,
    /// Its scope of the daemon's database.
    pub store: Arc<crate::store::Store>,
}

/// A workflow file the daemon could not load at start.
#[derive(Debug, Clone)]
pub struct LeftOutWorkflow {
    pub name: String,
    pub path: String,
    pub error: String,
}

/// The daemon-wide parts every workflow's [`AppState`] shares, to build the state of a
/// workflow added while the server runs.
pub struct Shared {
    pub clock: Arc<dyn crate::clock::Clock>,
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
    pub sse_open: Arc<std::sync::atomic::AtomicUsize>,
    pub sse_serial: Arc<std::sync::atomic::AtomicUsize>,
    pub max_streams: usize,
    pub webhooks: Arc<super::webhooks::Ingress>,
    pub refusals: Arc<super::refusals::Refusals>,
}

impl Shared {
    fn state(&self, w: ServedWorkflow) -> (String, String, Arc<AppState>) {
        let state = Arc::new(AppState {
            orch: w.orch,
            store: w.store,
            clock: self.clock.clone(),
            version: crate::build_info::VERSION,
            stopping: self.stopping.clone(),
            sse_open: self.sse_open.clone(),
            sse_serial: self.sse_serial.clone(),
            max_streams: self.max_streams,
            state_cache: super::state_doc::StateCache::default(),
            webhooks: self.webhooks.clone(),
            refusals: self.refusals.clone(),
        });
        super::state_doc::spawn_builder(&state);
        (w.name, w.path, state)
    }
}

type Entry = (String, String, Arc<AppState>);

#[derive(Default)]
struct Entries {
    /// In the order the daemon loaded them; the first answers the daemon-wide routes.
    workflows: Vec<Entry>,
    left_out: Vec<LeftOutWorkflow>,
}

/// What the request threads answer for; workflows come and go while a `--workflows` folder
/// changes.
pub struct Served {
    entries: std::sync::RwLock<Entries>,
    shared: Shared,
}

impl Served {
    pub fn new(
        workflows: Vec<ServedWorkflow>,
        left_out: Vec<LeftOutWorkflow>,
        shared: Shared,
    ) -> Served {
        let workflows = workflows.into_iter().map(|w| shared.state(w)).collect();
        Served {
            entries: std::sync::RwLock::new(Entries {
                workflows,
                left_out,
            }),
            shared,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Every loaded workflow: name, path, state.
    pub fn workflows(&self) -> Vec<Entry> {
        self.read().workflows.clone()
    }

    /// Serves a workflow started while the server runs (it replaces a left-out one of its name).
    pub fn add(&self, w: ServedWorkflow) {
        let entry = self.shared.state(w);
        let mut e = self.write();
        e.left_out.retain(|l| l.name != entry.0);
        e.workflows.retain(|x| x.0 != entry.0);
        e.workflows.push(entry);
    }

    /// Stops serving a workflow that ended.
    pub fn remove(&self, name: &str) {
        let mut e = self.write();
        e.workflows.retain(|x| x.0 != name);
        e.left_out.retain(|l| l.name != name);
    }

    /// Lists a workflow that did not load (replacing an earlier entry of its name).
    pub fn set_left_out(&self, l: LeftOutWorkflow) {
        let mut e = self.write();
        e.left_out.retain(|x| x.name != l.name);
        e.left_out.push(l);
    }

    /// The state the daemon-wide routes use (probes, connection accounting, refusals).
    pub fn primary(&self) -> Option<Arc<AppState>> {
        self.read().workflows.first().map(|(_, _, s)| s.clone())
    }

    /// More than one workflow configured (loaded or not): `?workflow=` is needed.
    pub fn several(&self) -> bool {
        let e = self.read();
        e.workflows.len() + e.left_out.len() > 1
    }

    /// The state a request is answered from, and its URL without `workflow=`. A
    /// `daemon_wide` route answers from the first workflow's state; one that answers
    /// `across` every workflow without `?workflow=` too (the router builds that answer).
    pub fn pick(
        &self,
        daemon_wide: bool,
        across: bool,
        url: &str,
    ) -> Result<(Arc<AppState>, String), ApiError> {
        let primary = self
            .primary()
            .ok_or_else(|| ApiError::new(503, "no_workflow", "no workflow is loaded"))?;
        if !self.several() || daemon_wide {
            return Ok((primary, url.to_string()));
        }
        let (name, rest) = take_param(url);
        let Some(name) = name else {
            if across {
                // Answered across every workflow by the router (`Served::aggregate_state`).
                return Ok((primary, url.to_string()));
            }
            return Err(ApiError::new(
                400,
                "workflow_required",
                format!(
                    "this daemon serves several workflows: name one with ?workflow= ({})",
                    self.names().join(", ")
                ),
            ));
        };
        let e = self.read();
        match e.workflows.iter().find(|(n, _, _)| *n == name) {
            Some((_, _, s)) => Ok((s.clone(), rest)),
            None if e.left_out.iter().any(|l| l.name == name) => Err(ApiError::new(
                503,
                "workflow_not_loaded",
                format!("workflow {name:?} did not load; GET /api/v1/workflows says why"),
            )),
            None => Err(ApiError::new(
                404,
                "unknown_workflow",
                format!(
                    "no workflow named {:?}; this daemon serves: {}",
                    super::respond::echo(&name),
                    self.names().join(", ")
                ),
            )),
        }
    }

    fn names(&self) -> Vec<String> {
        let e = self.read();
        e.workflows
            .iter()
            .map(|(n, _, _)| n.clone())
            .chain(e.left_out.iter().map(|l| l.name.clone()))
            .collect()
    }

    /// `GET /api/v1/state` without `?workflow=` when several workflows run: every workflow's
    /// rows in one document, each row with its `workflow`; counts and agent totals summed;
    /// each workflow's config and health under `workflows`.
    pub fn aggregate_state(&self) -> JsonReply {
        let mut lists: Map<String, Value> = Map::new();
        let mut counts = Map::new();
        let mut totals = Map::new();
        let mut per_workflow = Vec::new();
        let mut generated_at = String::new();
        for (name, _, state) in &self.workflows() {
            let snap = state.orch.snapshot();
            let (doc, _) = super::state_doc::view(state, &snap);
            let Ok(Value::Object(doc)) = serde_json::to_value(&doc) else {
                continue;
            };
            for (key, value) in doc {
                match (key.as_str(), value) {
                    ("generated_at", Value::String(t)) => generated_at = generated_at.max(t),
                    ("counts", Value::Object(m)) => add_numbers(&mut counts, m),
                    ("agent_totals", Value::Object(m)) => add_numbers(&mut totals, m),
                    (_, Value::Array(rows)) => {
                        let list = lists
                            .entry(key.clone())
                            .or_insert_with(|| Value::Array(Vec::new()));
                        if let Value::Array(list) = list {
                            list.extend(rows.into_iter().map(|r| with_workflow(r, name)));
                        }
                    }
                    ("config" | "health" | "spend_ceiling" | "rate_limits", v) => {
                        per_workflow.push((name.clone(), key, v));
                    }
                    _ => {}
                }
            }
        }
        let mut workflows: Map<String, Value> = Map::new();
        for (name, key, v) in per_workflow {
            if let Value::Object(m) = workflows
                .entry(name.clone())
                .or_insert_with(|| json!({"name": name}))
            {
                m.insert(key, v);
            }
        }
        let mut doc = Map::new();
        doc.insert("generated_at".into(), Value::String(generated_at));
        doc.insert("version".into(), json!(crate::build_info::VERSION));
        doc.insert("counts".into(), Value::Object(counts));
        doc.extend(lists);
        doc.insert("agent_totals".into(), Value::Object(totals));
        doc.insert(
            "workflows".into(),
            Value::Array(workflows.into_iter().map(|(_, v)| v).collect()),
        );
        JsonReply::ok(Value::Object(doc))
    }

    /// `GET /api/v1/workflows`.
    pub fn list(&self) -> JsonReply {
        let e = self.read();
        let mut rows: Vec<WorkflowRow> = e
            .workflows
            .iter()
            .map(|(name, path, state)| WorkflowRow::loaded(name, path, state))
            .collect();
        rows.extend(e.left_out.iter().map(WorkflowRow::left_out));
        let doc = WorkflowsDoc { workflows: rows };
        JsonReply::ok(serde_json::to_value(&doc).unwrap_or_default())
    }
}

/// Adds `from`'s numbers into `into`, key by key (other values: the first seen).
fn add_numbers(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get(&k), &v) {
            (Some(Value::Number(a)), Value::Number(b)) => {
                let sum = match (a.as_u64(), b.as_u64()) {
                    (Some(x), Some(y)) => json!(x.saturating_add(y)),
                    _ => json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)),
                };
                into.insert(k, sum);
            }
            (None, _) => {
                into.insert(k, v);
            }
            _ => {}
        }
    }
}

/// A row of one workflow's list, with the workflow's name first.
fn with_workflow(row: Value, name: &str) -> Value {
    match row {
        Value::Object(m) => {
            let mut out = Map::with_capacity(m.len() + 1);
            out.insert(PARAM.into(), Value::String(name.to_string()));
            out.extend(m);
            Value::Object(out)
        }
        other => other,
    }
}

/// Whether the URL names a workflow (`workflow=…` in its query).
pub fn names_one(url: &str) -> bool {
    take_param(url).0.is_some()
}

/// Takes `workflow=…` off a URL's query: the (decoded) name, and the URL without it.
fn take_param(url: &str) -> (Option<String>, String) {
    let Some((path, query)) = url.split_once('?') else {
        return (None, url.to_string());
    };
    let mut name = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((k, v)) if k == PARAM && name.is_none() => {
                name = Some(super::query::percent_decode(v));
                false
            }
            _ => true,
        })
        .collect();
    let rest = if kept.iter().all(|p| p.is_empty()) {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    };
    (name, rest)
}

/// `GET /api/v1/workflows`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkflowsDoc {
    pub workflows: Vec<WorkflowRow>,
}

/// Overall health of one workflow.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowStatus {
    /// Every check passes.
    Ok,
    /// It runs, but a check fails (the tracker, the database, the preflight, or the last
    /// reload, which left the last good configuration in force).
    Degraded,
    /// It did not load at start: it runs nothing.
    NotLoaded,
}

/// One workflow.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkflowRow {
    pub name: String,
    pub path: String,
    pub status: WorkflowStatus,
    /// What fails (empty when every check passes).
    pub problems: Vec<String>,
    pub running: usize,
    pub retrying: usize,
    pub held: usize,
    pub max_concurrent_agents: Option<u32>,
}

impl WorkflowRow {
    fn loaded(name: &str, path: &str, state: &AppState) -> WorkflowRow {
        let snap = state.orch.snapshot();
        let h = &snap.health;
        let mut problems = Vec::new();
        let mut check = |ok: bool, what: &str, error: Option<&String>| {
            if !ok {
                problems.push(match error {
                    Some(e) => format!("{what}: {e}"),
                    None => what.to_string(),
                });
            }
        };
        check(
            h.database.failing_streak == 0,
            "database",
            h.database.error.as_ref(),
        );
        check(
            h.preflight.failing_streak == 0,
            "preflight",
            h.preflight.error.as_ref(),
        );
        check(
            h.workflow.failing_streak == 0,
            "reload",
            h.workflow.error.as_ref(),
        );
        check(h.poll.failing_streak == 0, "poll", h.poll.error.as_ref());
        WorkflowRow {
            name: name.to_string(),
            path: path.to_string(),
            status: if problems.is_empty() {
                WorkflowStatus::Ok
            } else {
                WorkflowStatus::Degraded
            },
            problems,
            running: snap.running.len(),
            retrying: snap.retrying.len(),
            held: snap.held.len(),
            max_concurrent_agents: Some(snap.max_concurrent_agents),
        }
    }

    fn left_out(l: &LeftOutWorkflow) -> WorkflowRow {
        WorkflowRow {
            name: l.name.clone(),
            path: l.path.clone(),
            status: WorkflowStatus::NotLoaded,
            problems: vec![l.error.clone()],
            running: 0,
            retrying: 0,
            held: 0,
            max_concurrent_agents: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::take_param;

    #[test]
    fn the_workflow_parameter_is_taken_off_the_query() {
        assert_eq!(
            take_param("/api/v1/runs?workflow=a&limit=5"),
            (Some("a".into()), "/api/v1/runs?limit=5".into())
        );
        assert_eq!(
            take_param("/api/v1/state?workflow=web%2D1"),
            (Some("web-1".into()), "/api/v1/state".into())
        );
        assert_eq!(take_param("/api/v1/state"), (None, "/api/v1/state".into()));
        // A second one stays, for the route to refuse as repeated.
        assert_eq!(
            take_param("/x?workflow=a&workflow=b"),
            (Some("a".into()), "/x?workflow=b".into())
        );
    }
}
